package qemutests

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/diskboot"
	"github.com/berth-node/berth/mounts/hostfs"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// The host contract (docs/host-contract.md): what EKS's add-ons expect of
// a node, checked row by row on a joined node, from inside the guest and
// from a privileged hostPath pod doing what the add-ons do at start. Every
// failure names its row, as the table does.

// hcSerial is the NVMe disk standing in for an EBS volume: not an
// instance-store disk (no berth-is- prefix), so only the device links
// touch it.
const hcSerial = "vol0123456789abcdef0"

// hcRow is one row of docs/host-contract.md.
type hcRow struct {
	name  string
	check func(h *hcNode) error
}

// hcNode is a joined node under test, with what its rows need.
type hcNode struct {
	t    *testing.T
	vm   *qemu.VM
	rep  map[string]any
	host hostfs.Result // the report's host section
	pod  map[string]podCheck
	ntp  *ntpFixture
	disk bool
}

func (h *hcNode) image() string {
	if h.disk {
		return "disk"
	}
	return "initramfs"
}

// podCheck is one result of the pod-side probe (components/demo hostcheck.go).
type podCheck struct {
	Row    string `json:"row"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func (h *hcNode) sh(cmd string) (string, error) { return h.vm.Shell(cmd, shellTimeout) }

// podRow is the pod's result for row, as an error.
func (h *hcNode) podRow(row string) error {
	r, ok := h.pod[row]
	switch {
	case !ok:
		return fmt.Errorf("the hostcheck pod reported nothing for %s", row)
	case !r.OK:
		return fmt.Errorf("from the privileged pod: %s", r.Detail)
	}
	return nil
}

// hcRows is the table, in the order of docs/host-contract.md.
func hcRows() []hcRow {
	return []hcRow{
		{"1 /opt/cni/bin writable and executable", func(h *hcNode) error {
			if err := h.podRow("cni-bin"); err != nil {
				return err
			}
			for _, d := range []string{"/opt/cni/bin", "/opt/csi"} {
				if _, err := h.sh(fmt.Sprintf("grep -q ' %s overlay ' /proc/mounts", d)); err != nil {
					return fmt.Errorf("%s is no overlay: %w", d, err)
				}
			}
			// The plugin the pod installed runs on the host, beside the
			// image's own plugins, which are still there.
			out, err := h.sh("/opt/cni/bin/berth-probe probe-version")
			if err != nil || strings.TrimSpace(out) != "berth demo probe ok" {
				return fmt.Errorf("running the plugin the pod copied into /opt/cni/bin: %q, %v", out, err)
			}
			if _, err := h.sh("cp /bin/busybox /opt/cni/bin/true && /opt/cni/bin/true && test -x /opt/cni/bin/bridge && touch /opt/csi/.probe"); err != nil {
				return fmt.Errorf("writing and running on the host: %w", err)
			}
			var errs []string
			// An image plugin copied under a new name runs as a CNI plugin;
			// the image's own run through the overlay from its lower layer.
			for _, cmd := range []string{
				"cp /opt/cni/bin/loopback /opt/cni/bin/copied && CNI_COMMAND=VERSION /opt/cni/bin/copied",
				"CNI_COMMAND=VERSION /opt/cni/bin/bridge",
				"CNI_COMMAND=VERSION /opt/cni/bin/loopback",
			} {
				if out, err := h.sh(cmd); err != nil || !strings.Contains(out, "cniVersion") {
					errs = append(errs, fmt.Sprintf("%s: %q, %v (want its version JSON)", cmd, out, err))
				}
			}
			// The upper dir holds exactly what was written at run time: the
			// pod's plugin and the host's two copies. install-cni (the
			// cluster's CNI DaemonSet) writes a plugin only when the host's
			// differs, and its image carries the same cni-plugins build as
			// the node image (components.mk CNI_DIR), so it writes none: an
			// image plugin here would mean the overlay copied it up.
			upper := ""
			for _, o := range h.host.Overlays {
				if o.Target == hostfs.CNIBinDir {
					upper = o.Upper
				}
			}
			if want := hostfs.OverlayState + "/opt-cni-bin/upper"; upper != want {
				errs = append(errs, fmt.Sprintf("the report's overlay on %s has upper dir %q, want %s", hostfs.CNIBinDir, upper, want))
			} else {
				out, err := h.sh("ls -A " + upper)
				got := strings.Fields(out)
				slices.Sort(got)
				if want := []string{"berth-probe", "copied", "true"}; err != nil || !slices.Equal(got, want) {
					errs = append(errs, fmt.Sprintf("the overlay's upper dir %s holds %q (%v), want exactly %q, none of the image's plugins", upper, got, err, want))
				}
			}
			return joinErrs(errs)
		}},
		{"2 /etc/cni/net.d writable", func(h *hcNode) error {
			if err := h.podRow("cni-net"); err != nil {
				return err
			}
			out, err := h.sh("cat /etc/cni/net.d/.berth-probe && touch /etc/cni/net.d/.host-probe")
			if err != nil || strings.TrimSpace(out) != "probe" {
				return fmt.Errorf("the pod's file in /etc/cni/net.d: %q, %v", out, err)
			}
			return nil
		}},
		{"3 /var/run is a symlink to /run", func(h *hcNode) error {
			out, err := h.sh("readlink /var/run")
			if err != nil || strings.TrimSpace(out) != "/run" {
				return fmt.Errorf("readlink /var/run: %q, %v (want the absolute /run)", out, err)
			}
			if _, err := h.sh("test -d /var/run/berth"); err != nil {
				return fmt.Errorf("/var/run/berth is no directory: %w", err)
			}
			return h.podRow("var-run")
		}},
		{"4a bpffs on /sys/fs/bpf", func(h *hcNode) error {
			ms, err := h.mountInfo()
			if err != nil {
				return err
			}
			// As systemd mounts it: only root may pin BPF objects there.
			if m, ok := mounts.TopAt(ms, hostfs.BPFDir); !ok || m.FSType != "bpf" || !strings.Contains(","+m.SuperOptions+",", ",mode=700,") {
				return fmt.Errorf("%s in PID 1's mountinfo: %+v, want bpf with mode=700", hostfs.BPFDir, m)
			}
			return h.podRow("bpffs")
		}},
		{"4b shared mounts and kubelet plugin dirs", func(h *hcNode) error {
			ms, err := h.mountInfo()
			if err != nil {
				return err
			}
			var errs []string
			for _, p := range h.sharedMounts() {
				m, ok := mounts.TopAt(ms, p)
				switch {
				case !ok:
					errs = append(errs, p+" is not a mount point")
				case !m.Shared():
					errs = append(errs, fmt.Sprintf("%s is not shared (%+v)", p, m))
				}
			}
			if _, ok := mounts.TopAt(ms, hostfs.KubeletPlugins+"/berth-probe"); !ok {
				errs = append(errs, "the pod's mount under the Bidirectional hostPath /var/lib/kubelet/plugins did not propagate to the host")
			}
			if _, err := h.sh("test -d " + hostfs.PluginsRegistry + " && test -d " + hostfs.KubeletPlugins); err != nil {
				errs = append(errs, "kubelet's plugin directories are missing")
			}
			if err := h.podRow("propagation"); err != nil {
				errs = append(errs, err.Error())
			}
			return joinErrs(errs)
		}},
		{"5 kernel modules on demand", func(h *hcNode) error {
			preloaded := reportModules(h.t, h.rep)
			steps := []struct{ cmd, mod string }{
				{"iptables -t nat -N BERTH-PROBE", ""},
				{"iptables -t nat -A BERTH-PROBE -m statistic --mode random --probability 0.5 -j RETURN", "xt_statistic"},
				{"iptables -t nat -A BERTH-PROBE -m addrtype --dst-type LOCAL -j RETURN", "xt_addrtype"},
				{"iptables -t mangle -A PREROUTING -m connmark --mark 0x80/0x80 -j RETURN", "xt_connmark"},
				{"iptables -t filter -A INPUT -p tcp -m multiport --dports 1,2 -j ACCEPT", "xt_multiport"},
				{"iptables -t nat -A BERTH-PROBE -m recent --name BERTH-PROBE --rcheck --seconds 10800 --reap -j RETURN", "xt_recent"},
				{"ip6tables -t nat -N BERTH-PROBE && ip6tables -t nat -A BERTH-PROBE -m statistic --mode random --probability 0.5 -j RETURN", ""},
				{"nft add table ip berthprobe && nft 'add chain ip berthprobe post { type nat hook postrouting priority 100 ; }' && nft add rule ip berthprobe post ct state established accept && nft add rule ip berthprobe post masquerade", "nft_ct"},
				{"ip link add bp-dummy type dummy", "dummy"},
				{"ip link add bp-vx type vxlan id 42 dstport 4789 dev eth0", "vxlan"},
			}
			var errs []string
			for _, s := range steps {
				if out, err := h.sh(s.cmd); err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v %s", s.cmd, err, out))
					continue
				}
				if s.mod == "" {
					continue
				}
				if _, err := h.sh("grep -q '^" + s.mod + " ' /proc/modules"); err != nil {
					errs = append(errs, fmt.Sprintf("%s succeeded but %s is not in /proc/modules", s.cmd, s.mod))
				} else if slices.Contains(preloaded, s.mod) {
					errs = append(errs, fmt.Sprintf("%s was loaded at boot, so this does not prove it loads on demand", s.mod))
				}
			}
			return joinErrs(errs)
		}},
		{"6 host iptables and FORWARD policy", func(h *hcNode) error {
			var errs []string
			for _, c := range []struct{ cmd, want string }{
				{"iptables -V", "nf_tables"},
				{"iptables -S FORWARD", "-P FORWARD ACCEPT"},
				{"ip6tables -S FORWARD", "-P FORWARD ACCEPT"},
				// kubelet's marker chains, made because it found iptables.
				{"iptables -t mangle -S KUBE-IPTABLES-HINT", "-N KUBE-IPTABLES-HINT"},
				{"iptables -t mangle -S KUBE-KUBELET-CANARY", "-N KUBE-KUBELET-CANARY"},
				{"iptables-legacy -V", "legacy"},
				{"iptables-legacy -t filter -L -n", "Chain INPUT"},
			} {
				out, err := h.sh(c.cmd)
				if err != nil || !strings.Contains(out, c.want) {
					errs = append(errs, fmt.Sprintf("%s: %q, %v (want %q)", c.cmd, out, err, c.want))
				}
			}
			return joinErrs(errs)
		}},
		{"7 sysctls", func(h *hcNode) error {
			// The plan says what it set (plan.txt, as berth render shows
			// it); each must be in effect, and the ones the add-ons need
			// must be among them.
			out, err := h.sh("cat /run/berth/plan.txt")
			if err != nil {
				return err
			}
			planned := planSysctls(out)
			var errs []string
			for _, k := range []string{"net.ipv4.ip_forward", "fs.inotify.max_user_watches", "fs.inotify.max_user_instances",
				"vm.max_map_count", "kernel.pid_max", "net.netfilter.nf_conntrack_max", "net.ipv4.conf.lo.rp_filter"} {
				if _, ok := planned[k]; !ok {
					errs = append(errs, k+" is not in the plan")
				}
			}
			for k, v := range planned {
				got, err := h.sh("cat /proc/sys/" + strings.ReplaceAll(k, ".", "/"))
				if err != nil || sysctlValue(k, got) != sysctlValue(k, v) {
					errs = append(errs, fmt.Sprintf("%s = %q in /proc/sys, planned %q (%v)", k, got, v, err))
				}
			}
			if err := h.podRow("sysctl-write"); err != nil {
				errs = append(errs, err.Error())
			}
			return joinErrs(errs)
		}},
		{"8 open-file limits", func(h *hcNode) error {
			var errs []string
			if err := h.podRow("limits"); err != nil {
				errs = append(errs, err.Error())
			}
			// The soft limit the pod was given is in the OCI spec runc
			// applied (the probe is a Go program, which raises its own).
			out, err := h.sh(`for f in /run/containerd/io.containerd.runtime.v2.task/k8s.io/*/config.json; do grep -q '"args":\["/demo","hostcheck"\]' $f && cat $f; done; true`)
			if err != nil {
				return err
			}
			var spec struct {
				Process struct {
					Rlimits []struct {
						Type       string `json:"type"`
						Hard, Soft uint64
					} `json:"rlimits"`
				} `json:"process"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &spec); err != nil {
				errs = append(errs, fmt.Sprintf("the hostcheck container's OCI spec: %v (%q)", err, trimTo(out, 200)))
			} else {
				found := false
				for _, r := range spec.Process.Rlimits {
					if r.Type == "RLIMIT_NOFILE" {
						found = true
						if r.Soft != 65536 || r.Hard != 1048576 {
							errs = append(errs, fmt.Sprintf("the pod's spec gives RLIMIT_NOFILE %d/%d, want 65536/1048576", r.Soft, r.Hard))
						}
					}
				}
				if !found {
					errs = append(errs, fmt.Sprintf("the pod's spec has no RLIMIT_NOFILE: %+v", spec.Process.Rlimits))
				}
			}
			// containerd as its systemd unit runs it; kubelet raises its
			// own to its maxOpenFiles.
			for name, s := range servicePIDs(h.t, h.rep) {
				out, err := h.sh(fmt.Sprintf("grep 'Max open files' /proc/%d/limits", s.PID))
				f := strings.Fields(strings.TrimPrefix(out, "Max open files"))
				if err != nil || len(f) < 2 {
					errs = append(errs, fmt.Sprintf("%s's limits: %q, %v", name, out, err))
					continue
				}
				if soft, _ := strconv.ParseUint(f[0], 10, 64); soft < 524288 {
					errs = append(errs, fmt.Sprintf("%s runs with open files %s/%s", name, f[0], f[1]))
				}
			}
			return joinErrs(errs)
		}},
		{"9 EBS device links", func(h *hcNode) error {
			link := "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_" + hcSerial
			out, err := h.sh("readlink -f " + link + " && cat /sys/class/block/$(basename $(readlink -f " + link + "))/device/serial")
			if err != nil {
				return fmt.Errorf("%s: %w", link, err)
			}
			if f := strings.Fields(out); len(f) != 2 || !strings.HasPrefix(f[0], "/dev/nvme") || f[1] != hcSerial {
				return fmt.Errorf("%s resolves to %q, want the NVMe namespace with serial %s", link, out, hcSerial)
			}
			return nil
		}},
		{"10 time sync", func(h *hcNode) error { return h.ntp.check(h) }},
		{"11 ECR image patterns", func(h *hcNode) error {
			out, err := h.sh("cat /etc/eks/image-credential-provider/config.json")
			if err != nil {
				return err
			}
			var errs []string
			for _, p := range []string{"*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.eu", "public.ecr.aws", "ecr-public.aws.com"} {
				if !strings.Contains(out, strconv.Quote(p)) {
					errs = append(errs, "matchImages lacks "+p)
				}
			}
			return joinErrs(errs)
		}},
	}
}

func joinErrs(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(errs, "\n"))
}

// mountInfo is PID 1's mount table, as the guest reads it.
func (h *hcNode) mountInfo() ([]mounts.MountInfo, error) {
	out, err := h.sh("cat /proc/1/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/1/mountinfo: %w", err)
	}
	ms, err := mounts.ParseMountInfo(strings.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("PID 1's mountinfo: %w", err)
	}
	return ms, nil
}

// sharedMounts are the mount points that must be shared on this node:
// the host phase's own (hostfs.SharedPaths), the overlays and bpffs, the
// RAID0 array and its binds (docs/operating.md: they hold containerd's
// and kubelet's state on this node, over the data partition's
// /var/lib/kubelet on a disk boot), and on a disk boot the data partition
// with its binds. Each is checked where it is visible, the top mount.
func (h *hcNode) sharedMounts() []string {
	out := append(hostfs.SharedPaths(), hostfs.Overlays()...)
	out = append(out, hostfs.BPFDir,
		"/mnt/k8s-disks/0", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")
	if h.disk {
		out = append(out, diskboot.DataMount)
		for _, b := range diskboot.DataBinds() {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// checkHostReport checks the report's host section and where the host
// phase ran, and returns the section; a failure does not stop the rows.
func checkHostReport(t *testing.T, rep map[string]any, image string) hostfs.Result {
	t.Helper()
	var host hostfs.Result
	section(t, rep, "host", &host)
	if len(host.Errors) > 0 {
		t.Errorf("%s image: host phase errors: %q", image, host.Errors)
	}
	for _, o := range host.Overlays {
		if o.Status != "mounted" {
			t.Errorf("%s image: report: overlay %s is %s, want mounted (%s)", image, o.Target, o.Status, o.Error)
		}
	}
	if len(host.Overlays) != len(hostfs.Overlays()) {
		t.Errorf("%s image: report: overlays %+v, want one on each of %q", image, host.Overlays, hostfs.Overlays())
	}
	// /var is a fresh tmpfs on every boot kind (docs/host-contract.md row 1).
	if host.VarRun.Action != hostfs.LinkCreate {
		t.Errorf("%s image: report: /var/run action %q on a fresh /var, want %s", image, host.VarRun.Action, hostfs.LinkCreate)
	}
	var phases []report.Phase
	section(t, rep, "phases", &phases)
	var names []string
	for _, p := range phases {
		names = append(names, p.Name)
		if p.Name == "host" {
			figure(t, "%s image: host phase: %d ms guest (setup %d ms)", image, p.DurationMs, host.DurationMs)
			if p.Error != "" {
				t.Errorf("%s image: host phase error: %s", image, p.Error)
			}
		}
	}
	// After storage, so the plugin directories land inside the instance
	// store's binds; before apply, which starts the services.
	if !strings.Contains(" "+strings.Join(names, " ")+" ", " storage host apply ") {
		t.Errorf("%s image: phases %q: want host between storage and apply", image, names)
	}
	return host
}

// planSysctls reads the sysctls section of plan.txt ("  key = value").
var sysctlLine = regexp.MustCompile(`^\s+([a-z0-9_.\-]+) = (.*)$`)

// The plan's annotations, " (required)" and " (module x)", follow the value.
var sysctlNote = regexp.MustCompile(`( \((required|module [a-z0-9_]+)\))+$`)

func planSysctls(planTxt string) map[string]string {
	out := map[string]string{}
	in := false
	for _, l := range strings.Split(planTxt, "\n") {
		switch {
		case strings.TrimSpace(l) == "sysctls:":
			in = true
		case in && sysctlLine.MatchString(l):
			m := sysctlLine.FindStringSubmatch(l)
			out[m[1]] = sysctlNote.ReplaceAllString(m[2], "")
		case in && strings.TrimSpace(l) != "":
			in = false
		}
	}
	return out
}

// sysctlValue is a sysctl's value in a form to compare: whitespace runs
// as one space, and port lists as the sorted ports they name (the kernel
// shows ip_local_reserved_ports as ranges, "9808-9809").
func sysctlValue(key, v string) string {
	v = strings.Join(strings.Fields(v), " ")
	if !strings.HasSuffix(key, "_ports") {
		return v
	}
	var ports []int
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || b < a || b-a > 65535 {
			return v
		}
		for p := a; p <= b; p++ {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	return fmt.Sprint(ports)
}

// hostcheckPod is the privileged pod that does what the add-ons do, with
// the host paths their DaemonSets mount.
func hostcheckPod(node string) map[string]any {
	hp := func(name, path, typ string) map[string]any {
		v := map[string]any{"name": name, "hostPath": map[string]any{"path": path}}
		if typ != "" {
			v["hostPath"].(map[string]any)["type"] = typ
		}
		return v
	}
	mount := func(name, at, prop string) map[string]any {
		m := map[string]any{"name": name, "mountPath": at}
		if prop != "" {
			m["mountPropagation"] = prop
		}
		return m
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "hostcheck", "namespace": "default"},
		"spec": map[string]any{
			"nodeName":      node,
			"restartPolicy": "Never",
			// The probe waits for its SIGTERM after writing the results.
			"terminationGracePeriodSeconds": 2,
			"hostNetwork":                   true,
			"volumes": []any{
				hp("cni-bin", "/opt/cni/bin", "Directory"),
				hp("cni-net", "/etc/cni/net.d", "Directory"),
				hp("sock", "/var/run/containerd/containerd.sock", "Socket"),
				hp("bpf", "/sys/fs/bpf", "Directory"),
				hp("plugins", "/var/lib/kubelet/plugins", "Directory"),
				hp("out", "/run/berth-hostcheck", "DirectoryOrCreate"),
			},
			"containers": []any{map[string]any{
				"name": "hostcheck", "image": "localhost/berth-demo:v1", "imagePullPolicy": "Never",
				"args":            []any{"hostcheck"},
				"securityContext": map[string]any{"privileged": true},
				"volumeMounts": []any{
					mount("cni-bin", "/host/opt/cni/bin", ""),
					mount("cni-net", "/host/etc/cni/net.d", ""),
					mount("sock", "/host/containerd.sock", ""),
					mount("bpf", "/host/sys/fs/bpf", "Bidirectional"),
					mount("plugins", "/host/plugins", "Bidirectional"),
					mount("out", "/host/out", ""),
				},
			}},
		},
	}
}

// TestHostContract checks every row of docs/host-contract.md on a joined
// node booted from the initramfs image and on one booted from the disk
// image (UEFI, verity root, data partition).
func TestHostContract(t *testing.T) {
	cluster := startControlPlane(t)
	for _, disk := range []bool{false, true} {
		name := "initramfs"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) { hostContract(t, cluster, disk) })
	}
}

func hostContract(t *testing.T, cluster *testCluster, onDisk bool) {
	info := cluster.Info()
	ntp := startNTPFixture(t)
	// RAID0 over the instance-store disk: containerd's and kubelet's state
	// move onto it, and its mounts must be shared too.
	nc := cluster.nodeConfig() + "  instance:\n    localStorage:\n      strategy: RAID0\n"
	_, imdsURL := startIMDS(t, mimeUserData(nc))
	args := "berth.imds=" + imdsURL + " " + ntp.cmdline()
	dir := qemu.ImageDir(t)
	var cfg qemu.Config
	if onDisk {
		img, res := testDiskWith(t, dir, "console=ttyS0 quiet berth.onfail=halt berth.debugshell=ttyS1 "+args)
		// Room on the data partition for kubelet's ephemeral-storage
		// reservation (sparse: the file takes what the guest writes).
		cfg = uefiConfig(t, copyDisk(t, img, res.Layout.Size()+8<<30))
	} else {
		cfg = qemu.ImageConfig(dir, args)
		cfg.Shell = true
		cfg.NICs = []qemu.NIC{{}}
	}
	// An instance-store disk (its mounts must be shared too) and the
	// stand-in EBS volume.
	cfg.Disks = append(cfg.Disks,
		qemu.Disk{Path: sparseDisk(t, t.TempDir(), "is0", 8<<30), Interface: "nvme", Serial: "berth-is-hc0"},
		nvmeDisk(t, hcSerial))
	cfg.MemoryMB = 2048
	cfg.Timeout = 15 * time.Minute
	cfg.Extra = append(cfg.Extra, ntp.qemuArgs()...)
	vm := qemu.Start(t, cfg)
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot failed: %v", rep["error"])
	}
	// The disk node is the signed disk joining with Secure Boot on (and
	// so the kernel in lockdown): every row below holds there too.
	if fw, _ := rep["firmware"].(map[string]any); onDisk && (fw == nil || fw["secureBoot"] != true) {
		t.Fatalf("disk boot without Secure Boot: firmware %v", rep["firmware"])
	}
	image := "initramfs"
	if onDisk {
		image = "disk"
	}
	host := checkHostReport(t, rep, image)
	a := api{c: cluster.Client(), base: info.HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	waitNodeReady(t, vm, a, node)
	// One node name serves both boots: the second registers over the first.
	t.Cleanup(func() { _ = a.do("DELETE", "/api/v1/nodes/"+node, nil, nil) })
	if err := a.do("POST", "/api/v1/namespaces/default/pods", hostcheckPod(node), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.do("DELETE", "/api/v1/namespaces/default/pods/hostcheck?gracePeriodSeconds=0", nil, nil) })
	waitPodRunning(t, vm, a, "hostcheck")
	h := &hcNode{t: t, vm: vm, rep: rep, host: host, ntp: ntp, disk: onDisk, pod: map[string]podCheck{}}
	var out string
	waitFor(t, vm, "the hostcheck pod's results", time.Minute, func() (bool, string) {
		o, err := h.sh("cat /run/berth-hostcheck/result.json")
		out = o
		return err == nil, fmt.Sprint(err)
	})
	var res []podCheck
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil {
		t.Fatalf("the hostcheck pod's results %q: %v", out, err)
	}
	for _, r := range res {
		h.pod[r.Row] = r
	}
	failed := 0
	for _, row := range hcRows() {
		if err := row.check(h); err != nil {
			failed++
			t.Errorf("host contract row %q fails on the %s image:\n%v", row.name, h.image(), err)
			continue
		}
		figure(t, "host contract %s image: row %q holds", h.image(), row.name)
	}
	if failed > 0 {
		t.Logf("console tail:\n%s", vm.ConsoleTail(40))
		if mi, err := h.sh("cat /proc/1/mountinfo"); err == nil {
			t.Logf("PID 1's mountinfo:\n%s", mi)
		}
	}
}

func TestSysctlValueAndPlan(t *testing.T) {
	if a, b := sysctlValue("net.ipv4.ip_local_reserved_ports", "2703,9808-9809"), sysctlValue("net.ipv4.ip_local_reserved_ports", "9809,2703,9808"); a != b {
		t.Errorf("port ranges: %q != %q", a, b)
	}
	if sysctlValue("vm.max_map_count", " 524288\n") != "524288" {
		t.Error("whitespace not trimmed")
	}
	p := planSysctls("x:\n  a = 1\n\nsysctls:\n  kernel.panic = 10 (required)\n  net.netfilter.nf_conntrack_max = 1048576 (module nf_conntrack)\n  fs.x = 1 2\n\nwarnings:\n  none\n")
	want := map[string]string{"kernel.panic": "10", "net.netfilter.nf_conntrack_max": "1048576", "fs.x": "1 2"}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("planSysctls = %v, want %v", p, want)
	}
}
