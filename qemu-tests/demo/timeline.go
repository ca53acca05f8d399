package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/berth-node/berth/docs/figures"
	"github.com/berth-node/berth/init/report"
)

// hostTimes are the milestones as the host saw them, each since QEMU
// started; zero means not reached.
type hostTimes struct {
	// FirstBerthLine is when berth's first console line arrived, and
	// FirstBerthGuestMs its own timestamp: together they place the kernel's
	// start on the host clock.
	FirstBerthLine    time.Duration
	FirstBerthGuestMs int64
	KubeletStarted    time.Duration
	BootReport        time.Duration
	Registered        time.Duration
	// CNIInstalled is when the install-cni DaemonSet's pod ran: the node
	// goes Ready because of it.
	CNIInstalled     time.Duration
	Ready            time.Duration
	KubeProxyRunning time.Duration
	CoreDNSReady     time.Duration
	PodRunning       time.Duration
	// ServiceAnswered and DNSResolved come from one busybox pod's run, so
	// they are both its end.
	ServiceAnswered time.Duration
	DNSResolved     time.Duration
	LogsRead        time.Duration
	DebugShell      time.Duration
	// The power-off: the button press, each step's console line, QEMU's exit.
	PowerDown         time.Duration
	KubeletStopped    time.Duration
	PodsStopped       time.Duration
	ContainerdStopped time.Duration
	QEMUExited        time.Duration
}

// record notes when a console milestone reached the host.
func (h *hostTimes) record(ev event) {
	switch ev.m {
	case kernelBooted:
		h.FirstBerthLine, h.FirstBerthGuestMs = ev.At, ev.GuestMs
	case kubeletStarted:
		h.KubeletStarted = ev.At
	case bootReport:
		h.BootReport = ev.At
	case kubeletStopped:
		h.KubeletStopped = ev.At
	case podsStopped:
		h.PodsStopped = ev.At
	case containerdStopped:
		h.ContainerdStopped = ev.At
	}
}

// timeline is everything the closing summary shows.
type timeline struct {
	Report           *report.Report
	Host             hostTimes
	ConsoleLog       string
	ControlPlaneLogs string
}

// formatTimeline writes the boot timeline: the guest's own clock from the
// boot report (kernel → berth → each phase → containerd → kubelet), then the
// host's wall clock for what only the host sees (registration, the
// add-ons, Ready, the pods, the Service, DNS, kubectl), the power-off, and where the logs are.
func formatTimeline(w io.Writer, tl timeline) error {
	var b strings.Builder
	row := func(indent int, label, value, note string) {
		fmt.Fprintf(&b, "%s%-*s %10s", strings.Repeat(" ", indent), 34-indent, label, value)
		if note != "" {
			b.WriteString("   " + note)
		}
		b.WriteString("\n")
	}
	ms := func(v int64) string { return fmt.Sprintf("%d ms", v) }
	sec := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

	if r := tl.Report; r != nil {
		b.WriteString("Boot timeline, guest clock (ms since the kernel started):\n")
		row(2, "kernel start", ms(0), "")
		row(2, "berth running as PID 1", ms(r.KernelToInitMs), "kernel → berth (kernelToInitMs)")
		svc := r.Services
		for _, p := range r.Phases {
			note := fmt.Sprintf("took %d ms", p.DurationMs)
			if p.Error != "" {
				note += "; error: " + p.Error
			}
			row(2, "phase "+p.Name, ms(p.StartMs), note)
			if p.Name == "services" {
				servicesRows(row, svc)
			}
		}
		row(2, "boot report", ms(r.EndMs), fmt.Sprintf("berth's part %d ms, berth RSS %d KiB, ok=%t", r.EndMs-r.KernelToInitMs, r.RSSKiB, r.OK))
		if r.Error != "" {
			row(4, "boot error", "", r.Error)
		}
	}

	h := tl.Host
	b.WriteString("\nJoin and cluster, host wall clock (s since QEMU started")
	if h.FirstBerthLine > 0 {
		fmt.Fprintf(&b, "; the kernel started at about %s", sec(h.FirstBerthLine-time.Duration(h.FirstBerthGuestMs)*time.Millisecond))
	}
	b.WriteString("):\n")
	for _, m := range []struct {
		label string
		at    time.Duration
	}{
		{"berth's first console line", h.FirstBerthLine},
		{"kubelet started", h.KubeletStarted},
		{"boot report", h.BootReport},
		{"node registered", h.Registered},
		{"CNI installed (install-cni pod)", h.CNIInstalled},
		{"node Ready", h.Ready},
		{"kube-proxy Running", h.KubeProxyRunning},
		{"CoreDNS Ready", h.CoreDNSReady},
		{"demo pod Running (pulled)", h.PodRunning},
		{"Service answered (busybox pod)", h.ServiceAnswered},
		{"DNS resolved (busybox pod)", h.DNSResolved},
		{"kubectl logs of the demo pod", h.LogsRead},
		{"kubectl debug node shell", h.DebugShell},
	} {
		v := "not reached"
		if m.at > 0 {
			v = sec(m.at)
		}
		row(2, m.label, v, "")
	}

	if h.PowerDown > 0 {
		b.WriteString("\nPower-off (s after system_powerdown):\n")
		for _, m := range []struct {
			label string
			at    time.Duration
		}{
			{"kubelet stopped", h.KubeletStopped},
			{"pods stopped", h.PodsStopped},
			{"containerd stopped", h.ContainerdStopped},
			{"QEMU exited", h.QEMUExited},
		} {
			v := "not seen"
			if m.at > 0 {
				v = sec(m.at - h.PowerDown)
			}
			row(2, m.label, v, "")
		}
	}

	fmt.Fprintf(&b, "\nLogs:\n  node console:   %s\n  control plane:  %s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)\n",
		tl.ConsoleLog, tl.ControlPlaneLogs)
	_, err := io.WriteString(w, b.String())
	return err
}

