package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
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
	if b.cfg.NTP.Off {
		log.Info("skipped: berth.ntp=off")
		return nil
	}
	srcs, err := b.timeSources(nil)
	b.startTime(ctx, log, srcs)
	return err
}

// timeSources are the NTP client's sources: user data's servers (the
// plan's NTPServers, port 123) first, then the command line's, DHCP's and
// the Amazon Time Sync Service (timesync.Sources).
func (b *boot) timeSources(user []string) ([]timesync.Source, error) {
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
	var srcs []timesync.Source
	for _, h := range user {
		srcs = append(srcs, timesync.Source{Addr: net.JoinHostPort(h, "123"), Origin: timesync.OriginUserData})
	}
	for _, s := range timesync.Sources(b.cfg.NTP.Servers, dhcp, node) {
		if !slices.ContainsFunc(srcs, func(u timesync.Source) bool { return u.Addr == s.Addr }) {
			srcs = append(srcs, s)
		}
	}
	return srcs, err
}

// startTime starts an NTP client on srcs in the background, in place of
// the one running (stopped first): the time phase starts the boot's, the
// apply phase one with user data's servers first (retime). Only the
// running client writes the report's time section.
func (b *boot) startTime(ctx context.Context, log *slog.Logger, srcs []timesync.Source) {
	if b.node.timeStop != nil {
		b.node.timeStop()
	}
	ctx, stop := context.WithCancel(ctx)
	c := timesync.New(timesync.Options{
		Sources: srcs,
		Clock:   timesync.Adjtimex{},
		Policy:  timesync.DefaultPolicy(),
		Log:     log,
		Since:   b.clock,
		OnChange: func(st timesync.Status) {
			// A stopped client's last answers must not overwrite the
			// running one's status.
			if ctx.Err() == nil {
				b.refreshTime(st)
			}
		},
	})
	b.node.time, b.node.timeStop = c, stop
	st := c.Status()
	b.repMu.Lock()
	b.rep.Time = &st
	b.repMu.Unlock()
	b.goSafe(log, "timesync", func() { c.Run(ctx) })
	log.Info("time sync started", "sources", len(st.Sources), "first", st.Sources[0].Addr)
}

// retime restarts the NTP client with user data's servers first (the
// plan's NTPServers, the berth.dev/ntp-servers annotation), the time
// phase's sources after them as fallbacks. The clock the first client
// may have set already stays; the new one's first answer is what the
// services phase's bounded wait waits for. With berth.ntp=off there is
// no client, and the command line wins: user data's servers are not
// asked.
func (b *boot) retime(ctx context.Context, log *slog.Logger, servers []string) {
	if len(servers) == 0 {
		return
	}
	if b.cfg.NTP.Off {
		log.Warn("berth.ntp=off on the command line: user data's NTP servers are not asked", "servers", servers)
		return
	}
	srcs, err := b.timeSources(servers)
	if err != nil {
		log.Warn("NTP sources", "err", err)
	}
	log.Info("NTP servers from user data first", "servers", servers)
	// The client's lines are the time phase's, as the first client's.
	b.startTime(ctx, b.log.With("phase", "time"), srcs)
}

// refreshTime takes the time client's status into the report and, once
// the boot report is out, rewrites /run/berth/boot.json with it.
func (b *boot) refreshTime(st timesync.Status) {
	b.updateReport("time", func(r *report.Report) { r.Time = &st })
}
