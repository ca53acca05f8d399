package main

import (
	"context"
	"time"

	"github.com/berth-node/berth/init/report"
)

// liveRefresh is how often boot.json's live section is refreshed when
// nothing else rewrites the file. A quiet node rewrites boot.json only on
// a restart, a time sync or a notice, so without this its live figures
// could be hours old; once a minute is what a soak samples at, and one
// rewrite of a few KiB on /run a minute costs PID 1 nothing it would see.
const liveRefresh = time.Minute

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
		if b.serviceLogBytes != nil {
			l.ServiceLogsKiB = b.serviceLogBytes() / 1024
		}
		b.rep.Live = &l
	}
	return b.rep.Write(b.reportPath)
}

// refreshLive rewrites boot.json every interval until ctx ends, so its
// live section stays fresh on a node where nothing else happens.
func (b *boot) refreshLive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.updateReport("live", func(*report.Report) {})
		}
	}
}
