package devlinks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/init/uevent"
)

// Options tune Run.
type Options struct {
	SysFS  string // normally /sys
	DevDir string // normally /dev
	// Identify reads a controller's identify data; nil means the NVMe
	// admin ioctl on DevDir's controller nodes.
	Identify IdentifyFunc
}

// maxErrors bounds the errors the report keeps: the log has them all.
const maxErrors = 8

// Status is the report's devlinks section. It is updated by Run and read
// by whoever writes the report, at any time.
type Status struct {
	mu sync.Mutex
	s  statusJSON
}

type statusJSON struct {
	// Coldplug are the links made for the devices present at start.
	Coldplug []Link `json:"coldplug"`
	// Links is how many links there are now; Made and Removed count the
	// changes since start.
	Links     int      `json:"links"`
	Made      int      `json:"made"`
	Removed   int      `json:"removed"`
	Conflicts []Link   `json:"conflicts,omitempty"`
	Errors    []string `json:"errors,omitempty"`
	// Following is false when no uevents can be had: later devices get
	// no links.
	Following bool `json:"following"`
}

// MarshalJSON reads the status under its lock.
func (s *Status) MarshalJSON() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.s
	if c.Coldplug == nil {
		c.Coldplug = []Link{}
	}
	return json.Marshal(c)
}

func (s *Status) update(f func(*statusJSON)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.s)
}

// noteErrs sets the errors of the latest reconcile: ones a retry cured
// (a link made while PID 1 moved /dev to the new root) are only in the log.
func (s *Status) noteErrs(errs []error) {
	s.update(func(j *statusJSON) {
		j.Errors = nil
		for _, err := range errs {
			j.Errors = append(j.Errors, err.Error())
		}
		if len(j.Errors) > maxErrors {
			j.Errors = j.Errors[len(j.Errors)-maxErrors:]
		}
	})
}

// runner is Run's state: the identify data cache, so an event does not
// send an admin command to every EBS controller again.
type runner struct {
	o     Options
	log   *slog.Logger
	st    *Status
	cache map[string][]byte // by namespace name
}

func (r *runner) identify(disk, sysDir string) ([]byte, error) {
	if b, ok := r.cache[disk]; ok {
		return b, nil
	}
	b, err := r.o.Identify(disk, sysDir)
	if err == nil {
		r.cache[disk] = b
	}
	return b, err
}

// reconcile scans sysfs and makes /dev's links match it, logging each
// link made and removed. It reports whether all went well.
func (r *runner) reconcile(why string) (Change, bool) {
	var errs []error
	devs, err := Scan(r.o.SysFS, r.identify)
	if err != nil {
		r.log.Warn("reading devices", "err", err)
		errs = append(errs, err)
	}
	want := LinkSet(devs)
	ch, err := Reconcile(r.o.DevDir, want)
	if err != nil {
		r.log.Warn("making links", "err", err)
		errs = append(errs, err)
	}
	r.st.noteErrs(errs)
	for _, l := range ch.Made {
		r.log.Info("link added", "link", filepath.Join(r.o.DevDir, l.Name), "device", l.Target, "on", why)
	}
	for _, l := range ch.Removed {
		r.log.Info("link removed", "link", filepath.Join(r.o.DevDir, l.Name), "device", l.Target, "on", why)
	}
	for _, l := range ch.Conflicts {
		r.log.Warn("name taken by something that is no symlink; left alone", "link", filepath.Join(r.o.DevDir, l.Name), "device", l.Target)
	}
	r.st.update(func(j *statusJSON) {
		j.Links = len(want) - len(ch.Conflicts)
		j.Made += len(ch.Made)
		j.Removed += len(ch.Removed)
		j.Conflicts = ch.Conflicts
	})
	return ch, len(errs) == 0
}

// Retry bounds: a failed reconcile is tried again after retryMin,
// doubling to retryMax, until one succeeds.
const (
	retryMin = 500 * time.Millisecond
	retryMax = time.Minute
)

// Run makes the links of the NVMe devices present (the coldplug, whose
// links go into st), then follows the kernel's block uevents and
// reconciles on each batch until ctx ends. It returns nil when ctx ends,
// or an error when it cannot listen for uevents at all (the coldplug's
// links are made even then).
func Run(ctx context.Context, log *slog.Logger, o Options, st *Status) error {
	if o.Identify == nil {
		o.Identify = ReadIdentify(o.DevDir)
	}
	r := &runner{o: o, log: log, st: st, cache: map[string][]byte{}}
	// Opened before the coldplug scan, so a device added during the scan
	// is in the scan or in an event.
	conn, err := uevent.Open()
	ch, ok := r.reconcile("coldplug")
	st.update(func(j *statusJSON) { j.Coldplug = ch.Made; j.Following = err == nil })
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.Slice = time.Second // a long-lived listener need not wake often to notice ctx
	keep := func(ev uevent.Event) bool {
		return ev.Subsystem == "block" && IsNVMe(eventName(ev))
	}
	// The coldplug runs while the root phase moves /dev and /sys to the
	// new root, and a link made in that window fails: failures are
	// retried with backoff, not left for the next device event.
	retry := retryMin
	for ctx.Err() == nil {
		wait := 24 * time.Hour
		if !ok {
			wait = retry
		}
		evs, err := conn.Receive(ctx, time.Now().Add(wait), keep)
		switch {
		case errors.Is(err, uevent.ErrOverflow):
			clear(r.cache)
			_, ok = r.reconcile("uevent overflow")
			continue
		case err != nil:
			// A broken socket would spin; say so and rest a little.
			log.Warn("reading uevents", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
		if len(evs) == 0 {
			if !ok && ctx.Err() == nil {
				if _, ok = r.reconcile("retry"); !ok {
					retry = min(2*retry, retryMax)
				}
			}
			continue
		}
		var why []string
		for _, ev := range evs {
			name := eventName(ev)
			// A namespace added or removed may be another volume under a
			// reused name: forget what its controller said.
			delete(r.cache, diskName(name))
			why = append(why, ev.Action+" "+name)
		}
		_, ok = r.reconcile(strings.Join(why, ","))
	}
	return nil
}

// eventName is the kernel name of an event's device.
func eventName(ev uevent.Event) string {
	if ev.DevName != "" {
		return ev.DevName
	}
	return filepath.Base(ev.DevPath)
}

// diskName is the namespace of a partition's kernel name (itself for a
// namespace).
func diskName(name string) string {
	if m := nvmeName.FindStringSubmatch(name); m != nil && m[2] != "" {
		return strings.TrimSuffix(name, "p"+m[2])
	}
	return name
}
