package main

import (
	"context"
	"fmt"
	"github.com/berth-node/berth/init/report"
	"log/slog"
	"os/exec"
	"strings"
	"time"
)

// forwardPolicyTimeout bounds one iptables run: -w waits at most this long
// for the xtables lock, and the run itself is quick.
const forwardPolicyTimeout = 10 * time.Second

// forwardPolicyCommands are the commands that set the filter table's
// FORWARD policy to ACCEPT, for IPv4 and IPv6, with the host's default
// iptables back end (the one kubelet and the add-ons' iptables wrappers
// pick).
func forwardPolicyCommands() [][]string {
	wait := fmt.Sprint(int(forwardPolicyTimeout / time.Second))
	return [][]string{
		{"iptables", "-w", wait, "-P", "FORWARD", "ACCEPT"},
		{"ip6tables", "-w", wait, "-P", "FORWARD", "ACCEPT"},
	}
}

// forwardAccept sets FORWARD's policy to ACCEPT before kubelet starts, as
// the EKS AMI and Bottlerocket do: pods' traffic is routed between
// interfaces (the VPC CNI's ENIs, bridges, tunnels), and a node whose
// FORWARD policy is DROP (a container engine's habit, a baked rule set)
// blackholes it while every component looks healthy. Network policy is the
// CNI's job, in its own chains. A failure is logged and reported, never
// fatal: a node without iptables still runs pods on the host network.
func forwardAccept(ctx context.Context, log *slog.Logger, run func(context.Context, *exec.Cmd) ([]byte, error)) []report.ForwardPolicy {
	var out []report.ForwardPolicy
	for _, argv := range forwardPolicyCommands() {
		start := time.Now()
		res := report.ForwardPolicy{Tool: argv[0]}
		cctx, cancel := context.WithTimeout(ctx, forwardPolicyTimeout+5*time.Second)
		o, err := run(cctx, exec.Command(argv[0], argv[1:]...))
		cancel()
		res.DurationMs = time.Since(start).Milliseconds()
		if err != nil {
			res.Error = fmt.Sprintf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(o)))
			log.Error("setting the FORWARD policy to ACCEPT", "tool", argv[0], "err", res.Error)
		} else {
			res.OK = true
			log.Info("FORWARD policy ACCEPT", "tool", argv[0], "duration_ms", res.DurationMs)
		}
		out = append(out, res)
	}
	return out
}

// setForwardPolicy runs forwardAccept through the reaper and puts the
// result in the services report.
func (b *boot) setForwardPolicy(ctx context.Context, log *slog.Logger, rep *report.Services) {
	res := forwardAccept(ctx, log, b.reaper.Output)
	b.repMu.Lock()
	rep.ForwardPolicy = res
	b.repMu.Unlock()
}
