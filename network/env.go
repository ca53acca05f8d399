package network

import (
	"fmt"
	"os"
	"runtime"

	"github.com/berth-node/berth/internal/safe"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// env is where the acting code acts: a netlink handle and, for tests, the
// network namespace that sockets and /proc/sys writes must be made in.
type env struct {
	nl *netlink.Handle
	ns netns.NsHandle // 0: the caller's own namespace
}

// newEnv opens a NETLINK_ROUTE handle only: netlink's default also opens
// XFRM and netfilter sockets, which fail with EPROTONOSUPPORT on a kernel
// whose xfrm_user/nfnetlink are modules not yet loaded (Debian's).
func newEnv(ns netns.NsHandle) (*env, error) {
	if ns == 0 {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("opening netlink: %w", err)
		}
		return &env{nl: h}, nil
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening netlink in namespace %s: %w", ns, err)
	}
	return &env{nl: h, ns: ns}, nil
}

func (e *env) close() { e.nl.Close() }

// do runs fn in the target namespace. A socket keeps the namespace it was
// made in, so only its creation needs the switch; the OS thread stays
// locked while switched so no other goroutine runs there.
func (e *env) do(fn func() error) error {
	if e.ns == 0 {
		return fn()
	}
	// A fresh goroutine so that, should switching back fail, it can end
	// still locked: Go then retires the thread instead of reusing it in the
	// wrong namespace.
	errc := make(chan error, 1)
	// A panic in fn (or here) leaves the thread locked in the other
	// namespace, and the goroutine's end then retires it: the panic
	// becomes this call's error.
	safe.Go(nil, "netns", func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("reading the current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(e.ns); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", e.ns, err)
			return
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}, func(p *safe.Panic) { errc <- fmt.Errorf("in network namespace %s: %w", e.ns, p) })
	return <-errc
}

// writeSysctl writes a /proc/sys/net value in the target namespace (the
// proc files resolve to the namespace of the thread that opens them).
func (e *env) writeSysctl(path, value string) error {
	return e.do(func() error {
		return os.WriteFile(path, []byte(value), 0o644)
	})
}

// SetHostname sets the kernel's hostname (the UTS nodename).
func SetHostname(name string) error {
	if err := checkHostname(name); err != nil {
		return fmt.Errorf("setting hostname %q: %w", name, err)
	}
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("setting hostname %q: %w", name, err)
	}
	return nil
}
