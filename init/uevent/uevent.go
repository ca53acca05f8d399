// Package uevent reads the kernel's device announcements, the uevents udev
// listens to, from a NETLINK_KOBJECT_UEVENT socket. It is shared by the
// module hotplug loop (kmod) and the device links (devlinks): each opens
// its own socket, since the kernel hands every listener every event.
package uevent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Event is the part of a kernel uevent berth uses.
type Event struct {
	Action    string // "add", "remove", "change", "bind"...
	DevPath   string // under /sys, e.g. /devices/pci0000:00/.../nvme/nvme1/nvme1n1
	Subsystem string // "block", "nvme", "pci"...
	DevName   string // the /dev name, e.g. nvme1n1p1; empty for devices without a node
	DevType   string // "disk", "partition"...
	Modalias  string
}

// Parse decodes one kernel uevent datagram: "ACTION@DEVPATH" then
// NUL-separated KEY=VALUE pairs. It returns false for what is no kernel
// uevent (udev's own "libudev" messages, truncated or empty datagrams).
func Parse(b []byte) (Event, bool) {
	fields := bytes.Split(b, []byte{0})
	head := string(fields[0])
	action, devpath, ok := strings.Cut(head, "@")
	if !ok || action == "" || devpath == "" {
		return Event{}, false
	}
	ev := Event{Action: action, DevPath: devpath}
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
		case "SUBSYSTEM":
			ev.Subsystem = v
		case "DEVNAME":
			ev.DevName = v
		case "DEVTYPE":
			ev.DevType = v
		case "MODALIAS":
			ev.Modalias = v
		}
	}
	return ev, true
}

// ErrOverflow means the kernel dropped events because the socket's queue
// was full: the only way to learn what was missed is to rescan sysfs.
var ErrOverflow = errors.New("uevent queue overflowed: events were dropped")

// Conn is a NETLINK_KOBJECT_UEVENT socket bound to the kernel's group.
// Opened before a sysfs scan, it misses no device added after that scan.
type Conn struct {
	fd  int
	buf []byte
	// Slice is the longest a wait blocks before checking its context.
	Slice time.Duration
}

// Open opens and binds the socket.
func Open() (*Conn, error) {
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
	return &Conn{fd: fd, buf: make([]byte, 64<<10), Slice: 50 * time.Millisecond}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

// Receive returns the kernel's events that keep selects, queued or
// arriving before deadline, as soon as there are some; nil when the
// deadline passes or ctx ends first. It returns ErrOverflow (and no
// events) when the kernel dropped some.
func (c *Conn) Receive(ctx context.Context, deadline time.Time, keep func(Event) bool) ([]Event, error) {
	var out []Event
	for {
		n, from, err := unix.Recvfrom(c.fd, c.buf, 0)
		switch {
		case err == nil:
			if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
				continue // not from the kernel
			}
			if ev, ok := Parse(c.buf[:n]); ok && keep(ev) {
				out = append(out, ev)
			}
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			return nil, ErrOverflow
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
		ms := int(min(wait, c.Slice) / time.Millisecond)
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}, max(ms, 1)); err != nil && !errors.Is(err, unix.EINTR) {
			return nil, fmt.Errorf("waiting for uevents: %w", err)
		}
	}
}
