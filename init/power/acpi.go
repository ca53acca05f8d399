package power

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The kernel's ACPI event family (drivers/acpi/event.c).
const (
	acpiFamily     = "acpi_event"
	acpiGroup      = "acpi_mc_group"
	acpiAttrEvent  = 1  // ACPI_GENL_ATTR_EVENT
	acpiEventSize  = 44 // struct acpi_genl_event: char[20], char[15], pad, u32, u32
	nlmsgHdrLen    = 16
	genlHdrLen     = 4
	nlaHdrLen      = 4
	powerButtonKey = "button/power"
)

// ACPIEvent is one struct acpi_genl_event.
type ACPIEvent struct {
	DeviceClass string // "button/power", "button/sleep", "ac_adapter"...
	BusID       string // "LNXPWRBN:00", "PNP0C0C:00"...
	Type        uint32
	Data        uint32
}

// IsPowerButton reports whether the event is a press of the power button.
func (e ACPIEvent) IsPowerButton() bool {
	return strings.HasPrefix(e.DeviceClass, powerButtonKey)
}

// ParseACPIMessages decodes the ACPI events in one netlink datagram from
// the acpi_event family whose id is family. Messages of other types are
// skipped; a truncated or inconsistent message is an error.
func ParseACPIMessages(b []byte, family uint16) ([]ACPIEvent, error) {
	var out []ACPIEvent
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return out, fmt.Errorf("netlink message: %d bytes left, header needs %d", len(b), nlmsgHdrLen)
		}
		msgLen := int(binary.NativeEndian.Uint32(b[0:4]))
		msgType := binary.NativeEndian.Uint16(b[4:6])
		if msgLen < nlmsgHdrLen || msgLen > len(b) {
			return out, fmt.Errorf("netlink message: length %d with %d bytes left", msgLen, len(b))
		}
		msg := b[nlmsgHdrLen:msgLen]
		if msgType == family && len(msg) >= genlHdrLen {
			evs, err := parseACPIAttrs(msg[genlHdrLen:])
			if err != nil {
				return out, err
			}
			out = append(out, evs...)
		}
		next := align4(msgLen)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return out, nil
}

func parseACPIAttrs(b []byte) ([]ACPIEvent, error) {
	var out []ACPIEvent
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & 0x3fff // drop NLA_F_NESTED/NET_BYTEORDER
		if l < nlaHdrLen || l > len(b) {
			return out, fmt.Errorf("netlink attribute: length %d with %d bytes left", l, len(b))
		}
		payload := b[nlaHdrLen:l]
		if typ == acpiAttrEvent {
			if len(payload) < acpiEventSize {
				return out, fmt.Errorf("acpi_genl_event: %d bytes, want %d", len(payload), acpiEventSize)
			}
			out = append(out, ACPIEvent{
				DeviceClass: cString(payload[0:20]),
				BusID:       cString(payload[20:35]),
				Type:        binary.NativeEndian.Uint32(payload[36:40]),
				Data:        binary.NativeEndian.Uint32(payload[40:44]),
			})
		}
		next := align4(l)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return out, nil
}

func align4(n int) int { return (n + 3) &^ 3 }

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ACPIButton is a subscription to the kernel's ACPI events.
type ACPIButton struct {
	f      *os.File
	family uint16
}

// OpenACPIButton joins the acpi_event multicast group. The ACPI core
// registers the family at boot, before any module loads, so this can run in
// the early phase; the events start once the `button` module is bound.
func OpenACPIButton() (*ACPIButton, error) {
	fam, err := netlink.GenlFamilyGet(acpiFamily)
	if err != nil {
		return nil, fmt.Errorf("looking up generic netlink family %q (kernel without ACPI?): %w", acpiFamily, err)
	}
	var group uint32
	for _, g := range fam.Groups {
		if g.Name == acpiGroup {
			group = g.ID
		}
	}
	if group == 0 {
		return nil, fmt.Errorf("generic netlink family %q has no group %q", acpiFamily, acpiGroup)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("opening generic netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding generic netlink socket: %w", err)
	}
	// Group ids of generic netlink can exceed 32, which the bind bitmask
	// cannot express; the socket option can.
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(group)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("joining %s/%s (group %d): %w", acpiFamily, acpiGroup, group, err)
	}
	// A non-blocking fd in an os.File uses the runtime poller, so Close
	// from another goroutine ends a pending Read.
	return &ACPIButton{f: os.NewFile(uintptr(fd), "acpi_event"), family: fam.ID}, nil
}

// Run sends a poweroff request on out for every power button press until
// ctx ends. Errors reading the socket are logged and retried after a
// pause, so a transient ENOBUFS does not stop power button handling.
func (a *ACPIButton) Run(ctx context.Context, log *slog.Logger, out chan<- Request) {
	stop := context.AfterFunc(ctx, func() { a.f.Close() })
	defer stop()
	buf := make([]byte, 8192)
	for {
		n, err := a.f.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrClosed) {
				return
			}
			log.Warn("reading ACPI events", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		evs, err := ParseACPIMessages(buf[:n], a.family)
		if err != nil {
			log.Warn("decoding ACPI event", "err", err)
		}
		for _, ev := range evs {
			log.Debug("ACPI event", "class", ev.DeviceClass, "bus_id", ev.BusID, "type", ev.Type, "data", ev.Data)
			if !ev.IsPowerButton() {
				continue
			}
			log.Info("shutdown requested", "reason", "ACPI power button", "bus_id", ev.BusID, "mode", PowerOff.String())
			select {
			case out <- Request{Mode: PowerOff, Reason: "ACPI power button"}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Close ends the subscription.
func (a *ACPIButton) Close() error { return a.f.Close() }
