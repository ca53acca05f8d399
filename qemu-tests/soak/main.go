// Command soak is `make soak`: it boots the test image joining the test
// control plane, lets berth supervise containerd and kubelet for a while
// (an hour by default), and reads berth's own figures once a minute
// through the debug shell: boot.json's live section (RSS and its split,
// live heap, Go's memory, goroutines, open files) and /proc/1/status. It
// writes build/soak/soak.json after every sample, so a soak cut short
// still leaves its series, and /proc/1/smaps at the start and the end;
// at the end it prints each figure's start, min, median, max, end and
// slope per hour. One VM, not in make test: it takes the hour it says.
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
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/rigflags"
)

const (
	// reportTimeout bounds the boot to its report under TCG.
	reportTimeout = 8 * time.Minute
	// registerTimeout bounds the wait for the registration after it.
	registerTimeout = 3 * time.Minute
	// shellTimeout bounds one sample's shell command.
	shellTimeout = time.Minute
	// sampleCmd prints boot.json's live section (flat: no nested braces)
	// and PID 1's own count of its RSS and threads.
	sampleCmd = `grep -o '"live":{[^}]*}' /run/berth/boot.json; grep -E '^(VmRSS|Threads):' /proc/1/status`
)

type options struct {
	duration, interval time.Duration
	image, components  string
	out                string
	// join boots against the test control plane; without it the node
	// boots with no config, as TestBootReport does, and runs no services.
	join bool
	// append is added to the kernel command line (GOGC=, GOMEMLIMIT=,
	// GODEBUG=: PID 1's environment), for comparing runtime settings.
	append string
}

// result is soak.json.
type result struct {
	Image    string            `json:"image"`
	Duration string            `json:"duration"`
	Interval string            `json:"interval"`
	Report   map[string]any    `json:"report"`
	Samples  []sample          `json:"samples"`
	Summary  map[string]series `json:"summary"`
	// SmapsStart and SmapsEnd split PID 1's RSS (smapsSplit) when the
	// sampling starts and ends.
	SmapsStart map[string]int64 `json:"smapsStart,omitempty"`
	SmapsEnd   map[string]int64 `json:"smapsEnd,omitempty"`
	// Errors are samples that failed, with their minute.
	Errors []string `json:"errors,omitempty"`
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", time.Hour, "how long to supervise after the boot report")
	flag.DurationVar(&o.interval, "interval", time.Minute, "time between samples")
	rigflags.Image(flag.CommandLine, &o.image)
	rigflags.Components(flag.CommandLine, &o.components)
	flag.StringVar(&o.out, "out", filepath.Join("build", "soak"), "where soak.json, the smaps and the console log go")
	flag.BoolVar(&o.join, "join", true, "join the test control plane (false: boot with no config)")
	flag.StringVar(&o.append, "append", "", "more kernel command line (GOGC=25, GODEBUG=..., for PID 1)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
}

// registeredRE is berth's console line for kubelet's registration.
var registeredRE = regexp.MustCompile(`join: node registered with the API server`)

func run(ctx context.Context, w io.Writer, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	cmdline := o.append
	if o.join {
		stop, arg, err := startCluster(ctx, o)
		if err != nil {
			return err
		}
		defer stop()
		cmdline = arg + " " + cmdline
	}

	logf, err := os.Create(filepath.Join(o.out, "console.log"))
	if err != nil {
		return fmt.Errorf("creating the console log: %w", err)
	}
	defer logf.Close()
	cfg := qemu.ImageConfig(o.image, cmdline)
	cfg.MemoryMB = 2048
	cfg.NICs = []qemu.NIC{{}}
	cfg.Shell = true
	cfg.Timeout = reportTimeout + registerTimeout + o.duration + 10*time.Minute
	vm, err := qemu.Boot(ctx, cfg, qemu.BootOptions{ConsoleLog: logf})
	if err != nil {
		return fmt.Errorf("booting: %w", err)
	}
	defer vm.Close()
	rep, err := vm.Report(reportTimeout)
	if err != nil {
		return fmt.Errorf("waiting for the boot report: %w", err)
	}
	reported := time.Now()
	if ok, _ := rep["ok"].(bool); !ok {
		return fmt.Errorf("boot failed: %v", rep["error"])
	}
	if o.join {
		if _, err := vm.ExpectLine(registeredRE, registerTimeout); err != nil {
			return fmt.Errorf("waiting for the registration: %w", err)
		}
	}
	fmt.Fprintf(w, "soak: node up; sampling every %s for %s; series in %s\n", o.interval, o.duration, filepath.Join(o.out, "soak.json"))
	res := &result{Image: o.image, Duration: o.duration.String(), Interval: o.interval.String(), Report: rep}
	res.SmapsStart = saveSmaps(w, vm, filepath.Join(o.out, "smaps-start.txt"))

	t := time.NewTicker(o.interval)
	defer t.Stop()
	for {
		minute := time.Since(reported).Minutes()
		out, err := vm.Shell(sampleCmd, shellTimeout)
		var figs map[string]int64
		if err == nil {
			figs, err = parseSample(out)
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("minute %.1f: %v", minute, err))
			fmt.Fprintf(w, "soak: minute %.1f: %v\n", minute, err)
		} else {
			res.Samples = append(res.Samples, sample{Minute: minute, Figures: figs})
			fmt.Fprintf(w, "soak: minute %5.1f: rss %d KiB (anon %d, file %d), heap live %d KiB (service logs %d), goroutines %d, fds %d\n",
				minute, figs["rssKiB"], figs["rssAnonKiB"], figs["rssFileKiB"], figs["heapLiveKiB"], figs["serviceLogsKiB"], figs["goroutines"], figs["fds"])
		}
		res.Summary = summarize(res.Samples)
		if err := writeResult(filepath.Join(o.out, "soak.json"), res); err != nil {
			return err
		}
		if vm.Exited() {
			return fmt.Errorf("the VM exited at minute %.1f; console tail:\n%s", minute, vm.ConsoleTail(20))
		}
		if time.Since(reported) >= o.duration {
			break
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(w, "soak: stopped at minute %.1f\n", time.Since(reported).Minutes())
			writeTable(w, res.Summary, time.Since(reported).Minutes())
			return ctx.Err()
		case <-t.C:
		}
	}
	res.SmapsEnd = saveSmaps(w, vm, filepath.Join(o.out, "smaps-end.txt"))
	if err := writeResult(filepath.Join(o.out, "soak.json"), res); err != nil {
		return err
	}
	writeTable(w, res.Summary, time.Since(reported).Minutes())
	fmt.Fprintf(w, "PID 1's RSS by mapping (KiB), start: %v\n                           end:   %v\n", res.SmapsStart, res.SmapsEnd)
	fmt.Fprintf(w, "\nsoak.json: %s\n", filepath.Join(o.out, "soak.json"))
	return nil
}

