package main

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// milestone is one step of the node's life that the console shows.
type milestone int

const (
	kernelBooted milestone = iota // berth's first line: the kernel reached PID 1
	networkUp
	containerdReady
	kubeletStarted
	kubeletHealthy
	bootReport
	nodeRegistered // berth saw kubelet register the node
	joinWaiting    // berth says why the node has not registered yet (repeats)
	kubeletStopped
	podsStopped
	containerdStopped
	poweredDown
)

// consoleRule recognises a milestone in a console line. Rules anchored on
// berth's "[  1234ms] phase: " format ignore the kernel-log copies of the
// same lines.
type consoleRule struct {
	m      milestone
	re     *regexp.Regexp
	repeat bool
}

var consoleRules = []consoleRule{
	{m: kernelBooted, re: regexp.MustCompile(`^\[\s*(\d+)ms\] early: berth starting(.*)$`)},
	{m: networkUp, re: regexp.MustCompile(`^\[\s*(\d+)ms\] network: network up(.*)$`)},
	{m: containerdReady, re: regexp.MustCompile(`^\[\s*(\d+)ms\] services: service ready\b(.*\bservice=containerd\b.*)$`)},
	{m: kubeletStarted, re: regexp.MustCompile(`^\[\s*(\d+)ms\] services: service started\b(.*\bservice=kubelet\b.*)$`)},
	{m: kubeletHealthy, re: regexp.MustCompile(`^\[\s*(\d+)ms\] services: service ready\b(.*\bservice=kubelet\b.*)$`)},
	{m: nodeRegistered, re: regexp.MustCompile(`^\[\s*(\d+)ms\] join: node registered with the API server(.*)$`)},
	{m: joinWaiting, re: regexp.MustCompile(`^\[\s*(\d+)ms\] join: node not registered yet(.*)$`), repeat: true},
	{m: kubeletStopped, re: regexp.MustCompile(`^\[\s*(\d+)ms\] shutdown: service stopped service=kubelet\b(.*)$`)},
	{m: podsStopped, re: regexp.MustCompile(`^\[\s*(\d+)ms\] shutdown: service stopped service=pods\b(.*)$`)},
	{m: containerdStopped, re: regexp.MustCompile(`^\[\s*(\d+)ms\] shutdown: service stopped service=containerd\b(.*)$`)},
	{m: poweredDown, re: regexp.MustCompile(`()reboot: Power down()`)},
}

// event is a milestone as seen on the console.
type event struct {
	m milestone
	// At is when the line reached the host, since QEMU started.
	At time.Duration
	// GuestMs is berth's own timestamp (ms since kernel start), -1 when the
	// line has none.
	GuestMs int64
	Detail  string
	Report  *report.Report // bootReport only
}

// consoleWatch turns console lines into milestones, each once except those
// that repeat. It is fed the whole console each time and remembers how far
// it has read.
type consoleWatch struct {
	next int
	seen map[milestone]event
}

func newConsoleWatch() *consoleWatch { return &consoleWatch{seen: map[milestone]event{}} }

// feed reads lines[w.next:] and returns the new milestones in console order.
func (w *consoleWatch) feed(lines []qemu.Line) []event {
	var out []event
	for ; w.next < len(lines); w.next++ {
		if ev, ok := w.match(lines[w.next]); ok {
			if !consoleRuleFor(ev.m).repeat {
				w.seen[ev.m] = ev
			}
			out = append(out, ev)
		}
	}
	return out
}

func (w *consoleWatch) match(l qemu.Line) (event, bool) {
	if _, done := w.seen[bootReport]; !done {
		// The report line may also come as a truncated kernel-log copy,
		// which does not decode: wait for one that does.
		if r, err := report.ParseLine(l.Text); err == nil {
			return event{m: bootReport, At: l.At, GuestMs: r.EndMs, Report: r}, true
		}
	}
	for _, r := range consoleRules {
		if _, done := w.seen[r.m]; done && !r.repeat {
			continue
		}
		sm := r.re.FindStringSubmatch(l.Text)
		if sm == nil {
			continue
		}
		ms, err := strconv.ParseInt(sm[1], 10, 64)
		if err != nil {
			ms = -1
		}
		return event{m: r.m, At: l.At, GuestMs: ms, Detail: trimDetail(sm[2])}, true
	}
	return event{}, false
}

func consoleRuleFor(m milestone) consoleRule {
	for _, r := range consoleRules {
		if r.m == m {
			return r
		}
	}
	return consoleRule{m: m}
}

// get returns a once-only milestone if it has been seen.
func (w *consoleWatch) get(m milestone) (event, bool) {
	ev, ok := w.seen[m]
	return ev, ok
}

func trimDetail(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	return s
}

// describe is the progress line for a milestone.
func describe(ev event) string {
	switch ev.m {
	case kernelBooted:
		return fmt.Sprintf("kernel booted: berth is PID 1 at %d ms on the guest clock (%s)", ev.GuestMs, ev.Detail)
	case networkUp:
		return "network up: " + ev.Detail
	case containerdReady:
		return "containerd ready: " + ev.Detail
	case kubeletStarted:
		return "kubelet started: " + ev.Detail
	case kubeletHealthy:
		return "kubelet healthy: " + ev.Detail
	case bootReport:
		k := int64(0)
		if s := ev.Report.Services; s != nil {
			k = s.KernelToKubeletMs
		}
		return fmt.Sprintf("boot report: ok=%t, kernel → kubelet exec %d ms (guest clock), berth RSS %d KiB", ev.Report.OK, k, ev.Report.RSSKiB)
	case nodeRegistered:
		return "berth saw kubelet register the node"
	case joinWaiting:
		return "berth: node not registered yet: " + ev.Detail
	case kubeletStopped:
		return "shutdown: kubelet stopped " + ev.Detail
	case podsStopped:
		return "shutdown: pods stopped " + ev.Detail
	case containerdStopped:
		return "shutdown: containerd stopped " + ev.Detail
	case poweredDown:
		return "kernel: power down"
	}
	return fmt.Sprintf("milestone %d: %s", ev.m, ev.Detail)
}
