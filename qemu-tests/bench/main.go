// Command bench is `make bench`: it boots the test image N times in QEMU
// without config, then N times joining the test control plane, and prints
// min, median and max per phase, for kernel → berth and kernel → kubelet
// exec, berth's own work against its waits, its CPU time and RSS, from
// each boot's report. It writes build/bench/bench.json, and with -base an
// earlier bench.json it shows the change of each median. Boots run one at
// a time: under TCG two VMs slow each other and the figures mean nothing.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-node/berth/init/analyze"
	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/rigflags"
)

// reportTimeout bounds one boot to its report (kubelet healthy) under TCG.
const reportTimeout = 8 * time.Minute

// registerTimeout bounds the wait for the registration after the report.
const registerTimeout = 3 * time.Minute

type options struct {
	n          int
	image      string
	components string
	out        string
	base       string
	join       bool
	// extra is appended to every boot's kernel command line
	// (berth.loglevel=debug to see each module's and step's time).
	extra string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 5, "boots per variant")
	rigflags.Image(flag.CommandLine, &o.image)
	rigflags.Components(flag.CommandLine, &o.components)
	flag.StringVar(&o.out, "out", filepath.Join("build", "bench"), "where bench.json and the console logs go")
	flag.StringVar(&o.base, "base", "", "an earlier bench.json to compare with")
	flag.BoolVar(&o.join, "join", true, "also boot joining the test control plane")
	flag.StringVar(&o.extra, "append", "", "more kernel command line for every boot (berth.loglevel=debug)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, o options) error {
	var base *result
	if o.base != "" {
		data, err := os.ReadFile(o.base)
		if err != nil {
			return fmt.Errorf("reading the base: %w", err)
		}
		base = &result{}
		if err := json.Unmarshal(data, base); err != nil {
			return fmt.Errorf("decoding the base %s: %w", o.base, err)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	res := &result{Image: o.image, Boots: o.n, Variants: map[string]variantResult{}}
	phaseOrder := map[string][]string{}

	res.Variants["no-config"] = boots(ctx, w, o, "no-config", "", phaseOrder)
	if o.join {
		cpDir := filepath.Join(o.out, "controlplane")
		if err := os.RemoveAll(cpDir); err != nil {
			return fmt.Errorf("removing the previous control plane state %s: %w", cpDir, err)
		}
		dirs, err := controlplane.BinDirsUnder(o.components)
		if err != nil {
			return fmt.Errorf("finding the control plane binaries: %w", err)
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cluster, err := controlplane.Start(ctx, log, controlplane.Options{BinDirs: dirs, StateDir: cpDir})
		if err != nil {
			return fmt.Errorf("starting the control plane: %w", err)
		}
		defer cluster.Stop()
		imdsArg, stopIMDS, err := serveJoinConfig(cluster.Info())
		if err != nil {
			return err
		}
		defer stopIMDS()
		res.Variants["join"] = boots(ctx, w, o, "join", imdsArg, phaseOrder)
	}

	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding bench.json: %w", err)
	}
	path := filepath.Join(o.out, "bench.json")
	if err := fsutil.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	writeTable(w, res, base, phaseOrder)
	fmt.Fprintf(w, "\nbench.json: %s\n", path)
	return nil
}

// boots boots the image o.n times, one after the other, and gathers each
// report's figures.
func boots(ctx context.Context, w io.Writer, o options, variant, cmdline string, phaseOrder map[string][]string) variantResult {
	var vr variantResult
	for i := 1; i <= o.n && ctx.Err() == nil; i++ {
		b, err := bootOnce(ctx, o, fmt.Sprintf("%s-%d", variant, i), cmdline, cmdline != "")
		if err != nil {
			fmt.Fprintf(w, "%s boot %d: %v\n", variant, i, err)
			vr.Failed = append(vr.Failed, err.Error())
			continue
		}
		s := figures(b)
		vr.Samples = append(vr.Samples, s)
		if phaseOrder[variant] == nil {
			for _, p := range b.Report.Phases {
				phaseOrder[variant] = append(phaseOrder[variant], "phase "+p.Name)
			}
		}
		kubelet := "no kubelet"
		if ms, ok := s[mKernelToKubelet]; ok {
			kubelet = fmt.Sprintf("kernel → kubelet exec %d ms", ms)
		}
		fmt.Fprintf(w, "%s boot %d: kernel → berth %d ms, %s, report at %d ms\n", variant, i, s[mKernelToBerth], kubelet, b.Report.EndMs)
	}
	vr.Summary = summarize(vr.Samples)
	return vr
}

// registeredRE is berth's console line for kubelet's registration, with
// the guest's ms since kernel start.
var registeredRE = regexp.MustCompile(`\[\s*(\d+)ms\] join: node registered with the API server`)

// bootOnce boots the image, waits for its report (and, joining, for the
// node's registration, which comes after it: the report's own copy has
// no registration time yet) and powers it off.
func bootOnce(ctx context.Context, o options, name, cmdline string, join bool) (*analyze.Boot, error) {
	logf, err := os.Create(filepath.Join(o.out, name+".console.log"))
	if err != nil {
		return nil, fmt.Errorf("creating the console log: %w", err)
	}
	defer logf.Close()
	cfg := qemu.ImageConfig(o.image, strings.TrimSpace(cmdline+" "+o.extra))
	cfg.MemoryMB = 2048
	cfg.NICs = []qemu.NIC{{}}
	cfg.Timeout = reportTimeout + time.Minute
	vm, err := qemu.Boot(ctx, cfg, qemu.BootOptions{ConsoleLog: logf})
	if err != nil {
		return nil, fmt.Errorf("booting: %w", err)
	}
	defer vm.Close()
	rep, err := vm.Report(reportTimeout)
	if err != nil {
		return nil, fmt.Errorf("waiting for the boot report: %w", err)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("re-encoding the boot report: %w", err)
	}
	b, err := analyze.Decode(data)
	if err != nil || !join || b.Report.RegisteredMs > 0 {
		return b, err
	}
	l, err := vm.ExpectLine(registeredRE, registerTimeout)
	if err != nil {
		return nil, fmt.Errorf("waiting for the registration: %w", err)
	}
	ms, err := strconv.ParseInt(registeredRE.FindStringSubmatch(l.Text)[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("registration line %q: %w", l.Text, err)
	}
	b.Report.RegisteredMs = ms
	return b, nil
}

// serveJoinConfig serves, through the IMDS stand-in, a NodeConfig that
// joins the cluster by bootstrap token, and returns the node's command
// line argument for it.
func serveJoinConfig(info controlplane.Info) (string, func(), error) {
	return imdsserver.StartForGuest(info.JoinNodeConfig("berth-bench"))
}
