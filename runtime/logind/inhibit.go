package logind

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/internal/safe"
)

// inhibitor is one Inhibit call: berth keeps the read end of a pipe whose
// write end the client holds; EOF on the read end is the client closing
// it (or exiting), as with logind's FIFO.
type inhibitor struct {
	id                   uint64
	what, who, why, mode string
	pid                  int32
	since                time.Time
	r                    *os.File
	released             chan struct{}
	releasedAt           time.Time // set before released closes
}

// inhibitWhats are the lock types logind knows; berth acts on "shutdown"
// only (a node never sleeps or idles), and keeps the others so a client
// that asks for them gets what logind would give.
var inhibitWhats = []string{"shutdown", "sleep", "idle", "handle-power-key", "handle-suspend-key", "handle-hibernate-key", "handle-lid-switch", "handle-reboot-key"}

// checkInhibit decides whether an Inhibit call is served. Only "delay"
// mode: a "block" lock would let a client keep the node up after EC2 has
// asked for it, which is what the power button means on a node.
func checkInhibit(what, mode string) (shutdown bool, err error) {
	if what == "" {
		return false, fmt.Errorf("Inhibit: what is empty")
	}
	for _, w := range strings.Split(what, ":") {
		if !slices.Contains(inhibitWhats, w) {
			return false, fmt.Errorf("Inhibit: unknown lock type %q", w)
		}
		if w == "shutdown" {
			shutdown = true
		}
	}
	if mode != "delay" {
		return false, fmt.Errorf("Inhibit: mode %q not served: berth takes delay locks only, bounded by InhibitDelayMaxSec", mode)
	}
	return shutdown, nil
}

func (s *Server) inhibit(pid int32, what, who, why, mode string) reply {
	if _, err := checkInhibit(what, mode); err != nil {
		return fail(errNotSupported, err.Error())
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fail("org.freedesktop.DBus.Error.Failed", fmt.Sprintf("Inhibit: making the lock's pipe: %v", err))
	}
	// Non-blocking, so the read end is on Go's poller and Close ends the
	// watcher's Read.
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return fail("org.freedesktop.DBus.Error.Failed", fmt.Sprintf("Inhibit: making the lock's pipe: %v", err))
	}
	inh := &inhibitor{what: what, who: who, why: why, mode: mode, pid: pid, since: time.Now(),
		r: os.NewFile(uintptr(p[0]), "inhibitor"), released: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		inh.r.Close()
		unix.Close(p[1])
		return fail("org.freedesktop.DBus.Error.Failed", "Inhibit: the bus is closing")
	}
	s.nextInhibitor++
	inh.id = s.nextInhibitor
	s.inhibitors[inh.id] = inh
	s.mu.Unlock()
	s.log.Info("inhibitor taken", "who", who, "why", why, "what", what, "mode", mode, "pid", pid)
	safe.Go(s.log, "logind inhibitor", func() { s.watch(inh) }, nil)
	// The client gets a copy of the write end with the reply; answer
	// closes berth's copy once sent, so the client's is the last.
	return reply{body: []any{dbus.UnixFD(p[1])}, closeFD: p[1]}
}

// watch waits for the lock's write end to be closed everywhere.
func (s *Server) watch(inh *inhibitor) {
	defer inh.r.Close()
	var b [64]byte
	for {
		if _, err := inh.r.Read(b[:]); err != nil {
			break
		}
	}
	s.mu.Lock()
	delete(s.inhibitors, inh.id)
	s.mu.Unlock()
	inh.releasedAt = time.Now()
	close(inh.released)
	s.log.Info("inhibitor released", "who", inh.who, "pid", inh.pid, "held_ms", inh.releasedAt.Sub(inh.since).Milliseconds())
}

// propertyNames are the login1 Manager properties served.
var propertyNames = []string{"InhibitDelayMaxUSec", "PreparingForShutdown", "DelayInhibited", "BlockInhibited"}

func (s *Server) properties() map[string]dbus.Variant {
	s.mu.Lock()
	defer s.mu.Unlock()
	var whats []string
	for _, i := range s.inhibitors {
		for _, w := range strings.Split(i.what, ":") {
			if !slices.Contains(whats, w) {
				whats = append(whats, w)
			}
		}
	}
	slices.Sort(whats)
	return map[string]dbus.Variant{
		"InhibitDelayMaxUSec":  dbus.MakeVariant(uint64(s.delay / time.Microsecond)),
		"PreparingForShutdown": dbus.MakeVariant(s.preparing),
		"DelayInhibited":       dbus.MakeVariant(strings.Join(whats, ":")),
		"BlockInhibited":       dbus.MakeVariant(""),
	}
}

