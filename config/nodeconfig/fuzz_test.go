package nodeconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/internal/syntax"
)

// FuzzParse feeds arbitrary YAML/JSON to Parse and validation: no panic,
// and a parsed config re-encodes to a document that parses to the same
// config without new problems.
func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [--v=2]\n"))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, ps, err := Parse("fuzz", data)
		checkCapped(t, ps)
		if err != nil {
			if cfg != nil {
				t.Error("config returned with an error")
			}
			return
		}
		checkCapped(t, ValidateDocument("fuzz", cfg))
		checkCapped(t, ValidateMerged(cfg))
		first, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, ps2, err := Parse("fuzz", first)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", first, err)
		}
		for _, p := range ps2 {
			if p.Severity == SeverityError && !HasErrors(ps) {
				t.Errorf("re-parse found %v in %s", p, first)
			}
		}
		second, _ := json.Marshal(again)
		if !bytes.Equal(first, second) {
			t.Errorf("round trip changed the config:\n%s\n%s", first, second)
		}
		if _, err := Merge(cfg, again); err != nil && cfg.Spec.Containerd.Config != "" {
			var m map[string]any
			if toml.Unmarshal([]byte(cfg.Spec.Containerd.Config), &m) == nil {
				t.Errorf("merge of valid TOML failed: %v", err)
			}
		}
	})
}

// FuzzMergeTOML: MergeTOML never panics; its output is TOML, and merging
// the same overlay again changes nothing.
func FuzzMergeTOML(f *testing.F) {
	f.Add("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"overlayfs\"\n", "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"soci\"\n")
	f.Fuzz(func(t *testing.T, base, overlay string) {
		out, err := MergeTOML(base, overlay)
		if err != nil {
			return
		}
		var m map[string]any
		if err := toml.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("output is not TOML: %v\n%s", err, out)
		}
		again, err := MergeTOML(out, overlay)
		if err != nil {
			t.Fatalf("re-merge: %v", err)
		}
		if again != out {
			t.Errorf("merging the overlay twice changed the output:\n%s\n---\n%s", out, again)
		}
	})
}

// checkCapped asserts the bounds on a problem list: at most MaxProblems
// and one omitted-problems line, each of bounded size.
func checkCapped(t *testing.T, ps []Problem) {
	t.Helper()
	if len(ps) > MaxProblems+1 {
		t.Errorf("%d problems, over MaxProblems", len(ps))
	}
	for i, p := range ps {
		if p.Omitted.Total() > 0 && i != len(ps)-1 {
			t.Errorf("omitted-problems line at %d of %d", i, len(ps))
		}
		if len(p.Message) > maxMessage || len(p.Path) > maxPath || len(p.Source) > maxSource {
			t.Errorf("problem of %d bytes", len(p.Message)+len(p.Path)+len(p.Source))
		}
	}
}

// FuzzLoadAL2: a user-data script that runs bootstrap.sh, through Load:
// no panic, problems capped, the lines not run capped and clipped, and a
// script read without error is used under its part's name.
func FuzzLoadAL2(f *testing.F) {
	f.Add("set -ex\nCA=Zm9v\n/etc/eks/bootstrap.sh c --b64-cluster-ca $CA --dns-cluster-ip 10.100.0.10 --kubelet-extra-args '--node-labels=a=b'\n")
	f.Add("export SERVICE_IPV4_CIDR=172.20.0.0/16\nIP_FAMILY=IPv6 exec /etc/eks/bootstrap.sh c --use-max-pods false --local-disks raid0\n")
	f.Add("exec > >(tee /var/log/x|logger) 2>&1\n/etc/eks/bootstrap.sh 'c' --apiserver-endpoint 'https://x' \\\n --service-ipv6-cidr fd00::/108\nyum -y install x\n")
	f.Fuzz(func(t *testing.T, body string) {
		data := []byte("#!/bin/bash\n" + body)
		res, _ := Load(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), []Source{{Name: UserDataSource, Data: data}})
		checkCapped(t, res.Problems)
		if len(res.NotRun) > MaxNotRun {
			t.Fatalf("%d lines not run, over MaxNotRun", len(res.NotRun))
		}
		for _, l := range res.NotRun {
			if len(l.Text) > 200+len("…") || strings.ContainsFunc(l.Text, unicode.IsControl) {
				t.Fatalf("not-run line %q: want clipped, no control characters", l.Text)
			}
		}
		for _, u := range res.Used {
			if !strings.HasPrefix(u, "user-data, bootstrap.sh on line ") {
				t.Fatalf("used %q", u)
			}
		}
	})
}

