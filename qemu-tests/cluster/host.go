package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/berth-node/berth/internal/fsutil"
)

// figures are what a cluster costs this machine, written to
// OUT/figures.json (issue 26 asks for them with 1, 2 and 3 nodes).
type figures struct {
	Nodes        int     `json:"nodes"`
	CNI          string  `json:"cni"`
	ReadySeconds float64 `json:"readySeconds"` // start to every node Ready
	// AddonsSeconds is start to every add-on ready (the CNI's and
	// kube-proxy's pods on every node, CoreDNS): the cluster usable.
	AddonsSeconds float64 `json:"addonsSeconds"`
	// HostMemUsedMiB is the rise of MemTotal-MemAvailable from the start
	// to the add-ons ready: QEMU, the control plane, the registry.
	HostMemUsedMiB uint64 `json:"hostMemUsedMiB"`
	// QEMURSSMiB is the QEMU processes' resident memory then.
	QEMURSSMiB uint64 `json:"qemuRSSMiB"`
	// BootBusyCores is the cores busy on average from the start to the
	// add-ons ready;
	// IdleBusyCores in the minute after (with -exit-when-ready).
	BootBusyCores float64 `json:"bootBusyCores"`
	IdleBusyCores float64 `json:"idleBusyCores,omitempty"`
	// QEMUBootCores and QEMUIdleCores are the same for the QEMU processes
	// alone, which other work on the host does not blur.
	QEMUBootCores float64 `json:"qemuBootCores"`
	QEMUIdleCores float64 `json:"qemuIdleCores,omitempty"`
}

func writeFigures(path string, f figures) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readMem is MemTotal-MemAvailable in bytes, or 0 when unreadable (the
// figure is then meaningless, not the cluster).
func readMem() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	used, _ := memUsed(f)
	return used
}

// memUsed reads /proc/meminfo's MemTotal and MemAvailable (kB).
func memUsed(r io.Reader) (uint64, error) {
	var total, avail uint64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = v << 10
		case "MemAvailable:":
			avail = v << 10
		}
	}
	if total == 0 || avail == 0 || avail > total {
		return 0, fmt.Errorf("meminfo: MemTotal %d, MemAvailable %d", total, avail)
	}
	return total - avail, sc.Err()
}

// cpuSample is /proc/stat's first line: busy and total jiffies.
type cpuSample struct {
	busy, total uint64
	cores       int
}

func readCPU() cpuSample {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	defer f.Close()
	s, _ := parseStat(f)
	return s
}

// parseStat reads the "cpu" line (user nice system idle iowait irq
// softirq steal ...) and counts the cpuN lines.
func parseStat(r io.Reader) (cpuSample, error) {
	var s cpuSample
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 4 && f[0] == "cpu":
			for i, v := range f[1:] {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return s, fmt.Errorf("/proc/stat cpu field %d: %w", i+1, err)
				}
				// guest and guest_nice are counted in user already.
				if i >= 8 {
					break
				}
				s.total += n
				if i != 3 && i != 4 { // idle, iowait
					s.busy += n
				}
			}
			seen = true
		case len(f) > 0 && strings.HasPrefix(f[0], "cpu"):
			s.cores++
		}
	}
	if !seen {
		return s, fmt.Errorf("/proc/stat: no cpu line")
	}
	return s, sc.Err()
}

// busySince is the average number of cores busy between a and s.
func (s cpuSample) busySince(a cpuSample) float64 {
	if s.total <= a.total || s.cores == 0 {
		return 0
	}
	return float64(s.busy-a.busy) / float64(s.total-a.total) * float64(s.cores)
}

// qemuRSS is the nodes' QEMU processes' resident memory in bytes.
func (c *cluster) qemuRSS() uint64 {
	var sum uint64
	for _, nd := range c.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", nd.vm.Pid()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture berth builds for.
const clockTicks = 100

// qemuCPU is the seconds of CPU the nodes' QEMU processes have used.
func (c *cluster) qemuCPU() float64 {
	var sum float64
	for _, nd := range c.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", nd.vm.Pid()))
		if err != nil {
			continue
		}
		sum += procCPU(string(b))
	}
	return sum
}

// procCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line, in seconds; the command name in parentheses may
// hold spaces, so the fields are counted after its closing parenthesis.
func procCPU(stat string) float64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(u+s) / clockTicks
}