// Result is what PrepareForShutdown did, for the console and boot.json.
type Result struct {
	// Clients is how many bus clients the signal went to.
	Clients     int   `json:"clients"`
	DelayMaxMs  int64 `json:"inhibitDelayMaxMs"`
	WaitBoundMs int64 `json:"waitBoundMs"`
	// SettleMs is how long the signal waited for a client's fresh
	// subscription (SubscribeSettle); 0 when none was that fresh.
	SettleMs     int64            `json:"settleMs,omitempty"`
	Inhibitors   []InhibitorState `json:"inhibitors,omitempty"`
	WaitedMs     int64            `json:"waitedMs"`
	TimedOut     bool             `json:"timedOut,omitempty"`
	SignalErrors []string         `json:"signalErrors,omitempty"`
}

// InhibitorState is one shutdown inhibitor at the end of the wait.
type InhibitorState struct {
	Who string `json:"who"`
	Why string `json:"why"`
	PID int32  `json:"pid"`
	// ReleasedAfterMs is from the signal to the fd's close; -1 if it
	// was still held when the wait ended.
	ReleasedAfterMs int64 `json:"releasedAfterMs"`
}

// PrepareForShutdown emits login1's PrepareForShutdown(true) to the
// clients that asked for it, then waits until every shutdown delay
// inhibitor taken before is released, at most WaitBound. With no
// inhibitor it returns at once: the shutdown is what it was without
// kubelet's graceful node shutdown.
func (s *Server) PrepareForShutdown(ctx context.Context) Result {
	start := time.Now()
	s.mu.Lock()
	s.preparing = true
	delay := s.delay
	var pending []*inhibitor
	for _, i := range s.inhibitors {
		if sd, _ := checkInhibit(i.what, i.mode); sd {
			pending = append(pending, i)
		}
	}
	var to []*conn
	var newest time.Time
	for c := range s.conns {
		if slices.ContainsFunc(c.rules, func(r matchRule) bool { return r.matches(prepareForShutdown) }) {
			to = append(to, c)
			c.signalled = true
			if c.subscribedAt.After(newest) {
				newest = c.subscribedAt
			}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(pending, func(a, b *inhibitor) int { return int(a.id) - int(b.id) })

	bound := waitBound(delay, s.opt.Margin)
	res := Result{Clients: len(to), DelayMaxMs: delay.Milliseconds(), WaitBoundMs: bound.Milliseconds()}
	// A subscription younger than Settle may not have its channel yet
	// (SubscribeSettle): wait until it has, for every client at once.
	if settle := s.opt.Settle - time.Since(newest); len(to) > 0 && settle > 0 {
		t := time.NewTimer(settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		res.SettleMs = settle.Milliseconds()
	}
	for _, c := range to {
		if err := c.send(prepareSignal(true)); err != nil {
			res.SignalErrors = append(res.SignalErrors, fmt.Sprintf("pid %d (%s): %v", c.pid, c.name, err))
		}
	}
	var who []string
	for _, i := range pending {
		who = append(who, fmt.Sprintf("%s[%d]", i.who, i.pid))
	}
	s.log.Info("PrepareForShutdown sent", "clients", len(to), "inhibitors", strings.Join(who, ","), "wait_bound", bound.String(), "settle_ms", res.SettleMs, "errors", len(res.SignalErrors))
	if len(pending) == 0 {
		return res
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
wait:
	for _, i := range pending {
		select {
		case <-i.released:
		case <-timer.C:
			res.TimedOut = true
			break wait
		case <-ctx.Done():
			res.TimedOut = true
			break wait
		}
	}
	res.WaitedMs = time.Since(start).Milliseconds()
	for _, i := range pending {
		st := InhibitorState{Who: i.who, Why: i.why, PID: i.pid, ReleasedAfterMs: -1}
		select {
		case <-i.released:
			st.ReleasedAfterMs = max(0, i.releasedAt.Sub(start).Milliseconds())
		default:
		}
		res.Inhibitors = append(res.Inhibitors, st)
	}
	if res.TimedOut {
		s.log.Warn("shutdown inhibitors still held after the bound; going on without them", "inhibitors", strings.Join(who, ","), "waited_ms", res.WaitedMs)
	} else {
		s.log.Info("shutdown inhibitors released", "inhibitors", strings.Join(who, ","), "waited_ms", res.WaitedMs)
	}
	return res
}

// signalLate sends PrepareForShutdown(true) to c, which subscribed while
// the shutdown was under way, once its subscription has settled.
func (s *Server) signalLate(c *conn) {
	time.Sleep(s.opt.Settle)
	if err := c.send(prepareSignal(true)); err != nil {
		s.log.Warn("PrepareForShutdown to a client that subscribed during the shutdown", "pid", c.pid, "client", c.name, "err", err)
		return
	}
	s.log.Info("PrepareForShutdown sent to a client that subscribed during the shutdown", "pid", c.pid, "client", c.name)
}

func prepareSignal(active bool) *dbus.Message {
	return &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:      dbus.MakeVariant(login1Path),
			dbus.FieldInterface: dbus.MakeVariant(login1Manager),
			dbus.FieldMember:    dbus.MakeVariant(prepareForShutdown.member),
			dbus.FieldSender:    dbus.MakeVariant(login1Name),
			dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(active)),
		},
		Body: []any{active},
	}
}
