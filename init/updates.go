package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/runtime/kubelet"
	"github.com/berth-node/berth/runtime/nodeobject"
	"github.com/berth-node/berth/update/agent"
	"github.com/berth-node/berth/update/status"
	"github.com/berth-node/berth/update/trial"
)

const (
	// updateStateDir is the update agent's state, bound from the data
	// partition (diskboot.DataBinds) so that it outlives the reboots of
	// an update.
	updateStateDir = "/var/lib/berth/update"
	// espMountDir is where the ESP is mounted while the agent writes it.
	espMountDir = "/run/berth/esp"
	classBlock  = "/sys/class/block"
	// trialFailDelay is how long a failed trial boot's console stays
	// readable before the reboot into the previous version.
	trialFailDelay = 10 * time.Second
	// hungTaskPanic and softLockupPanic are armed on the image's command
	// line (hung_task_panic=1, softlockup_panic=1) and, on a trial boot,
	// until it is blessed: a task blocked for two minutes, or a CPU stuck
	// in the kernel for 20 s, then panics, reboots and spends a try.
	hungTaskPanic   = "kernel.hung_task_panic"
	softLockupPanic = "kernel.softlockup_panic"
)

// heldForTrial is the plan's sysctls, less the kernel's panics on a hang
// on a boot systemd-boot started on trial: the image's command line armed
// them, and writing their at-rest values in the apply phase would leave
// the trial unguarded until the update agent armed them again. The agent
// writes the at-rest values once the trial is blessed.
func heldForTrial(st *status.Status, sysctls []kubelet.Sysctl) (kept []kubelet.Sysctl, held []string) {
	if st == nil || !st.Trial {
		return sysctls, nil
	}
	for _, s := range sysctls {
		if s.Key == hungTaskPanic || s.Key == softLockupPanic {
			held = append(held, s.Key)
			continue
		}
		kept = append(kept, s)
	}
	return kept, held
}

// updateSettings is the update repository and trial timings: the image's
// default repository and trusted root (its manifest), and what user data
// sets (nodeconfig.UpdateSettingsOf), which wins.
func updateSettings(b *boot) (agent.Repository, trial.Config, error) {
	var r agent.Repository
	var tc trial.Config
	if m := b.node.manifest; m != nil && m.Update != nil {
		root, err := os.ReadFile(m.Update.TrustedRoot)
		if err != nil {
			return r, tc, fmt.Errorf("the image's trusted update root: %w", err)
		}
		r.TrustedRoot, r.MetadataURL = root, m.Update.Repository
	}
	if c := b.node.config; c != nil && c.Config != nil {
		u, err := nodeconfig.UpdateSettingsOf(c.Config)
		if err != nil {
			return r, tc, err
		}
		if u.Repository != "" {
			r.MetadataURL, r.TargetsURL = u.Repository, u.TargetsURL
		}
		tc = trial.Config{Soak: u.Soak, ReadyDeadline: u.ReadyDeadline}
	}
	if r.MetadataURL != "" && r.TrustedRoot == nil {
		return agent.Repository{}, tc, fmt.Errorf("update repository %s named, but the image carries no trusted root.json (built without make keys' update root)", r.MetadataURL)
	}
	return r, tc, nil
}

// updateOptions gathers, before the node phases' inputs are released,
// what the update agent needs; nil when this boot cannot be updated nor
// be on trial (not started by systemd-boot from berth's disk).
func (b *boot) updateOptions(log *slog.Logger) *agent.Options {
	st := b.rep.Update
	if st == nil || st.Boot != status.BootSystemdBoot {
		return nil
	}
	o := &agent.Options{Log: log, Status: *st, Arch: runtime.GOARCH, StateDir: updateStateDir,
		BootStart: time.Now().Add(-b.clock())}
	if r, ok := b.rep.Root.(*mounts.SwitchResult); ok && r.Verity != nil && r.Verity.Partition != "" {
		disk, err := partition.DiskOf(classBlock, r.Verity.Partition)
		if err != nil {
			log.Warn("update: the boot disk", "err", err)
		} else {
			o.Disk = agent.BootDisk{ClassBlock: classBlock, Disk: disk, MountDir: espMountDir, Log: log}
			o.Verify = func(ctx context.Context, dev string, p verity.Param) (int64, error) {
				return agent.VerifySlot(ctx, log, dev, p)
			}
		}
	}
	repo, tc, err := updateSettings(b)
	if err != nil {
		// The config phase reported it; updates are off until it is mended.
		log.Warn("update settings at fault; updates are off", "err", err)
	} else {
		o.Repo, o.Trial = repo, tc
	}
	// At rest, each is what the plan wrote (kubelet.Sysctls' 0, or the
	// user's value).
	rest := map[string]string{}
	for _, k := range []string{hungTaskPanic, softLockupPanic} {
		rest[k] = "0"
		if p := b.node.plan; p != nil {
			if i := slices.IndexFunc(p.Sysctls, func(s kubelet.Sysctl) bool { return s.Key == k }); i >= 0 {
				rest[k] = p.Sysctls[i].Value
			}
		}
	}
	o.HangPanic = func(armed bool) error {
		var errs []error
		for _, k := range []string{hungTaskPanic, softLockupPanic} {
			v := rest[k]
			if armed {
				v = "1"
			}
			errs = append(errs, writeSysctl(k, v))
		}
		return errors.Join(errs...)
	}
	if p := b.rep.Plan; p != nil && p.NodeName != "" {
		o.Node = &lazyNode{o: nodeobject.Options{Kubeconfig: kubelet.KubeconfigPath, NodeName: p.NodeName, Log: log}}
	}
	return o
}

// lazyNode is the Node's client once kubelet has a kubeconfig: on a first
// boot, kubelet writes it only when its TLS bootstrap is done, after boot.
type lazyNode struct {
	o nodeobject.Options
	c *nodeobject.Client
}

func (l *lazyNode) client() (*nodeobject.Client, error) {
	if l.c == nil {
		c, err := nodeobject.New(l.o)
		if err != nil {
			return nil, err
		}
		l.c = c
	}
	return l.c, nil
}

func (l *lazyNode) Get(ctx context.Context) (nodeobject.Node, error) {
	c, err := l.client()
	if err != nil {
		return nodeobject.Node{}, err
	}
	return c.Get(ctx)
}

func (l *lazyNode) Annotate(ctx context.Context, set map[string]*string) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Annotate(ctx, set)
}

// startUpdates runs the update agent for the node's life: it settles the
// last update, judges a trial boot, and applies what the Node asks for.
func (b *boot) startUpdates(ctx context.Context, o *agent.Options) {
	if o == nil {
		return
	}
	o.Reboot = func(reason string) {
		o.Log.Info("reboot requested", "reason", reason)
		select {
		case b.power <- power.Request{Mode: power.Reboot, Reason: reason}:
		default:
			o.Log.Warn("reboot request dropped: others are pending and the first goes ahead", "reason", reason)
		}
	}
	o.Changed = func(s agent.State) {
		b.updateReport("update", func(r *report.Report) {
			if r.Update != nil {
				r.Update.LastUpdate = s.Last
			}
		})
	}
	b.goSafe(o.Log, "update", func() { agent.Run(ctx, *o) })
}