// servicesRows places each service on the guest clock: the report gives
// kubelet's exec as ms since kernel start and every service's exec as wall
// time, so the others are placed by their distance from kubelet's.
func servicesRows(row func(int, string, string, string), svc *report.Services) {
	if svc == nil {
		return
	}
	var kubeletAt time.Time
	for _, s := range svc.Services {
		if s.Name == "kubelet" {
			kubeletAt = s.StartedAt
		}
	}
	for _, s := range svc.Services {
		if s.StartedAt.IsZero() {
			row(4, s.Name, "not started", fmt.Sprintf("state %s", s.State))
			continue
		}
		if kubeletAt.IsZero() || svc.KernelToKubeletMs == 0 {
			row(4, s.Name+" started", "", fmt.Sprintf("state %s, pid %d, restarts %d", s.State, s.PID, s.Restarts))
			continue
		}
		at := svc.KernelToKubeletMs + s.StartedAt.Sub(kubeletAt).Milliseconds()
		note := fmt.Sprintf("pid %d, restarts %d", s.PID, s.Restarts)
		if s.Name == "kubelet" {
			note += " (services.kernelToKubeletMs)"
		}
		row(4, s.Name+" started", fmt.Sprintf("%d ms", at), note)
		if s.ReadyMs > 0 {
			what := " ready"
			if s.Name == "kubelet" {
				what = " healthy"
			}
			row(4, s.Name+what, fmt.Sprintf("%d ms", at+s.ReadyMs), fmt.Sprintf("readyMs %d", s.ReadyMs))
		} else {
			row(4, s.Name+" ready", "not ready", "state "+string(s.State))
		}
		if s.Name == "containerd" {
			for _, im := range svc.Images {
				note := fmt.Sprintf("%s imported in %d ms", im.Name, im.DurationMs)
				switch {
				case im.Error != "":
					note = fmt.Sprintf("%s failed: %s", im.Name, im.Error)
				case !im.Imported:
					note = im.Name + " already present"
				}
				row(6, "image", "", note)
			}
		}
	}
}

// readmeSection is the section of the README that make demo keeps as its
// last run's join timeline.
const readmeSection = "demo-timeline"

// joinTimeline is the timeline's "Join and cluster" part, the lines the
// README shows, without their indent.
func joinTimeline(tl timeline) (string, error) {
	var b strings.Builder
	if err := formatTimeline(&b, tl); err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(b.String(), "\nJoin and cluster")
	if !ok {
		return "", fmt.Errorf("the timeline has no join part")
	}
	_, after, _ = strings.Cut(after, "\n")
	part, _, _ := strings.Cut(after, "\n\n")
	var out strings.Builder
	for _, l := range strings.Split(strings.TrimRight(part, "\n"), "\n") {
		out.WriteString(strings.TrimPrefix(l, "  ") + "\n")
	}
	return out.String(), nil
}

// writeReadme puts the run's join timeline into the README, so the one
// the README shows is make demo's last.
func writeReadme(path string, tl timeline) error {
	text, err := joinTimeline(tl)
	if err != nil {
		return fmt.Errorf("writing the timeline into %s: %w", path, err)
	}
	return figures.Update(path, func(md string) (string, error) {
		return figures.ReplaceSection(md, readmeSection, "```\n"+text+"```")
	})
}
