package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/runtime/containerd"
	"github.com/berth-node/berth/runtime/kubelet"
)

// TestBuildRejectsInjection: a value from user data or instance metadata
// that would add a line to a file or a word to a command line makes Build
// fail, with the field path and the value in the error.
func TestBuildRejectsInjection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Inputs)
		want   []string
	}{
		{"nameserver zone with a newline", func(in *Inputs) {
			in.Config.Spec.Instance.Network.Nameservers = []string{"fe80::1%x\nnameserver 6.6.6.6"}
		}, []string{`spec.instance.network.nameservers[0]: "fe80::1%x\nnameserver 6.6.6.6"`}},
		{"nameserver zone on a global address", func(in *Inputs) {
			in.Config.Spec.Instance.Network.Nameservers = []string{"10.0.0.2", "fd00::53%eth0"}
		}, []string{"spec.instance.network.nameservers[1]", "only allowed on a link-local address"}},
		{"search domain with a newline", func(in *Inputs) {
			in.Config.Spec.Instance.Network.Domains = []string{"corp.example", "a.example\nnameserver 6.6.6.6"}
		}, []string{`spec.instance.network.domains[1]: "a.example\nnameserver 6.6.6.6" is not a DNS name`}},
		{"search domain with a space", func(in *Inputs) {
			in.Config.Spec.Instance.Network.Domains = []string{"ex ample.com"}
		}, []string{`spec.instance.network.domains[0]: "ex ample.com"`}},
		{"local-hostname with a newline", func(in *Inputs) {
			in.Instance.LocalHostname = "ip-10-0-12-34.ec2.internal\n--kubeconfig=/tmp/x"
		}, []string{`instance metadata local-hostname: "ip-10-0-12-34.ec2.internal\n--kubeconfig=/tmp/x" is not a node name`}},
		{"instance id", func(in *Inputs) { in.Instance.InstanceID = "i-1\nx" }, []string{`instance metadata instance-id: "i-1\nx"`}},
		{"availability zone", func(in *Inputs) { in.Instance.AvailabilityZone = "us-west-2a/../x" }, []string{"instance metadata placement/availability-zone"}},
		{"region", func(in *Inputs) { in.Instance.Region = "us-west-2 --profile x" }, []string{"instance metadata placement/region"}},
		{"instance type", func(in *Inputs) { in.Instance.InstanceType = "m5.large\nwarning" }, []string{"instance metadata instance-type"}},
		{"local-ipv4", func(in *Inputs) { in.Instance.LocalIPv4 = "10.0.12.34\n--v=9" }, []string{"instance metadata local-ipv4"}},
		{"ipv6 with a zone", func(in *Inputs) {
			in.Config.Spec.Cluster.CIDR = "fd00::/108"
			in.Instance.IPv6s = []string{"fe80::1%eth0"}
		}, []string{"instance metadata ipv6s[0]", "not allowed here"}},
		{"host node IP", func(in *Inputs) { in.Host.NodeIP = "10.0.2.15 " }, []string{"host facts: node IP"}},
		{"kubelet flag with a newline", func(in *Inputs) {
			in.Config.Spec.Kubelet.Flags = []string{"--v=2", "--max-pods=20\n--kubeconfig=/tmp/x"}
		}, []string{`spec.kubelet.flags[1]: "--max-pods=20\n--kubeconfig=/tmp/x" has a control character`}},
		{"bad --node-labels", func(in *Inputs) {
			in.Config.Spec.Kubelet.Flags = []string{`--node-labels="role=worker,bad key=x"`}
		}, []string{"spec.kubelet.flags[0]: --node-labels", `"bad key" is not a label key`}},
		{"bad --register-with-taints", func(in *Inputs) {
			in.Config.Spec.Kubelet.Flags = []string{"--register-with-taints", "gpu=true:Never"}
		}, []string{"spec.kubelet.flags[1]: --register-with-taints", `effect "Never"`}},
		{"environment name", func(in *Inputs) {
			in.Config.Spec.Instance.Environment = map[string]string{"A=B": "x"}
		}, []string{`spec.instance.environment["A=B"]`, "not an environment variable name"}},
		{"environment value", func(in *Inputs) {
			in.Config.Spec.Instance.Environment = map[string]string{"HTTPS_PROXY": "http://p:3128\nLD_PRELOAD=/tmp/x.so"}
		}, []string{`spec.instance.environment.HTTPS_PROXY: "http://p:3128\nLD_PRELOAD=/tmp/x.so" has a control character`}},
		{"cluster name", func(in *Inputs) { in.Config.Spec.Cluster.Name = "c\n--region=x" }, []string{"spec.cluster.name"}},
		{"mount path", func(in *Inputs) {
			in.Config.Spec.Instance.LocalStorage = nodeconfig.LocalStorageOptions{Strategy: nodeconfig.LocalStorageRAID0, MountPath: "/mnt/x\ny"}
		}, []string{"spec.instance.localStorage.mountPath"}},
		{"containerd key with a newline", func(in *Inputs) {
			in.Config.Spec.Containerd.Config = "[plugins.\"x\\n[evil]\"]\nk = 1\n"
		}, []string{`spec.containerd.config: key in table [plugins]`, "control character"}},
		{"containerd value with a newline", func(in *Inputs) {
			in.Config.Spec.Containerd.Config = "[plugins.x]\nk = \"v\\n[evil]\"\n"
		}, []string{`spec.containerd.config: value of [plugins.x] k`, "control character"}},
		{"kubelet clusterDomain with a newline", func(in *Inputs) {
			in.Config.Spec.Kubelet.Config = nodeconfig.InlineDocument{"clusterDomain": json.RawMessage(`"cluster.local\nnameserver 6.6.6.6"`)}
		}, []string{`spec.kubelet.config.clusterDomain: "cluster.local\nnameserver 6.6.6.6" has a control character`}},
		{"base runtime spec string with a newline", func(in *Inputs) {
			in.Config.Spec.Containerd.BaseRuntimeSpec = nodeconfig.InlineDocument{"hostname": json.RawMessage(`"a\u2028b"`)}
		}, []string{`spec.containerd.baseRuntimeSpec.hostname`, "control character"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := caseByName(t, "eksctl").inputs(t)
			tc.change(&in)
			p, err := Build(in)
			if err == nil {
				t.Fatalf("built; kubelet argv %q", p.Services[1].Argv)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestBuildReportsEveryProblem: one boot shows all the bad fields, not one
// per attempt.
func TestBuildReportsEveryProblem(t *testing.T) {
	in := caseByName(t, "eksctl").inputs(t)
	in.Config.Spec.Instance.Network.Domains = []string{"-a"}
	in.Config.Spec.Kubelet.Flags = []string{"--x=\n"}
	in.Instance.LocalHostname = "a_b"
	_, err := Build(in)
	for _, w := range []string{"spec.instance.network.domains[0]", "spec.kubelet.flags[0]", "instance metadata local-hostname"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err %v, want it to contain %q", err, w)
		}
	}
}

// TestBuildChecksOnlyWhatItUses: a bad local-hostname does not matter when
// the instance ID names the node.
func TestBuildChecksOnlyWhatItUses(t *testing.T) {
	in := caseByName(t, "instance-id-node-name").inputs(t)
	in.Instance.LocalHostname = "a_b"
	if _, err := Build(in); err != nil {
		t.Fatal(err)
	}
}

// TestHostDNSFromDHCPIsFiltered: what the network phase hands over is
// checked again; a bad entry is left out with a warning, never written.
func TestHostDNSFromDHCPIsFiltered(t *testing.T) {
	in := caseByName(t, "eksctl").inputs(t)
	in.Config.Spec.Instance.Network.Domains = nil
	in.Config.Spec.Instance.Network.Nameservers = []string{"10.0.0.53"}
	in.Host.SearchDomains = []string{"good.example", "evil.example\nnameserver 6.6.6.6", "a b"}
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Written by berth from spec.instance.network.\nnameserver 10.0.0.53\nsearch good.example\n"
	if got := string(fileData(p, ResolvConfPath)); got != want {
		t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, want)
	}
	w := strings.Join(p.Warnings, "|")
	if !strings.Contains(w, `host search domain left out of /etc/resolv.conf: "evil.example\nnameserver 6.6.6.6"`) || !strings.Contains(w, `"a b"`) {
		t.Errorf("warnings %q", p.Warnings)
	}

	in.Config.Spec.Instance.Network.Nameservers = nil
	in.Config.Spec.Instance.Network.Domains = []string{"corp.example"}
	in.Host.Nameservers = []string{"fe80::1%x\nnameserver 6.6.6.6", "fe80::1%eth0", "10.0.0.2"}
	if p, err = Build(in); err != nil {
		t.Fatal(err)
	}
	want = "# Written by berth from spec.instance.network.\nnameserver fe80::1%eth0\nnameserver 10.0.0.2\nsearch corp.example\n"
	if got := string(fileData(p, ResolvConfPath)); got != want {
		t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, want)
	}
}

// TestContainerdKeysStayInTheirTable: a user table name with ']' is legal
// TOML and passes, quoted, as the one table it names.
func TestContainerdKeysStayInTheirTable(t *testing.T) {
	in := caseByName(t, "eksctl").inputs(t)
	in.Config.Spec.Containerd.Config = "[plugins.\"x]\\n[evil]\"]\nk = 1\n"
	if _, err := Build(in); err == nil {
		t.Fatal("a key with a newline escape was accepted")
	}
	in.Config.Spec.Containerd.Config = "[plugins.\"x][evil\"]\nk = \"v]\\\"\\n[evil2]\"\n"
	if _, err := Build(in); err == nil {
		t.Fatal("a value with a newline escape was accepted")
	}
	in.Config.Spec.Containerd.Config = "[plugins.\"x][evil\"]\nk = \"v]\\\" [evil2]\"\n"
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	toml := string(fileData(p, containerd.ConfigPath))
	for _, line := range strings.Split(toml, "\n") {
		if strings.HasPrefix(line, "[evil") {
			t.Errorf("config.toml gained a table: %q\n%s", line, toml)
		}
	}
	if !strings.Contains(toml, `[plugins.'x][evil']`) {
		t.Errorf("the user's table is not there, quoted:\n%s", toml)
	}
}

// TestKubeletConfigStringsAreEncoded: the drop-in is JSON, whose encoder
// escapes what a value built to look like a new key holds; control
// characters, which kubelet would read back and write on (clusterDomain
// into pods' resolv.conf), are refused before (TestBuildRejectsInjection).
func TestKubeletConfigStringsAreEncoded(t *testing.T) {
	in := caseByName(t, "eksctl").inputs(t)
	evil := "x\", \"authentication\": {\"anonymous\": {\"enabled\": true}}, \"y\": \"\\"
	raw, err := json.Marshal(evil)
	if err != nil {
		t.Fatal(err)
	}
	in.Config.Spec.Kubelet.Config = nodeconfig.InlineDocument{"staticPodURL": raw}
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	data := fileData(p, kubelet.DropInPath)
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["staticPodURL"] != evil {
		t.Errorf("drop-in says %v:\n%s", got, data)
	}
	if strings.ContainsFunc(string(data), func(r rune) bool { return r != '\n' && isControlRune(r) }) {
		t.Errorf("drop-in holds a raw control character:\n%q", data)
	}
}

// TestWarningsAreOneLine: warnings quote inputs (here a CEL error quoting
// the expression) and go one a line into plan.txt.
func TestWarningsAreOneLine(t *testing.T) {
	in := caseByName(t, "eksctl").inputs(t)
	in.Config.Spec.Kubelet.MaxPodsExpression = "max_pods +\n\n nope("
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) == 0 {
		t.Fatal("no warning for a broken expression")
	}
	for _, w := range p.Warnings {
		if err := syntax.NoControl(w); err != nil {
			t.Errorf("warning: %v", err)
		}
	}
}