// FuzzLoadBottlerocket: Bottlerocket settings TOML through Load: no
// panic, problems capped, and every problem of a settings document named
// by its source.
func FuzzLoadBottlerocket(f *testing.F) {
	f.Add("[settings.kubernetes]\ncluster-name = 'c'\napi-server = 'https://x'\ncluster-dns-ip = ['10.100.0.10']\nmax-pods = 29\n[settings.kubernetes.node-taints]\nk = ['v:NoSchedule']\n")
	f.Add("[settings.container-registry]\nmirrors = [{registry = 'docker.io', endpoint = ['https://m']}]\n[settings.host-containers.admin]\nenabled = true\n")
	f.Add("[settings.kernel.sysctl]\n'vm.x' = '1'\n'vm/y' = '2'\n[settings.kernel.modules.sctp]\nautoload = true\n[settings.network]\nhostname = 'n-1'\n[settings.ntp]\ntime-servers = ['a.example.com', '10.0.0.1']\n")
	f.Add("[settings.updates]\nmetadata-base-url = 'https://u.example.com/berth'\ntargets-base-url = 'http://10.0.0.1:8080/t'\nseed = 7\n")
	f.Fuzz(func(t *testing.T, doc string) {
		res, _ := Load(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), []Source{{Name: UserDataSource, Data: []byte(doc)}})
		checkCapped(t, res.Problems)
		if slices.Contains(res.Used, "user-data (Bottlerocket settings)") {
			for _, p := range res.Problems {
				if p.Source != "user-data (Bottlerocket settings)" && p.Source != MergedSource && p.Source != SeveralSources {
					t.Fatalf("problem %s: not named by its source", p)
				}
				// What config/bottlerocket accepts passes the
				// annotations' own checks: its problems are at
				// settings paths, where the user wrote them.
				if strings.HasPrefix(p.Path, "metadata.annotations") {
					t.Fatalf("problem %s: a setting berth took became a bad annotation", p)
				}
			}
		}
	})
}

// FuzzUpdateSettingsOf: the update annotations' parsers never panic, and
// what they accept is what the node can use as it is: http(s) base URLs
// without credentials, query or line breaks, and trial timings within
// update/trial's bounds.
func FuzzUpdateSettingsOf(f *testing.F) {
	f.Add("https://updates.example.com/berth", "http://10.0.0.1:8080/targets", "3m", "10m")
	f.Add("https://u:p@x", "x", "-1s", "1e3s")
	f.Fuzz(func(t *testing.T, repo, targets, soak, deadline string) {
		b, err := json.Marshal(map[string]string{UpdateRepositoryAnnotation: repo, UpdateTargetsURLAnnotation: targets,
			UpdateTrialSoakAnnotation: soak, UpdateTrialReadyDeadlineAnnotation: deadline})
		if err != nil {
			return
		}
		cfg := &NodeConfig{APIVersion: APIVersion, Kind: Kind, Metadata: map[string]json.RawMessage{"annotations": b}}
		u, _ := UpdateSettingsOf(cfg)
		for _, s := range []string{u.Repository, u.TargetsURL} {
			if s == "" {
				continue
			}
			p, err := url.Parse(s)
			if syntax.HTTPURL(s) != nil || strings.ContainsAny(s, "\n\r\t ?#") || err != nil ||
				(p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
				t.Fatalf("accepted URL %q", s)
			}
		}
		if u.Soak != 0 && (u.Soak < MinTrialSoak || u.Soak > MaxTrialSoak) ||
			u.ReadyDeadline != 0 && (u.ReadyDeadline < MinTrialReadyDeadline || u.ReadyDeadline > MaxTrialReadyDeadline) {
			t.Fatalf("accepted timings out of bounds %+v", u)
		}
		if u.Soak < 0 || u.ReadyDeadline < 0 {
			t.Fatalf("accepted negative timings %+v", u)
		}
	})
}

