package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/runtime/kubelet"
)

// withMachine is the base case's config with berth's machine annotations.
func withMachine(t *testing.T, ann map[string]string) Inputs {
	t.Helper()
	in := goldenCase{userData: "plain.yaml", host: Host{CPUs: 2, MemoryMiB: 7680}}.inputs(t)
	b, err := json.Marshal(ann)
	if err != nil {
		t.Fatal(err)
	}
	in.Config.Metadata = map[string]json.RawMessage{"annotations": b}
	return in
}

// TestMachineSysctls: a user value replaces one of berth's defaults and
// keeps the module the key needs; a new key is added, sorted in; a key
// berth needs may be given its own value but no other.
func TestMachineSysctls(t *testing.T) {
	p, err := Build(withMachine(t, map[string]string{
		"berth.dev/sysctls": `{"vm.max_map_count": "262144", "net/netfilter/nf_conntrack_max": "262144", "kernel.panic": "10", "user.max_user_namespaces": "0"}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]kubelet.Sysctl{
		"vm.max_map_count":               {Key: "vm.max_map_count", Value: "262144", User: true},
		"net.netfilter.nf_conntrack_max": {Key: "net.netfilter.nf_conntrack_max", Value: "262144", Module: "nf_conntrack", User: true},
		"kernel.panic":                   {Key: "kernel.panic", Value: "10", Required: true, User: true},
		"user.max_user_namespaces":       {Key: "user.max_user_namespaces", Value: "0", User: true},
		"fs.inotify.max_user_watches":    {Key: "fs.inotify.max_user_watches", Value: "524288"},
	}
	for k, w := range want {
		i := slices.IndexFunc(p.Sysctls, func(s kubelet.Sysctl) bool { return s.Key == k })
		if i < 0 || p.Sysctls[i] != w {
			t.Errorf("%s: got %+v, want %+v", k, p.Sysctls, w)
		}
	}
	if !slices.IsSortedFunc(p.Sysctls, func(a, b kubelet.Sysctl) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("not sorted: %+v", p.Sysctls)
	}
	if n := len(kubelet.Sysctls(false)) + 1; len(p.Sysctls) != n {
		t.Errorf("%d sysctls, want %d", len(p.Sysctls), n)
	}
	if !strings.Contains(string(p.Describe()), "user.max_user_namespaces = 0 (user data)") {
		t.Errorf("plan.txt:\n%s", p.Describe())
	}

	for key, why := range map[string]string{
		"kernel.panic":        "kubelet (protectKernelDefaults) does not start without it",
		"net/ipv4/ip_forward": "pods' traffic is forwarded through it",
	} {
		_, err := Build(withMachine(t, map[string]string{"berth.dev/sysctls": `{"` + key + `": "0"}`}))
		canon := strings.ReplaceAll(key, "/", ".")
		want := `metadata.annotations["berth.dev/sysctls"]["` + canon + `"]: "0": berth needs ` + canon
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s = 0: %v, want %s ... %s", key, err, want, why)
		}
	}
}

// TestMachineOthers: modules, hostname and NTP servers go into the plan
// and plan.txt; the node's name stays instance metadata's; a bad value is
// an error at its annotation's path.
func TestMachineOthers(t *testing.T) {
	p, err := Build(withMachine(t, map[string]string{
		"berth.dev/kernel-modules": `["ip_vs", "sctp"]`,
		"berth.dev/hostname":       "node-7",
		"berth.dev/ntp-servers":    `["10.0.0.1", "time.example.com"]`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.KernelModules, []string{"ip_vs", "sctp"}) || p.Hostname != "node-7" || !slices.Equal(p.NTPServers, []string{"10.0.0.1", "time.example.com"}) {
		t.Errorf("modules %q hostname %q ntp %q", p.KernelModules, p.Hostname, p.NTPServers)
	}
	if p.NodeName != baseInstance().LocalHostname {
		t.Errorf("node name %q: the hostname annotation must not change it", p.NodeName)
	}
	d := string(p.Describe())
	for _, want := range []string{"kernel-modules: ip_vs, sctp\n", "hostname: node-7\n", "ntp-servers: 10.0.0.1, time.example.com (then the boot's own)\n"} {
		if !strings.Contains(d, want) {
			t.Errorf("plan.txt lacks %q:\n%s", want, d)
		}
	}
	_, err = Build(withMachine(t, map[string]string{"berth.dev/hostname": "a_b"}))
	if err == nil || !strings.Contains(err.Error(), `metadata.annotations["berth.dev/hostname"]: "a_b" is not a hostname`) {
		t.Errorf("bad hostname: %v", err)
	}
}

// TestMachineBlockedModules: the blocked modules are a file berth
// modprobe reads and a line of plan.txt; one berth loads itself cannot be
// blocked, and the error says what needs it.
func TestMachineBlockedModules(t *testing.T) {
	p, err := Build(withMachine(t, map[string]string{"berth.dev/blocked-kernel-modules": `["sctp", "udf"]`}))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(p.Files, func(f File) bool { return f.Path == BlockedModulesPath })
	if !slices.Equal(p.BlockedModules, []string{"sctp", "udf"}) || i < 0 || string(p.Files[i].Data) != "sctp\nudf\n" || p.Files[i].Mode != 0o644 {
		t.Errorf("blocked %q, files %+v", p.BlockedModules, p.Files)
	}
	if !strings.Contains(string(p.Describe()), "blocked-kernel-modules: sctp, udf\n") {
		t.Errorf("plan.txt:\n%s", p.Describe())
	}
	if p, err := Build(withMachine(t, nil)); err != nil || slices.ContainsFunc(p.Files, func(f File) bool { return f.Path == BlockedModulesPath }) {
		t.Errorf("no annotation: %v, files %+v", err, p.Files)
	}

	in := withMachine(t, map[string]string{"berth.dev/blocked-kernel-modules": `["udf", "nf_conntrack", "overlay"]`})
	in.Manifest.Preload = []string{"overlay"}
	_, err = Build(in)
	for _, want := range []string{
		`metadata.annotations["berth.dev/blocked-kernel-modules"][1]: "nf_conntrack" cannot be blocked: sysctl net.netfilter.nf_conntrack_max lives in it`,
		`metadata.annotations["berth.dev/blocked-kernel-modules"][2]: "overlay" cannot be blocked: the image preloads it`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
}
