package nodeconfig

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/bottlerocket"
)

func withAnnotations(t *testing.T, ann map[string]string) *NodeConfig {
	t.Helper()
	b, err := json.Marshal(ann)
	if err != nil {
		t.Fatal(err)
	}
	return &NodeConfig{APIVersion: APIVersion, Kind: Kind, Metadata: map[string]json.RawMessage{"annotations": b}}
}

func TestMachineOf(t *testing.T) {
	cfg := withAnnotations(t, map[string]string{
		SysctlsAnnotation:              `{"vm.max_map_count": "262144", "net/ipv4/tcp_keepalive_time": "300", "kernel.sched_rt_runtime_us": "-1"}`,
		KernelModulesAnnotation:        `["ip_vs_lc", "sctp"]`,
		BlockedKernelModulesAnnotation: `["udf", "dccp"]`,
		HostnameAnnotation:             "node-12-34",
		NTPServersAnnotation:           `["169.254.169.123", "time.example.com", "fd00:ec2::123"]`,
		"example.com/other":            "not berth's",
	})
	got, err := MachineOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := Machine{
		Sysctls: []Sysctl{
			{Key: "kernel.sched_rt_runtime_us", Value: "-1"},
			{Key: "net.ipv4.tcp_keepalive_time", Value: "300"},
			{Key: "vm.max_map_count", Value: "262144"},
		},
		KernelModules:  []string{"ip_vs_lc", "sctp"},
		BlockedModules: []string{"udf", "dccp"},
		Hostname:       "node-12-34",
		NTPServers:     []string{"169.254.169.123", "time.example.com", "fd00:ec2::123"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got, err := MachineOf(withAnnotations(t, nil)); err != nil || !reflect.DeepEqual(got, Machine{}) {
		t.Errorf("no annotations: %+v %v", got, err)
	}
}

// TestMachineErrors: each bad value is an error at its field path, and
// validation reports it so (berth check, the config phase).
func TestMachineErrors(t *testing.T) {
	s := `metadata.annotations["berth.dev/sysctls"]`
	m := `metadata.annotations["berth.dev/kernel-modules"]`
	h := `metadata.annotations["berth.dev/hostname"]`
	n := `metadata.annotations["berth.dev/ntp-servers"]`
	for _, tc := range []struct {
		key, value, want string
	}{
		{SysctlsAnnotation, `["vm.x"]`, s + `: want a JSON object of sysctl name to value`},
		{SysctlsAnnotation, `{"vm.x": 1}`, s + `["vm.x"]: want the value as a string ("1", not 1), got 1`},
		{SysctlsAnnotation, `{"vm.x": ""}`, s + `["vm.x"]: empty value`},
		{SysctlsAnnotation, `{"vm.x": "1\nkernel.panic=0"}`, s + `["vm.x"]: "1\nkernel.panic=0" has a control character`},
		{SysctlsAnnotation, `{"../../etc/passwd": "x"}`, s + `["../../etc/passwd"]: "../../etc/passwd" is not a sysctl name`},
		{SysctlsAnnotation, `{"vm.x": "1", "vm/x": "2"}`, s + `["vm/x"]: vm.x given twice`},
		{SysctlsAnnotation, `{"vm.x": "` + strings.Repeat("1", MaxSysctlValue+1) + `"}`, s + `["vm.x"]: value of 4097 bytes, more than 4096`},
		{SysctlsAnnotation, `{"vm.x": "1"} {}`, s + `: more than one JSON value`},
		{KernelModulesAnnotation, `"sctp"`, m + `: want a JSON list of kernel modules`},
		{KernelModulesAnnotation, `[]`, m + `: no kernel modules: list at least one`},
		{KernelModulesAnnotation, `["a.ko"]`, m + `[0]: "a.ko" is not a kernel module name`},
		{KernelModulesAnnotation, `["sctp", "sctp"]`, m + `[1]: "sctp" listed twice`},
		{KernelModulesAnnotation, `[1]`, m + `[0]: want a kernel module as a string, got 1`},
		{BlockedKernelModulesAnnotation, `["a/b"]`, `metadata.annotations["berth.dev/blocked-kernel-modules"][0]: "a/b" is not a kernel module name`},
		{HostnameAnnotation, `a_b`, h + `: "a_b" is not a hostname`},
		{HostnameAnnotation, strings.Repeat("a", 60) + ".example", h + `: ` + `"` + strings.Repeat("a", 60) + `.example" is not a hostname: 68 characters`},
		{NTPServersAnnotation, `["https://time.example.com"]`, n + `[0]: "https://time.example.com" is not an NTP server`},
		{NTPServersAnnotation, `["time.example.com:123"]`, n + `[0]: "time.example.com:123" is not an NTP server`},
		{NTPServersAnnotation, `["a","b","c","d","e","f","g","h","i"]`, n + `: 9 NTP servers, at most 8`},
	} {
		_, err := MachineOf(withAnnotations(t, map[string]string{tc.key: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: got %v\nwant %s", tc.key, tc.value, err, tc.want)
		}
		ps := ValidateDocument("user-data", withAnnotations(t, map[string]string{tc.key: tc.value}))
		if !slices.ContainsFunc(ps, func(p Problem) bool {
			return p.Severity == SeverityError && strings.HasPrefix(p.Path, "metadata.annotations[") && strings.Contains(p.Path+": "+p.Message, tc.want)
		}) {
			t.Errorf("%s=%q: validation %q, want %s", tc.key, tc.value, strs(ps), tc.want)
		}
	}
}

// TestMachineBoundsMatchBottlerocket: a Bottlerocket document within
// config/bottlerocket's bounds becomes annotations within these.
func TestMachineBoundsMatchBottlerocket(t *testing.T) {
	if bottlerocket.MaxSysctls != MaxSysctls || bottlerocket.MaxSysctlValue != MaxSysctlValue ||
		bottlerocket.MaxKernelModules != MaxKernelModules || bottlerocket.MaxTimeServers != MaxNTPServers {
		t.Errorf("bottlerocket's bounds %d %d %d %d, nodeconfig's %d %d %d %d",
			bottlerocket.MaxSysctls, bottlerocket.MaxSysctlValue, bottlerocket.MaxKernelModules, bottlerocket.MaxTimeServers,
			MaxSysctls, MaxSysctlValue, MaxKernelModules, MaxNTPServers)
	}
}

// TestLoadBottlerocketMachine: Bottlerocket's machine settings become
// berth's machine annotations, which read back as they were set.
func TestLoadBottlerocketMachine(t *testing.T) {
	doc := `[settings.kubernetes]
cluster-name = "c"
api-server = "https://api.example.com"
cluster-dns-ip = "10.100.0.10"
[settings.kernel.sysctl]
"vm.max_map_count" = "262144"
"net/core/somaxconn" = "4096"
[settings.kernel.modules.ip_vs_lc]
autoload = true
[settings.kernel.modules.sctp]
allowed = false
[settings.network]
hostname = "node-1"
[settings.ntp]
time-servers = [{address = "time.example.com", options = ["iburst"]}, {address = "10.0.0.1"}]
`
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	res, _ := Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(doc)}})
	if res == nil || res.Config == nil {
		t.Fatal("no config")
	}
	got, err := MachineOf(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := Machine{
		Sysctls:        []Sysctl{{Key: "net.core.somaxconn", Value: "4096"}, {Key: "vm.max_map_count", Value: "262144"}},
		KernelModules:  []string{"ip_vs_lc"},
		BlockedModules: []string{"sctp"},
		Hostname:       "node-1",
		NTPServers:     []string{"time.example.com", "10.0.0.1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if !slices.Contains(strs(res.Problems), "warning: user-data (Bottlerocket settings): settings.ntp.time-servers[0].options: ignored: berth's NTP client takes no chrony options; it asks the address on port 123 (line 15)") {
		t.Errorf("problems %q", strs(res.Problems))
	}
}

// TestMachineLoadedAndBlocked: a module both loaded and blocked is an
// error at the blocked list's entry.
func TestMachineLoadedAndBlocked(t *testing.T) {
	_, err := MachineOf(withAnnotations(t, map[string]string{KernelModulesAnnotation: `["sctp"]`, BlockedKernelModulesAnnotation: `["udf", "sctp"]`}))
	want := `metadata.annotations["berth.dev/blocked-kernel-modules"][1]: "sctp" is also in berth.dev/kernel-modules: a module cannot be both loaded and blocked`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
