package kmod

import (
	"context"
	"errors"
	"time"

	"github.com/berth-node/berth/init/uevent"
)

// uevents is coldplug's device source on the kernel's uevent socket: the
// modaliases of the devices it announces as added.
type uevents struct {
	conn *uevent.Conn
	scan func() ([]string, error) // after an overflow, the only way to know what was missed
}

func openUevents(scan func() ([]string, error)) (*uevents, error) {
	c, err := uevent.Open()
	if err != nil {
		return nil, err
	}
	return &uevents{conn: c, scan: scan}, nil
}

func (u *uevents) Close() error { return u.conn.Close() }

func (u *uevents) Scan() ([]string, error) { return u.scan() }

// Added returns the modaliases of the "add" uevents queued or arriving
// before deadline, as soon as there are some.
func (u *uevents) Added(ctx context.Context, deadline time.Time) ([]string, error) {
	evs, err := u.conn.Receive(ctx, deadline, func(ev uevent.Event) bool { return ev.Action == "add" && ev.Modalias != "" })
	if errors.Is(err, uevent.ErrOverflow) {
		// Events were dropped: rescan to learn every device.
		return u.scan()
	}
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.Modalias)
	}
	if len(out) == 0 {
		out = nil
	}
	return out, err
}