// FuzzMachineOf: the machine annotations' parsers never panic, and what
// they accept is what the apply phase can use as it is: sysctl names that
// stay under /proc/sys, values without line breaks, module names, a
// hostname and NTP servers that pass their checks.
func FuzzMachineOf(f *testing.F) {
	f.Add(`{"vm.max_map_count": "262144", "net/ipv4/ip_forward": "1"}`, `["ip_vs_lc"]`, "node-1", `["169.254.169.123", "time.example.com"]`)
	f.Add(`{"a": "1", "a": "2"}`, `["x", "x"]`, "a_b", `["h:1"]`)
	f.Fuzz(func(t *testing.T, sysctls, modules, hostname, servers string) {
		b, err := json.Marshal(map[string]string{SysctlsAnnotation: sysctls, KernelModulesAnnotation: modules, HostnameAnnotation: hostname, NTPServersAnnotation: servers})
		if err != nil {
			return
		}
		cfg := &NodeConfig{APIVersion: APIVersion, Kind: Kind, Metadata: map[string]json.RawMessage{"annotations": b}}
		m, _ := MachineOf(cfg)
		for _, s := range m.Sysctls {
			if syntax.SysctlKey(s.Key) != nil || strings.Contains(s.Key, "/") || strings.Contains(s.Key, "..") || s.Value == "" || syntax.NoControl(s.Value) != nil {
				t.Fatalf("accepted sysctl %q = %q", s.Key, s.Value)
			}
		}
		for _, n := range m.KernelModules {
			if syntax.ModuleName(n) != nil {
				t.Fatalf("accepted module %q", n)
			}
		}
		if m.Hostname != "" && syntax.Hostname(m.Hostname) != nil {
			t.Fatalf("accepted hostname %q", m.Hostname)
		}
		for _, s := range m.NTPServers {
			if syntax.TimeServer(s) != nil {
				t.Fatalf("accepted NTP server %q", s)
			}
		}
		if len(m.Sysctls) > MaxSysctls || len(m.KernelModules) > MaxKernelModules || len(m.NTPServers) > MaxNTPServers {
			t.Fatalf("over a bound: %d sysctls, %d modules, %d servers", len(m.Sysctls), len(m.KernelModules), len(m.NTPServers))
		}
	})
}

// FuzzLoadEksctl: eksctl's AL2 cloud-config through Load: no panic,
// problems capped, the lines not run capped, and a cloud-config read
// without error used under its part's name.
func FuzzLoadEksctl(f *testing.F) {
	if b, err := os.ReadFile("../al2/testdata/golden/eksctl.cloud-config"); err == nil {
		f.Add(strings.TrimPrefix(string(b), "#cloud-config\n"))
	}
	f.Add("runcmd: [[/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh]]\nwrite_files:\n- {path: /etc/eksctl/kubelet.env, content: \"CLUSTER_NAME=c\\nCLUSTER_DNS=10.100.0.10\"}\n- {path: /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh, content: '/etc/eks/bootstrap.sh \"${CLUSTER_NAME}\"'}\n")
	f.Fuzz(func(t *testing.T, body string) {
		data := []byte("#cloud-config\n" + body)
		res, _ := Load(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), []Source{{Name: UserDataSource, Data: data}})
		checkCapped(t, res.Problems)
		if len(res.NotRun) > MaxNotRun {
			t.Fatalf("%d lines not run, over MaxNotRun", len(res.NotRun))
		}
		for _, u := range res.Used {
			if u != "user-data (eksctl's AL2 cloud-config)" {
				t.Fatalf("used %q", u)
			}
		}
	})
}
