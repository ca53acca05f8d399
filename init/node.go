package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/berth-node/berth/fsutil"
	"github.com/berth-node/berth/imds"
	"github.com/berth-node/berth/kmod"
	"github.com/berth-node/berth/manifest"
	"github.com/berth-node/berth/mounts/instancestore"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/nodeconfig"
	"github.com/berth-node/berth/plan"
	"github.com/berth-node/berth/runtime/reaper"
	"golang.org/x/sys/unix"
)

// configTimeout bounds the whole config phase: IMDS metadata and user
// data. EC2's IMDS answers in milliseconds; the rest is for retries.
const configTimeout = 60 * time.Second

// nodeState is what the node phases found and decided, in phase order.
type nodeState struct {
	manifest *manifest.Manifest
	kmod     *kmod.Index
	net      *network.Result
	netH     *network.Handle
	instance *imds.Metadata
	config   *nodeconfig.Result
	plan     *plan.Plan
	storage  *localstorage.Result
}

// configReport is the config phase's part of the boot report.
type configReport struct {
	IMDS    string                 `json:"imds"`
	Sources []string               `json:"sources"`
	Result  *nodeconfig.Result     `json:"result,omitempty"`
	Calls   []imds.CallTiming      `json:"imdsCalls,omitempty"`
	Files   []string               `json:"files,omitempty"`
	Plan    *planSummary           `json:"plan,omitempty"`
	Skipped string                 `json:"skipped,omitempty"`
	Meta    map[string]interface{} `json:"instance,omitempty"`
}

type planSummary struct {
	NodeName   string   `json:"nodeName"`
	NodeIP     string   `json:"nodeIP,omitempty"`
	ProviderID string   `json:"providerID,omitempty"`
	MaxPods    int32    `json:"maxPods"`
	Services   []string `json:"services"`
	Warnings   []string `json:"warnings,omitempty"`
}

func (b *boot) configReport() *configReport {
	if r, ok := b.rep.Config.(*configReport); ok {
		return r
	}
	r := &configReport{}
	b.rep.Config = r
	return r
}

// phaseNetwork brings up the primary interface (DHCP by default) so that
// IMDS and the API server can be reached. Not fatal by itself: the config
// phase says what could not be reached, and an appliance may run without.
func phaseNetwork(ctx context.Context, b *boot, log *slog.Logger) error {
	cfg, err := network.ParseConfig(b.cl.Get)
	if err != nil {
		return fmt.Errorf("kernel command line: %w", err)
	}
	res, h, err := network.Up(ctx, log, cfg)
	b.node.net, b.node.netH = res, h
	if res != nil {
		b.rep.Network = res
	}
	return err
}

// phaseConfig reads instance metadata and user data from IMDS and merges
// every NodeConfig source. No source at all is not an error: the node then
// runs no Kubernetes services, and the report says so.
func phaseConfig(ctx context.Context, b *boot, log *slog.Logger) error {
	rep := b.configReport()
	endpoint, _ := b.cl.Get("berth.imds")
	rep.IMDS = endpoint
	var userData []byte
	if endpoint != "off" {
		if rep.IMDS == "" {
			rep.IMDS = imds.EndpointIPv4
		}
		ctx, cancel := context.WithTimeout(ctx, configTimeout)
		defer cancel()
		opts := imds.Options{Logger: log}
		if endpoint != "" {
			opts.Endpoints = []string{endpoint}
		}
		c := imds.New(opts)
		defer func() { rep.Calls = c.Timings(); c.Close() }()
		md, err := c.Metadata(ctx)
		if err != nil {
			return fmt.Errorf("reading instance metadata (berth.imds=off skips IMDS): %w", err)
		}
		b.node.instance = md
		log.Info("instance", "id", md.InstanceID, "type", md.InstanceType, "az", md.AvailabilityZone, "hostname", md.LocalHostname)
		// EC2's private DNS name is the node's hostname, over DHCP's.
		if md.LocalHostname != "" {
			if err := network.SetHostname(md.LocalHostname); err != nil {
				log.Warn("setting hostname from IMDS local-hostname", "hostname", md.LocalHostname, "err", err)
			} else if b.node.net != nil {
				b.node.net.Hostname = md.LocalHostname
				b.node.net.HostnameSource = "imds"
			}
		}
		if userData, err = c.UserData(ctx); err != nil {
			return fmt.Errorf("reading user data: %w", err)
		}
	}
	srcs, err := nodeconfig.BootSources(nodeconfig.DefaultConfigDir, userData,
		nodeconfig.SplitConfigPaths(b.cl.All(nodeconfig.CmdlineConfigKey)...))
	if err != nil {
		return err
	}
	for _, s := range srcs {
		rep.Sources = append(rep.Sources, s.Name)
	}
	if len(srcs) == 0 {
		rep.Skipped = "no NodeConfig in the image, in user data or on the command line"
		log.Warn("no NodeConfig found; this node will run no Kubernetes services", "imds", rep.IMDS, "dir", nodeconfig.DefaultConfigDir)
		return nil
	}
	res, err := nodeconfig.Load(ctx, log, srcs)
	rep.Result = res
	if res != nil {
		b.node.config = res
	}
	if err != nil {
		for _, p := range res.Problems {
			if p.Severity == nodeconfig.SeverityError {
				log.Error(p.String())
			}
		}
		return err
	}
	return nil
}

