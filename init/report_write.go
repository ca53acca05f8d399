package main

import (
	"github.com/berth-node/berth/report"
)

// updateReport changes the boot report under its lock and, once the report
// is out, rewrites boot.json with it. section names the change in the
// warning when the write fails (a full /run must not stop supervising).
func (b *boot) updateReport(section string, update func(*report.Report)) {
	b.repMu.Lock()
	defer b.repMu.Unlock()
	update(b.rep)
	if !b.reported {
		return
	}
	if err := b.writeReport(); err != nil {
		b.log.Warn("updating the boot report", "phase", section, "file", b.reportPath, "err", err)
	}
}

// writeReport writes boot.json with berth's live figures as of now. The
// caller holds repMu.
func (b *boot) writeReport() error {
	if l, err := report.ReadLive(b.clock().Milliseconds()); err != nil {
		b.log.Debug("reading berth's live figures for boot.json", "err", err)
	} else {
		b.rep.Live = &l
	}
	return b.rep.Write(b.reportPath)
}