// startCluster starts the test control plane and the IMDS stand-in
// serving a NodeConfig that joins it, and returns their stop and the
// node's command line argument.
func startCluster(ctx context.Context, o options) (func(), string, error) {
	cpDir := filepath.Join(o.out, "controlplane")
	if err := os.RemoveAll(cpDir); err != nil {
		return nil, "", fmt.Errorf("removing the previous control plane state %s: %w", cpDir, err)
	}
	dirs, err := controlplane.BinDirsUnder(o.components)
	if err != nil {
		return nil, "", fmt.Errorf("finding the control plane binaries: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cluster, err := controlplane.Start(ctx, log, controlplane.Options{BinDirs: dirs, StateDir: cpDir})
	if err != nil {
		return nil, "", fmt.Errorf("starting the control plane: %w", err)
	}
	arg, stopIMDS, err := imdsserver.StartForGuest(cluster.Info().JoinNodeConfig("berth-soak"))
	if err != nil {
		_ = cluster.Stop()
		return nil, "", err
	}
	return func() { stopIMDS(); _ = cluster.Stop() }, arg, nil
}

// saveSmaps writes PID 1's /proc/1/smaps to path and returns its split;
// a failure is printed, not fatal: the series matters more.
func saveSmaps(w io.Writer, vm *qemu.VM, path string) map[string]int64 {
	out, err := vm.Shell("cat /proc/1/smaps", shellTimeout)
	if err == nil {
		err = fsutil.WriteFileAtomic(path, []byte(out+"\n"), 0o644)
	}
	if err != nil {
		fmt.Fprintf(w, "soak: saving PID 1's smaps to %s: %v\n", path, err)
		return nil
	}
	// PID 1 is the initramfs's /init.
	return smapsSplit(out, "/init")
}

func writeResult(path string, res *result) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding soak.json: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