// FuzzBuildInjection feeds arbitrary strings into the fields Build
// checks. Whatever it accepts, no argv word or environment entry holds a
// control character, resolv.conf holds only its own kinds of line, one per
// accepted entry, and the one-line facts of plan.txt stay one line.
func FuzzBuildInjection(f *testing.F) {
	f.Add("ip-10-0-12-34.us-west-2.compute.internal", "--v=2", "10.0.0.53", "corp.example", "http://p:3128", "10.0.0.2", "ec2.internal", "us-west-2a")
	f.Add("a\nb", "--node-labels=a=b\nc", "fe80::1%x\nnameserver 6.6.6.6", "a.example\nnameserver 6.6.6.6", "x\ny", "fe80::1%eth0", "x y", "us\n")
	f.Add("Node-1", `--node-labels="a=b, c=d"`, "fe80::1%eth0", "b.example.", "", "::1", "a\rb", "z")
	base := caseByName(f, "eksctl").inputs(f)
	f.Fuzz(func(t *testing.T, hostname, flag, ns, domain, envVal, hostNS, hostSearch, az string) {
		in := base
		cfg := *base.Config
		in.Config = &cfg
		md := *base.Instance
		in.Instance = &md
		md.LocalHostname, md.AvailabilityZone = hostname, az
		cfg.Spec.Kubelet.Flags = []string{flag}
		cfg.Spec.Instance.Environment = map[string]string{"HTTPS_PROXY": envVal}
		cfg.Spec.Instance.Network = nodeconfig.NetworkOptions{}
		if ns != "" {
			cfg.Spec.Instance.Network.Nameservers = []string{ns}
		}
		if domain != "" {
			cfg.Spec.Instance.Network.Domains = []string{domain}
		}
		in.Host.Nameservers, in.Host.SearchDomains = []string{hostNS}, []string{hostSearch}
		p, err := Build(in)
		if err != nil {
			return
		}
		for _, s := range p.Services {
			for _, w := range append(append([]string(nil), s.Argv...), s.Env...) {
				if strings.ContainsFunc(w, isControlRune) {
					t.Fatalf("service %s: word %q", s.Name, w)
				}
			}
		}
		for _, v := range []string{p.NodeName, p.NodeIP, p.ProviderID, p.ClusterDNS} {
			if strings.ContainsFunc(v, isControlRune) {
				t.Fatalf("plan fact %q", v)
			}
		}
		for _, w := range p.Warnings {
			if strings.ContainsAny(w, "\n\r") {
				t.Fatalf("warning %q", w)
			}
		}
		rc := fileData(p, ResolvConfPath)
		if rc == nil {
			return
		}
		lines := strings.Split(strings.TrimSuffix(string(rc), "\n"), "\n")
		entries := 0
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "# "):
			case strings.HasPrefix(l, "nameserver "):
				if strings.Count(l, " ") != 1 || syntax.IP(strings.TrimPrefix(l, "nameserver "), true) != nil {
					t.Fatalf("resolv.conf line %q", l)
				}
				entries++
			case strings.HasPrefix(l, "search "):
				for _, d := range strings.Fields(strings.TrimPrefix(l, "search ")) {
					if syntax.DNSName(d) != nil {
						t.Fatalf("resolv.conf search entry %q", d)
					}
				}
				entries++
			default:
				t.Fatalf("resolv.conf line %q:\n%s", l, rc)
			}
		}
		// At most one nameserver from the NodeConfig or the host, and one
		// search line: nothing else can have made a line.
		if entries > 2 {
			t.Fatalf("resolv.conf has %d entries:\n%s", entries, rc)
		}
	})
}

func isControlRune(r rune) bool { return syntax.NoControl(string(r)) != nil }