// phasePlan decides every file and service; pure, so a failure here is a
// config problem, named by the plan.
func phasePlan(ctx context.Context, b *boot, log *slog.Logger) error {
	if b.node.config == nil {
		log.Info("skipped: no NodeConfig")
		return nil
	}
	md := b.node.instance
	if md == nil {
		return errors.New("no instance metadata (berth.imds=off): the plan needs instance id, type and zone")
	}
	man := b.node.manifest
	if man == nil {
		man = &manifest.Manifest{}
	}
	host := plan.Host{CPUs: runtime.NumCPU(), MemoryMiB: memoryMiB()}
	if n := b.node.net; n != nil {
		host.Nameservers = n.DNS
		host.SearchDomains = n.Search
	}
	p, err := plan.Build(plan.Inputs{Config: b.node.config.Config, Instance: md, Manifest: man, Host: host})
	if err != nil {
		return err
	}
	b.node.plan = p
	sum := &planSummary{NodeName: p.NodeName, NodeIP: p.NodeIP, ProviderID: p.ProviderID, MaxPods: p.MaxPods, Warnings: p.Warnings}
	for _, s := range p.Services {
		sum.Services = append(sum.Services, s.Name)
	}
	b.configReport().Plan = sum
	for _, w := range p.Warnings {
		log.Warn(w)
	}
	log.Info("planned", "node", p.NodeName, "max_pods", p.MaxPods, "files", len(p.Files), "services", len(p.Services))
	return nil
}

// phaseStorage puts instance-store disks under containerd's and kubelet's
// state before anything is written there. Its own policy decides whether a
// failure is fatal (localstorage returns an error only then).
func phaseStorage(ctx context.Context, b *boot, log *slog.Logger) error {
	if b.node.plan == nil || b.node.plan.Storage == nil || b.node.plan.Storage.Strategy == "" {
		log.Info("skipped: no spec.instance.localStorage strategy")
		b.rep.Storage = map[string]string{"status": "skipped", "reason": "no spec.instance.localStorage strategy in the NodeConfig"}
		return nil
	}
	ls := b.node.plan.Storage
	scfg, err := instancestore.LoadConfig(instancestore.ConfigPath)
	if err != nil {
		return fmt.Errorf("instance-store matcher config: %w", err)
	}
	opts := localstorage.Options{
		Strategy:   localstorage.Strategy(ls.Strategy),
		MountPath:  ls.MountPath,
		Match:      scfg.Match,
		Filesystem: scfg.Filesystem,
		Fatal:      scfg.Fatal,
		Force:      scfg.Force,
	}
	for _, d := range ls.DisabledMounts {
		opts.DisabledMounts = append(opts.DisabledMounts, string(d))
	}
	var tools map[string]string
	if b.node.manifest != nil {
		tools = b.node.manifest.Tools
	}
	// Load what the strategy needs up front rather than through the
	// kernel's on-demand requests: /dev/mapper/control only exists once
	// dm_mod is loaded.
	if b.node.kmod != nil {
		mods := []string{"xfs", "ext4"}
		if opts.Strategy != localstorage.StrategyMount {
			mods = append(mods, "dm_mod")
		}
		if opts.Strategy == localstorage.StrategyRAID10 {
			mods = append(mods, "dm_raid", "raid10")
		}
		loaded, err := kmod.Load(ctx, log, b.node.kmod, mods...)
		b.rep.Modules = append(b.rep.Modules, loaded...)
		if err != nil {
			log.Warn("loading storage modules", "err", err)
		}
	}
	env := localstorage.DefaultEnv(tools)
	env.Run = reaperRunner(b.reaper)
	res, err := localstorage.Run(ctx, log, opts, env)
	b.node.storage = res
	if res != nil {
		b.rep.Storage = res
	}
	return err
}

// phaseApply writes the plan's files, atomically, and its description.
func phaseApply(ctx context.Context, b *boot, log *slog.Logger) error {
	p := b.node.plan
	if p == nil {
		log.Info("skipped: nothing planned")
		return nil
	}
	if err := p.WriteTo("/"); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(plan.DescribePath, p.Describe(), 0o644); err != nil {
		return err
	}
	var errs []error
	for _, s := range p.Sysctls {
		if err := writeSysctl(s.Key, s.Value); err != nil {
			errs = append(errs, err)
		}
	}
	rep := b.configReport()
	for _, f := range p.Files {
		rep.Files = append(rep.Files, f.Path)
	}
	log.Info("files written", "count", len(p.Files), "plan", plan.DescribePath)
	return errors.Join(errs...)
}

// reaperRunner runs a tool through PID 1's reaper, so its exit status is
// never lost to the wait4(-1) loop, and makes a non-zero exit an error.
func reaperRunner(r *reaper.Reaper) func(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	return func(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
		out, st, err := r.CombinedOutput(ctx, cmd)
		if err != nil {
			return out, err
		}
		if !st.Success() {
			return out, fmt.Errorf("%s: %s", cmd.Path, st)
		}
		return out, nil
	}
}

// writeSysctl sets one kernel parameter. /proc/sys takes no temporary
// files, so this is the one write berth does in place; the kernel applies
// it whole or not at all.
func writeSysctl(key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	if _, err := f.WriteString(value + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("sysctl %s=%s: writing %s: %w", key, value, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

func memoryMiB() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) >> 20
}
