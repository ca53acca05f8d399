package network

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkPoll is how often a link wait looks again; netlink dumps are cheap
// and polling keeps the wait trivially bounded.
const linkPoll = 20 * time.Millisecond

func (e *env) linkInfos() ([]LinkInfo, map[int]netlink.Link, error) {
	links, err := e.nl.LinkList()
	if err != nil {
		return nil, nil, fmt.Errorf("listing links: %w", err)
	}
	var infos []LinkInfo
	byIndex := map[int]netlink.Link{}
	for _, l := range links {
		a := l.Attrs()
		byIndex[a.Index] = l
		infos = append(infos, LinkInfo{
			Index:    a.Index,
			Name:     a.Name,
			MAC:      a.HardwareAddr,
			Type:     l.Type(),
			Virtual:  e.ns == 0 && isVirtual(a.Name),
			Loopback: a.Flags&net.FlagLoopback != 0,
		})
	}
	return infos, byIndex, nil
}

// isVirtual says whether sysfs puts the device under /sys/devices/virtual
// (tunnels, dummies, ...), which is how udev tells NICs from the rest.
func isVirtual(name string) bool {
	p, err := filepath.EvalSymlinks(filepath.Join("/sys/class/net", name))
	if err != nil {
		return false
	}
	return strings.Contains(p, "/devices/virtual/")
}

func (e *env) loUp() error {
	lo, err := e.nl.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := e.nl.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}

// waitLink waits until the wanted link exists (NIC drivers register their
// links some time after the module loads), sets it up and waits for
// carrier, all before ctx's deadline.
func (e *env) waitLink(ctx context.Context, log *slog.Logger, want string) (netlink.Link, error) {
	var last error
	var chosen netlink.Link
	for chosen == nil {
		infos, byIndex, err := e.linkInfos()
		if err == nil {
			var li LinkInfo
			li, err = ChoosePrimary(infos, want)
			if err == nil {
				chosen = byIndex[li.Index]
				break
			}
		}
		last = err
		if err := sleepCtx(ctx, linkPoll); err != nil {
			return nil, fmt.Errorf("waiting for the primary link (%s): %w: %w", selector(want), err, last)
		}
	}
	name := chosen.Attrs().Name
	if err := e.nl.LinkSetUp(chosen); err != nil {
		return nil, fmt.Errorf("bringing %s up: %w", name, err)
	}
	for {
		l, err := e.nl.LinkByIndex(chosen.Attrs().Index)
		if err != nil {
			return nil, fmt.Errorf("reading link %s: %w", name, err)
		}
		a := l.Attrs()
		if a.RawFlags&unix.IFF_LOWER_UP != 0 || a.OperState == netlink.OperUp {
			log.Debug("link has carrier", "interface", name, "mac", a.HardwareAddr.String())
			return l, nil
		}
		if err := sleepCtx(ctx, linkPoll); err != nil {
			return nil, fmt.Errorf("waiting for carrier on %s (operstate %s): %w", name, a.OperState, err)
		}
	}
}

func selector(want string) string {
	if want == "" {
		return "first Ethernet link"
	}
	return want
}

// enableRA makes the link accept router advertisements even if forwarding
// gets turned on later (CNI plugins do): accept_ra=2. IPv6 may be absent
// (ipv6.disable=1); that is not an error for an IPv4 node.
func (e *env) enableRA(log *slog.Logger, name string) {
	p := filepath.Join("/proc/sys/net/ipv6/conf", name, "accept_ra")
	if err := e.writeSysctl(p, "2"); err != nil {
		if os.IsNotExist(err) {
			log.Debug("no IPv6 on link; not accepting router advertisements", "interface", name)
			return
		}
		log.Warn("could not enable IPv6 router advertisements", "interface", name, "file", p, "err", err)
	}
}

// waitSLAAC waits, bounded by ctx, for a global IPv6 address that is no
// longer tentative. It reports whether one came.
func (e *env) waitSLAAC(ctx context.Context, link netlink.Link) ([]netlink.Addr, bool) {
	for {
		addrs, err := e.nl.AddrList(link, netlink.FAMILY_V6)
		if err == nil {
			var ok []netlink.Addr
			for _, a := range addrs {
				if a.IP.IsGlobalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
					ok = append(ok, a)
				}
			}
			if len(ok) > 0 {
				return ok, true
			}
		}
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			return nil, false
		}
	}
}

// sleepCtx waits d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
