package kmod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Uevent is the part of a kernel uevent coldplug needs.
type Uevent struct {
	Action   string // "add", "remove", "bind"...
	DevPath  string
	Modalias string
}

// ParseUevent decodes one kernel uevent datagram: "ACTION@DEVPATH" then
// NUL-separated KEY=VALUE pairs. It returns false for what is no kernel
// uevent (udev's own "libudev" messages, truncated or empty datagrams).
func ParseUevent(b []byte) (Uevent, bool) {
	fields := bytes.Split(b, []byte{0})
	head := string(fields[0])
	action, devpath, ok := strings.Cut(head, "@")
	if !ok || action == "" || devpath == "" {
		return Uevent{}, false
	}
	ev := Uevent{Action: action, DevPath: devpath}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(string(f), "=")
		if !ok || v == "" {
			continue // an empty value must not blank the header's action or path
		}
		switch k {
		case "ACTION":
			ev.Action = v
		case "DEVPATH":
			ev.DevPath = v
		case "MODALIAS":
			ev.Modalias = v
		}
	}
	return ev, true
}

// uevents is a NETLINK_KOBJECT_UEVENT socket: the kernel's announcement of
// every device added, which is what udev listens to. Opened before the
// first sysfs scan, it misses no device added after that scan.
type uevents struct {
	fd   int
	scan func() ([]string, error) // after an overflow, the only way to know what was missed
	buf  []byte
	// slice is the longest a wait blocks before checking its context.
	slice time.Duration
}

func openUevents(scan func() ([]string, error)) (*uevents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("opening uevent netlink socket: %w", err)
	}
	// A burst of events (every loop device, every partition) must not
	// overflow the default buffer; FORCE needs CAP_NET_ADMIN, which PID 1
	// has, and failing it only makes an overflow (handled) likelier.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding uevent netlink socket to the kernel's group: %w", err)
	}
	return &uevents{fd: fd, scan: scan, buf: make([]byte, 64<<10), slice: 50 * time.Millisecond}, nil
}

func (u *uevents) Close() error { return unix.Close(u.fd) }

func (u *uevents) Scan() ([]string, error) { return u.scan() }

// Added returns the modaliases of the "add" uevents queued or arriving
// before deadline, as soon as there are some.
func (u *uevents) Added(ctx context.Context, deadline time.Time) ([]string, error) {
	var out []string
	for {
		n, from, err := unix.Recvfrom(u.fd, u.buf, 0)
		switch {
		case err == nil:
			if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
				continue // not from the kernel
			}
			if ev, ok := ParseUevent(u.buf[:n]); ok && ev.Action == "add" && ev.Modalias != "" {
				out = append(out, ev.Modalias)
			}
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			// Events were dropped: rescan to learn every device.
			return u.scan()
		case !errors.Is(err, unix.EAGAIN):
			return out, fmt.Errorf("reading uevents: %w", err)
		}
		// Queue drained.
		if len(out) > 0 {
			return out, nil
		}
		wait := time.Until(deadline)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			wait = time.Until(d)
		}
		if wait <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		// Poll in slices so a cancelled context is noticed soon.
		ms := int(min(wait, u.slice) / time.Millisecond)
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(u.fd), Events: unix.POLLIN}}, max(ms, 1)); err != nil && !errors.Is(err, unix.EINTR) {
			return nil, fmt.Errorf("waiting for uevents: %w", err)
		}
	}
}
