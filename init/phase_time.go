package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/network/timesync"
)

// firstSyncWait bounds the wait, before kubelet starts, for the first
// NTP answer: the Amazon Time Sync Service answers in well under a
// millisecond, and when nothing answers the wait ends with the client's
// first round (DefaultTimeout) anyway.
const firstSyncWait = 2 * time.Second

// phaseTime starts the NTP client in the background: the command line's
// servers (berth.ntp), DHCP's, then the Amazon Time Sync Service. It does
// not wait for an answer; the services phase's waitTime does, bounded, before kubelet starts,
// so a wrong RTC is stepped before kubelet's first TLS handshake. Not
// fatal: a node with a drifting clock still works for a while, and the
// report says why it is not synced.
func phaseTime(ctx context.Context, b *boot, log *slog.Logger) error {
	n := b.cfg.NTP
	if n.Off {
		log.Info("skipped: berth.ntp=off")
		return nil
	}
	var dhcp, node []netip.Addr
	var err error
	if r := b.node.net; r != nil {
		for _, s := range r.Addresses {
			// "10.0.2.15/24", or a bare address.
			if p, perr := netip.ParsePrefix(s); perr == nil {
				node = append(node, p.Addr())
			} else if a, perr := netip.ParseAddr(s); perr == nil {
				node = append(node, a)
			}
		}
		for _, s := range r.NTP {
			a, perr := netip.ParseAddr(s)
			if perr != nil {
				// The network package checked them; this is a bug there.
				err = fmt.Errorf("NTP server %q from the network phase: %w", s, perr)
				continue
			}
			dhcp = append(dhcp, a)
		}
	}
	c := timesync.New(timesync.Options{
		Sources:  timesync.Sources(n.Servers, dhcp, node),
		Clock:    timesync.Adjtimex{},
		Policy:   timesync.DefaultPolicy(),
		Log:      log,
		Since:    b.clock,
		OnChange: b.refreshTime,
	})
	b.node.time = c
	st := c.Status()
	b.repMu.Lock()
	b.rep.Time = &st
	b.repMu.Unlock()
	b.goSafe(log, "timesync", func() { c.Run(ctx) })
	log.Info("time sync started", "sources", len(st.Sources), "first", st.Sources[0].Addr)
	return err
}

// refreshTime takes the time client's status into the report and, once
// the boot report is out, rewrites /run/berth/boot.json with it.
func (b *boot) refreshTime(st timesync.Status) {
	b.updateReport("time", func(r *report.Report) { r.Time = &st })
}
