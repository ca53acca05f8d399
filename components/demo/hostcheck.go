package main

// hostcheck is the pod side of the host-contract test: run in a privileged
// pod with the host paths an add-on's DaemonSet mounts, it does what those
// add-ons do at start (aws-vpc-cni-init copying plugins into /opt/cni/bin
// as X.tmp and renaming them, Cilium mounting under a Bidirectional
// hostPath, kube-proxy rewriting conntrack settings) and writes one JSON
// result per host-contract row. The test reads the results from the host
// and checks the host side of each (the copied plugin runs on the host, the
// pod's mount is visible there).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Where the pod spec mounts the host paths (see qemu-tests/hostcontract_test.go).
const (
	hcCNIBin     = "/host/opt/cni/bin"
	hcCNINet     = "/host/etc/cni/net.d"
	hcSock       = "/host/containerd.sock" // hostPath /var/run/containerd/containerd.sock, type Socket
	hcBPF        = "/host/sys/fs/bpf"
	hcPlugins    = "/host/plugins" // hostPath /var/lib/kubelet/plugins, Bidirectional
	hcOut        = "/host/out"     // hostPath /run/berth-hostcheck
	hcProbeName  = "berth-probe"
	hcNetdProbe  = ".berth-probe" // not .conf/.conflist/.json: CNI ignores it
	bpfFSMagic   = 0xcafe4a11
	probeVersion = "berth demo probe ok"
)

// checkResult is one row's outcome as the pod saw it.
type checkResult struct {
	Row    string `json:"row"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// hostcheck runs every pod-side check and writes the results to
// hcOut/result.json and stdout; it fails only if it cannot write them. The
// caller then keeps the pod running, so the test can read its OCI spec.
func hostcheck(stdout io.Writer) error {
	res := []checkResult{
		check("cni-bin", copyPlugin),
		check("cni-net", writeNetd),
		check("var-run", containerdSocket),
		check("bpffs", bpffs),
		check("propagation", bidirectionalMount),
		check("sysctl-write", rewriteConntrack),
		check("limits", func() (string, error) {
			f, err := os.Open("/proc/self/limits")
			if err != nil {
				return "", err
			}
			defer f.Close()
			soft, hard, err := openFileLimits(f)
			if err != nil {
				return "", err
			}
			// Go raises its own soft limit to the hard one at start, so
			// the soft limit the pod was given is checked in its OCI spec
			// (by the test, on the host); here the hard one, and that the
			// soft one is no lower than nodeadm's.
			d := fmt.Sprintf("nofile %d/%d", soft, hard)
			if soft < 65536 || hard != 1048576 {
				return d, fmt.Errorf("%s, want a hard limit of 1048576 and a soft one of at least 65536", d)
			}
			return d, nil
		}),
	}
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hostcheck %s\n", data)
	if err := os.WriteFile(filepath.Join(hcOut, "result.json.tmp"), data, 0o644); err != nil {
		return fmt.Errorf("writing the results: %w", err)
	}
	return os.Rename(filepath.Join(hcOut, "result.json.tmp"), filepath.Join(hcOut, "result.json"))
}

func check(row string, f func() (string, error)) checkResult {
	d, err := f()
	if err != nil {
		if d != "" {
			d += ": "
		}
		return checkResult{Row: row, Detail: d + err.Error()}
	}
	return checkResult{Row: row, OK: true, Detail: d}
}

// copyPlugin copies this program into the host's /opt/cni/bin the way
// aws-vpc-cni-init installs its plugins: write X.tmp, then rename.
func copyPlugin() (string, error) {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(hcCNIBin, hcProbeName+".tmp")
	if err := os.WriteFile(tmp, self, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(hcCNIBin, hcProbeName)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes", len(self)), nil
}

func writeNetd() (string, error) {
	return "", os.WriteFile(filepath.Join(hcCNINet, hcNetdProbe), []byte("probe\n"), 0o644)
}

func containerdSocket() (string, error) {
	fi, err := os.Stat(hcSock)
	if err != nil {
		return "", err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return "", fmt.Errorf("%s is %v, not a socket", hcSock, fi.Mode())
	}
	return "socket", nil
}

func bpffs() (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(hcBPF, &st); err != nil {
		return "", err
	}
	if uint32(st.Type) != bpfFSMagic {
		return "", fmt.Errorf("%s has filesystem magic %#x, not bpffs", hcBPF, st.Type)
	}
	return "bpffs", nil
}

// bidirectionalMount mounts a tmpfs under the Bidirectional hostPath, as a
// CSI node plugin does; the test looks for it in the host's mountinfo.
func bidirectionalMount() (string, error) {
	dir := filepath.Join(hcPlugins, hcProbeName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		return "", fmt.Errorf("mounting a tmpfs on %s: %w", dir, err)
	}
	return "tmpfs on " + dir, os.WriteFile(filepath.Join(dir, "hello"), []byte("from the pod\n"), 0o644)
}

// rewriteConntrack writes back the values kube-proxy's conntrack setup
// writes, in /proc/sys and in /sys; any error but a read-only filesystem
// is fatal to kube-proxy, so any error fails here.
func rewriteConntrack() (string, error) {
	var done []string
	for _, p := range []string{
		"/proc/sys/net/netfilter/nf_conntrack_max",
		"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established",
		"/sys/module/nf_conntrack/parameters/hashsize",
	} {
		v, err := os.ReadFile(p)
		if err != nil {
			return strings.Join(done, " "), err
		}
		if err := os.WriteFile(p, v, 0); err != nil {
			return strings.Join(done, " "), fmt.Errorf("writing %s back: %w", p, err)
		}
		done = append(done, filepath.Base(p)+"="+strings.TrimSpace(string(v)))
	}
	return strings.Join(done, " "), nil
}

// openFileLimits reads the "Max open files" line of a /proc/PID/limits.
func openFileLimits(r io.Reader) (soft, hard uint64, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("short limits line %q", sc.Text())
		}
		if soft, err = parseLimit(f[0]); err != nil {
			return 0, 0, err
		}
		if hard, err = parseLimit(f[1]); err != nil {
			return 0, 0, err
		}
		return soft, hard, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, errors.New("no \"Max open files\" line")
}

func parseLimit(s string) (uint64, error) {
	if s == "unlimited" {
		return ^uint64(0), nil
	}
	return strconv.ParseUint(s, 10, 64)
}
