package nodeconfig

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testCA(t *testing.T) string {
	t.Helper()
	pem, err := os.ReadFile("testdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem)
}

// validDoc is a complete, valid NodeConfig; cases append to its spec.
func validDoc(t *testing.T, extra string) []byte {
	return []byte(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: c
    apiServerEndpoint: https://example.eks.amazonaws.com
    certificateAuthority: ` + testCA(t) + `
    cidr: 10.100.0.0/16
` + extra)
}

// TestValidateDocumentRules checks every per-document rule with its exact
// message, source and path.
func TestValidateDocumentRules(t *testing.T) {
	notPEM := base64.StdEncoding.EncodeToString([]byte("not a certificate"))
	keyPEM := base64.StdEncoding.EncodeToString([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	badCert := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	cases := []struct {
		name, cluster, extra string
		want                 []string
	}{
		{name: "valid", want: nil},
		{name: "endpoint http", cluster: "apiServerEndpoint: http://x.example.com",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "http://x.example.com": the scheme must be https`}},
		{name: "endpoint no scheme", cluster: "apiServerEndpoint: x.eks.amazonaws.com",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "x.eks.amazonaws.com": the scheme must be https`}},
		{name: "endpoint no host", cluster: "apiServerEndpoint: https:///path",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "https:///path": no host`}},
		{name: "cidr", cluster: "cidr: 10.100.0.0",
			want: []string{`error: src: spec.cluster.cidr: "10.100.0.0" is not a CIDR; want the service CIDR, for example 10.100.0.0/16 or fd00:10:96::/112`}},
		{name: "cidr host bits", cluster: "cidr: 10.100.0.10/16",
			want: []string{`warning: src: spec.cluster.cidr: "10.100.0.10/16" has host bits set; it is read as 10.100.0.0/16`}},
		{name: "ipv6 cidr ok", cluster: "cidr: fd00:10:96::/112"},
		{name: "ca not pem", cluster: "certificateAuthority: " + notPEM,
			want: []string{`error: src: spec.cluster.certificateAuthority: holds no PEM certificate; want base64 of the cluster CA's PEM, as in DescribeCluster's certificateAuthority.data`}},
		{name: "ca wrong block", cluster: "certificateAuthority: " + keyPEM,
			want: []string{`error: src: spec.cluster.certificateAuthority: PEM block 1 is a "PRIVATE KEY", want CERTIFICATE`}},
		{name: "ca bad cert", cluster: "certificateAuthority: " + badCert,
			want: []string{`error: src: spec.cluster.certificateAuthority: PEM block 1 is not a valid certificate: x509: malformed certificate`}},
		{name: "strategy", extra: "  instance:\n    localStorage:\n      strategy: RAID5\n",
			want: []string{`error: src: spec.instance.localStorage.strategy: unknown strategy "RAID5"; want one of RAID0, RAID10, Mount`}},
		{name: "strategies ok", extra: "  instance:\n    localStorage:\n      strategy: RAID10\n      mountPath: /mnt/x\n      disabledMounts: [Containerd, PodLogs]\n"},
		{name: "mountPath", extra: "  instance:\n    localStorage:\n      mountPath: mnt\n",
			want: []string{`error: src: spec.instance.localStorage.mountPath: want an absolute path, got "mnt"`}},
		{name: "endpoint port", cluster: "apiServerEndpoint: https://example.com:99999",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "https://example.com:99999": port 99999 is not 1 to 65535`}},
		{name: "endpoint empty host", cluster: "apiServerEndpoint: https://:443",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "https://:443": no host`}},
		{name: "endpoint query", cluster: "apiServerEndpoint: https://example.com/p?x=1#f",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "https://example.com/p?x=1#f": a query does not belong in it`}},
		{name: "endpoint fragment", cluster: "apiServerEndpoint: https://example.com/p#f",
			want: []string{`error: src: spec.cluster.apiServerEndpoint: want an https URL (https://HOST[:PORT][/PATH]), got "https://example.com/p#f": a fragment does not belong in it`}},
		{name: "endpoint path ok", cluster: "apiServerEndpoint: https://proxy.example.com:8443/k8s/clusters/c-1"},
		{name: "mountPath not clean", extra: "  instance:\n    localStorage:\n      mountPath: /mnt/../etc\n",
			want: []string{`error: src: spec.instance.localStorage.mountPath: "/mnt/../etc" is not a clean path; write it as "/etc"`}},
		{name: "disabledMounts", extra: "  instance:\n    localStorage:\n      disabledMounts: [PodLogs, Kubelet]\n",
			want: []string{`error: src: spec.instance.localStorage.disabledMounts[1]: unknown mount "Kubelet"; want one of Containerd, PodLogs`}},
		{name: "environment", extra: "  instance:\n    environment:\n      1X: v\n      OK_1: z\n",
			want: []string{`error: src: spec.instance.environment["1X"]: "1X" is not an environment variable name: want [A-Za-z_][A-Za-z0-9_]*`}},
		{name: "nameserver", extra: "  instance:\n    network:\n      nameservers: [10.0.0.2, ns1]\n",
			want: []string{`error: src: spec.instance.network.nameservers[1]: "ns1" is not an IP address: ParseAddr("ns1"): unable to parse IP`}},
		{name: "domain", extra: "  instance:\n    network:\n      domains: [a b]\n",
			want: []string{`error: src: spec.instance.network.domains[0]: "a b" is not a DNS name: label "a b" has ' '; only letters, digits and '-' are allowed`}},
		{name: "containerd toml", extra: "  containerd:\n    config: \"a = \"\n",
			want: []string{`error: src: spec.containerd.config: invalid TOML: toml: expected value, not end of input`}},
		{name: "containerd version", extra: "  containerd:\n    config: |\n      version = \"three\"\n",
			want: []string{`error: src: spec.containerd.config: version: want 2 or 3 (the config versions containerd reads), got "three"`}},
		{name: "containerd version 99", extra: "  containerd:\n    config: |\n      version = 99\n",
			want: []string{`error: src: spec.containerd.config: version: want 2 or 3 (the config versions containerd reads), got 99`}},
		{name: "containerd grpc address", extra: "  containerd:\n    config: |\n      version = 3\n      [grpc]\n      address = \"/tmp/c.sock\"\n",
			want: []string{`error: src: spec.containerd.config: [grpc] address: berth owns containerd's socket, /run/containerd/containerd.sock: kubelet's --container-runtime-endpoint and berth's readiness probe use it; remove the key (got "/tmp/c.sock")`}},
		{name: "containerd version 2 that cannot be converted", extra: "  containerd:\n    config: |\n      version = 2\n      [plugins.'io.containerd.grpc.v1.cri'.containerd]\n      runtimes = 5\n",
			want: []string{`error: src: spec.containerd.config: converting version 2 to version 3: "runtimes" in table plugins."io.containerd.grpc.v1.cri".containerd is not a table`}},
		{name: "containerd version 2 converted", extra: "  containerd:\n    config: |\n      version = 2\n      [plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runc]\n      sandbox_mode = 'podsandbox'\n"},
		{name: "containerd grpc address as berth's", extra: "  containerd:\n    config: |\n      version = 2\n      [grpc]\n      address = \"/run/containerd/containerd.sock\"\n      max_recv_message_size = 16777216\n"},
		{name: "maxPods syntax", extra: "  kubelet:\n    maxPodsExpression: \"max_pods +\"\n",
			want: []string{"error: src: spec.kubelet.maxPodsExpression: does not compile: compiling \"max_pods +\": column 11: Syntax error: unexpected end of expression"}},
		{name: "maxPods unknown var", extra: "  kubelet:\n    maxPodsExpression: \"enis * 2\"\n",
			want: []string{"error: src: spec.kubelet.maxPodsExpression: does not compile: compiling \"enis * 2\": column 1: undeclared reference to 'enis'"}},
		{name: "maxPods not int", extra: "  kubelet:\n    maxPodsExpression: \"max_pods > 10\"\n",
			want: []string{`error: src: spec.kubelet.maxPodsExpression: does not compile: compiling "max_pods > 10": result is bool, want int`}},
		{name: "maxPods ok", extra: "  kubelet:\n    maxPodsExpression: \"max_pods < 110 ? max_pods : 110\"\n"},
		{name: "owned flags", extra: "  kubelet:\n    flags:\n    - --v=2\n    - --config=/x\n    - --kubeconfig /y\n    - --container-runtime-endpoint\n    - unix:///z\n    - --config-dir=/d\n    - --configx=1\n",
			want: []string{
				`error: src: spec.kubelet.flags[1]: --config is set by berth and cannot be overridden; put KubeletConfiguration fields in spec.kubelet.config`,
				`error: src: spec.kubelet.flags[2]: --kubeconfig is set by berth and cannot be overridden; berth writes /var/lib/kubelet/kubeconfig from spec.cluster`,
				`error: src: spec.kubelet.flags[3]: --container-runtime-endpoint is set by berth and cannot be overridden; berth runs containerd and points kubelet at it`,
				`error: src: spec.kubelet.flags[5]: --config-dir is set by berth and cannot be overridden; put KubeletConfiguration fields in spec.kubelet.config`,
			}},
		{name: "owned flag hidden in one element", extra: "  kubelet:\n    flags:\n    - --v=2 --kubeconfig=/x\n",
			want: []string{
				`error: src: spec.kubelet.flags[0]: --kubeconfig is set by berth and cannot be overridden; berth writes /var/lib/kubelet/kubeconfig from spec.cluster`,
			}},
		{name: "cgroupDriver", extra: "  kubelet:\n    config:\n      cgroupDriver: systemd\n",
			want: []string{`error: src: spec.kubelet.config.cgroupDriver: "systemd" is not supported: berth has no systemd, kubelet uses cgroupfs`}},
		{name: "cgroupDriver cgroupfs ok", extra: "  kubelet:\n    config:\n      cgroupDriver: cgroupfs\n"},
		{name: "lifecycle annotations", extra: "metadata:\n  annotations:\n    berth.dev/on-spot-interruption: log\n" +
			"    berth.dev/on-rebalance-recommendation: shutdown\n    berth.dev/on-asg-termination: ignore\n    example.com/x: 'y'\n"},
		{name: "lifecycle annotations bad", extra: "metadata:\n  annotations:\n    berth.dev/on-spot-interruption: drain\n    berth.dev/on-rebalance: log\n",
			want: []string{
				`error: src: metadata.annotations["berth.dev/on-rebalance"]: not a berth annotation; the lifecycle ones are berth.dev/on-spot-interruption, berth.dev/on-rebalance-recommendation and berth.dev/on-asg-termination`,
				`error: src: metadata.annotations["berth.dev/on-spot-interruption"]: "drain" is not an action; want shutdown, log or ignore`,
			}},
		{name: "registry mirrors", extra: "metadata:\n  annotations:\n    berth.dev/registry-mirrors: '{\"registry.berth.test\": [\"http://10.0.2.2:5000\"], \"*\": [\"https://cache.example.com/v2\"]}'\n"},
		{name: "registry mirrors bad", extra: "metadata:\n  annotations:\n    berth.dev/registry-mirrors: '{\"docker.io\": [\"ftp://m.example.com\", 5], \"a b\": [\"http://x\"]}'\n",
			want: []string{
				`error: src: metadata.annotations["berth.dev/registry-mirrors"]["docker.io"][0]: "ftp://m.example.com" is not a mirror URL: want an http:// or https:// URL`,
				`error: src: metadata.annotations["berth.dev/registry-mirrors"]["docker.io"][1]: want a URL string, got 5`,
				`error: src: metadata.annotations["berth.dev/registry-mirrors"]["a b"]: not a registry host (host or host:port, as image references name it, or "*" for every registry): "a b" is not a DNS name: label "a b" has ' '; only letters, digits and '-' are allowed`,
			}},
		{name: "annotations not strings", extra: "metadata:\n  annotations:\n    berth.dev/on-asg-termination: [shutdown]\n",
			want: []string{`error: src: metadata.annotations["berth.dev/on-asg-termination"]: want a string (quote it in YAML), got ["shutdown"]`}},
		{name: "other annotations not strings", extra: "metadata:\n  annotations:\n    example.com/replicas: 3\n    example.com/x: y\n",
			want: []string{
				`error: src: metadata.annotations["example.com/replicas"]: want a string (quote it in YAML), got 3`,
				`error: src: metadata.annotations["example.com/x"]: want a string (quote it in YAML), got true`,
			}},
		{name: "bootstrap token malformed", extra: "metadata:\n  annotations:\n    berth.dev/bootstrap-token: ABCDEF.0123456789ABCDEF\n",
			want: []string{`error: src: metadata.annotations["berth.dev/bootstrap-token"]: not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}`}},
		{name: "bootstrap token good", extra: "metadata:\n  annotations:\n    berth.dev/bootstrap-token: abcdef.0123456789abcdef\n"},
		{name: "unknown berth annotation", extra: "metadata:\n  annotations:\n    berth.dev/sysctl: '{}'\n    example.com/sysctl: x\n",
			want: []string{`warning: src: metadata.annotations["berth.dev/sysctl"]: not a berth annotation, and berth ignores it; the known ones are ` +
				`berth.dev/blocked-kernel-modules, berth.dev/bootstrap-token, berth.dev/hostname, berth.dev/kernel-modules, berth.dev/ntp-servers, ` +
				`berth.dev/on-asg-termination, berth.dev/on-rebalance-recommendation, berth.dev/on-spot-interruption, berth.dev/registry-mirrors, berth.dev/sysctls, berth.dev/update-repository, berth.dev/update-targets-url, ` +
				`berth.dev/update-trial-ready-deadline, berth.dev/update-trial-soak`}},
		{name: "cluster domain newline", extra: "  kubelet:\n    config:\n      clusterDomain: \"cluster.local\\nnameserver 6.6.6.6\"\n",
			want: []string{`error: src: spec.kubelet.config.clusterDomain: "cluster.local\nnameserver 6.6.6.6" has a control character (U+000A) at byte 13; control characters and line breaks are not allowed`}},
		{name: "cluster domain upper case", extra: "  kubelet:\n    config:\n      clusterDomain: Cluster.Local\n",
			want: []string{`error: src: spec.kubelet.config.clusterDomain: "Cluster.Local" is not a DNS subdomain: want lower-case letters, digits, '-' and '.', each label starting and ending with a letter or digit, at most 253 characters (RFC 1123) (kubelet puts it into every pod's resolv.conf search line)`}},
		{name: "cluster domain good", extra: "  kubelet:\n    config:\n      clusterDomain: cluster.local\n"},
		{name: "control characters in encoded values", extra: "  kubelet:\n    config:\n      staticPodURLHeader: {\"X-A\\tb\": [\"v\\r\"]}\n" +
			"      allowedUnsafeSysctls: [\"net.core.somaxconn\", \"kernel.msg\\u0085\"]\n" +
			"  containerd:\n    config: \"[plugins.\\\"a\\\\u0001b\\\"]\\nx = 1\\n[plugins.c]\\nruntime_path = \\\"/usr/bin/runc\\\\nx\\\"\\n\"\n" +
			"    baseRuntimeSpec: {process: {env: [\"A=b\\nc\"]}}\n",
			want: []string{
				`error: src: spec.kubelet.config.allowedUnsafeSysctls[1]: "kernel.msg\u0085" has a control character (U+0085) at byte 10; control characters and line breaks are not allowed`,
				`error: src: spec.kubelet.config.staticPodURLHeader["X-A\tb"]: key: "<redacted>" has a control character (U+0009) at byte 3; control characters and line breaks are not allowed`,
				`error: src: spec.containerd.baseRuntimeSpec.process.env[0]: "A=b\nc" has a control character (U+000A) at byte 3; control characters and line breaks are not allowed`,
				`error: src: spec.containerd.config: key in table [plugins]: "a\x01b" has a control character (U+0001) at byte 1; control characters and line breaks are not allowed`,
				`error: src: spec.containerd.config: value of [plugins.c] runtime_path: "/usr/bin/runc\nx" has a control character (U+000A) at byte 13; control characters and line breaks are not allowed`,
			}},
		{name: "annotations not a map", extra: "metadata:\n  annotations: [a]\n",
			want: []string{`error: src: metadata.annotations: want a map of strings, as Kubernetes annotations are: json: cannot unmarshal array into Go value of type map[string]json.RawMessage`}},
		{name: "feature gate", extra: "  featureGates:\n    InstanceIdNodeName: true\n    Future: true\n",
			want: []string{`warning: src: spec.featureGates.Future: unknown feature gate; known: InstanceIdNodeName, FastImagePull, OSManagedNoManageENIs`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := validDoc(t, tc.extra)
			if tc.cluster != "" {
				key, _, _ := strings.Cut(tc.cluster, ":")
				lines := strings.Split(string(doc), "\n")
				for i, l := range lines {
					if strings.HasPrefix(strings.TrimSpace(l), key+":") {
						lines[i] = "    " + tc.cluster
					}
				}
				doc = []byte(strings.Join(lines, "\n"))
			}
			cfg, ps, err := Parse("src", doc)
			if err != nil || len(ps) != 0 {
				t.Fatalf("Parse: %v %v", err, ps)
			}
			got := strs(ValidateDocument("src", cfg))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestValidateMerged checks the required fields and cross-field rules on
// the merged config, reported under MergedSource.
func TestValidateMerged(t *testing.T) {
	got := strs(ValidateMerged(&NodeConfig{}))
	want := []string{
		"error: merged config: spec.cluster.name: required, and no config source sets it",
		"error: merged config: spec.cluster.apiServerEndpoint: required, and no config source sets it",
		"error: merged config: spec.cluster.certificateAuthority: required, and no config source sets it",
		"error: merged config: spec.cluster.cidr: required (or spec.kubelet.config.clusterDNS), and no config source sets it",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("empty config:\n got %q\nwant %q", got, want)
	}
	if got := ValidateMerged(nil); len(got) != 4 {
		t.Errorf("nil config gave %d problems, want 4", len(got))
	}

	yes := true
	cfg := &NodeConfig{Spec: NodeConfigSpec{Cluster: ClusterDetails{Name: "n", APIServerEndpoint: "https://x", CertificateAuthority: []byte("x"), CIDR: "10.0.0.0/16", EnableOutpost: &yes}}}
	got = strs(ValidateMerged(cfg))
	want = []string{"error: merged config: spec.cluster.id: required when spec.cluster.enableOutpost is true"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("outpost:\n got %q\nwant %q", got, want)
	}
	cfg.Spec.Cluster.ID = "id"
	if got := ValidateMerged(cfg); len(got) != 0 {
		t.Errorf("complete outpost config: %v", got)
	}

	// A service CIDR too small for the .10 clusterDNS derived from it is
	// refused, unless the config sets clusterDNS itself.
	for cidr, ok := range map[string]bool{"10.100.0.0/32": false, "10.100.0.0/29": false, "10.100.0.0/28": true, "fd00::/127": false, "fd00::/124": true} {
		cfg.Spec.Cluster.CIDR = cidr
		got := strs(ValidateMerged(cfg))
		if ok != (len(got) == 0) || !ok && !strings.Contains(got[0], "cannot hold the cluster DNS address") {
			t.Errorf("cidr %s: %q", cidr, got)
		}
	}
	cfg.Spec.Cluster.CIDR = "10.100.0.0/32"
	cfg.Spec.Kubelet.Config = map[string]json.RawMessage{"clusterDNS": json.RawMessage(`["10.0.0.10"]`)}
	if got := ValidateMerged(cfg); len(got) != 0 {
		t.Errorf("/32 with clusterDNS set: %v", got)
	}
}

// TestValidateNamesEachSource checks that a problem in the second document
// is reported under that document's source, not the first's.
func TestValidateNamesEachSource(t *testing.T) {
	a, _, _ := Parse("a.yaml", validDoc(t, ""))
	b, _, _ := Parse("user-data part 2 (application/node.eks.aws)", []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    cidr: nope\n"))
	merged, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	got := strs(Validate([]Document{{"a.yaml", a}, {"user-data part 2 (application/node.eks.aws)", b}}, merged))
	want := []string{`error: user-data part 2 (application/node.eks.aws): spec.cluster.cidr: "nope" is not a CIDR; want the service CIDR, for example 10.100.0.0/16 or fd00:10:96::/112`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestProblemFormat(t *testing.T) {
	p := Problem{Severity: SeverityError, Source: "f.yaml", Path: "spec.cluster.cidr", Message: "bad"}
	if got, want := p.Error(), "f.yaml: spec.cluster.cidr: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := p.String(), "error: f.yaml: spec.cluster.cidr: bad"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	p.Line = 7
	if got, want := p.Error(), "f.yaml: line 7: spec.cluster.cidr: bad"; got != want {
		t.Errorf("Error() with a line = %q, want %q", got, want)
	}
	p.Path = ""
	if got, want := p.Error(), "f.yaml: line 7: bad"; got != want {
		t.Errorf("Error() with a line, without path = %q, want %q", got, want)
	}
	p.Line = 0
	if got, want := p.Error(), "f.yaml: bad"; got != want {
		t.Errorf("Error() without path = %q, want %q", got, want)
	}
	err := Errors([]Problem{p, {Severity: SeverityWarning, Source: "w", Message: "m"}})
	if err == nil || err.Error() != "invalid NodeConfig (1 errors):\n  f.yaml: bad" {
		t.Errorf("Errors() = %v", err)
	}
	if Errors([]Problem{{Severity: SeverityWarning}}) != nil {
		t.Error("Errors() of warnings only is not nil")
	}
}

func strs(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// Every berth-owned flag is refused in every spelling kubelet reads as
// that flag: --flag=value, --flag value in one element or two, quoted,
// backslash-escaped, with '_' for '-'; and the error names the element and
// the flag as kubelet reads it. Lookalikes pass.
func TestOwnedFlagsInEverySpelling(t *testing.T) {
	spellings := func(f string) [][]string {
		name := strings.TrimPrefix(f, "--")
		return [][]string{
			{f + "=/x"},
			{f + " /x"},
			{f, "/x"},
			{`"` + f + `=/x"`},
			{`'` + f + `'=/x`},
			{"--" + name[:2] + `\` + name[2:] + "=/x"},
			{"--v=2 " + f + "=/x"},
			{"--" + strings.ReplaceAll(name, "-", "_") + "=/x"},
		}
	}
	for _, f := range OwnedKubeletFlags() {
		for _, flags := range spellings(f) {
			cfg := &NodeConfig{}
			cfg.Spec.Kubelet.Flags = flags
			ps := ValidateDocument("src", cfg)
			var hit bool
			for _, p := range ps {
				if p.Severity == SeverityError && strings.HasPrefix(p.Path, "spec.kubelet.flags[") && strings.HasPrefix(p.Message, f) &&
					strings.Contains(p.Message, "is set by berth") {
					hit = true
				}
			}
			if !hit {
				t.Errorf("flags %q: %s not refused: %+v", flags, f, ps)
			}
		}
	}
	// Lookalikes are not berth's (a single dash is kubelet's shorthand
	// syntax, which kubelet itself refuses for a long name).
	for _, ok := range [][]string{{"--configx=1"}, {"--v=2"}, {"--node-labels=kubeconfig=x"}, {"-kubeconfig=/x"}, {"--kubeconfig-x=1"}} {
		cfg := &NodeConfig{}
		cfg.Spec.Kubelet.Flags = ok
		for _, p := range ValidateDocument("src", cfg) {
			if strings.Contains(p.Message, "is set by berth") {
				t.Errorf("flags %q refused as berth's: %+v", ok, p)
			}
		}
	}
}

// No problem quotes a secret, whatever its YAML type: a URL's password in
// a value the problem quotes, an unquoted bootstrap token (a YAML number,
// its digits the secret). Problems reach check, render, the console and
// the boot report.
func TestProblemsHideSecrets(t *testing.T) {
	doc := `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  annotations:
    berth.dev/bootstrap-token: 123456.1234567890123456
    berth.dev/registry-mirrors: '{"docker.io": ["https://user:hunter2@mirror.example.com"]}'
spec:
  cluster:
    apiServerEndpoint: https://u:pw3@example.com/x?y#z
`
	path := filepath.Join(t.TempDir(), "ud.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ps, ok := Check(false, path)
	if ok || len(ps) < 2 {
		t.Fatalf("Check = %v, %+v; want the bad token and mirror refused", ok, ps)
	}
	for _, p := range ps {
		for _, secret := range []string{"hunter2", "pw3", "123456789", "1234567890123456"} {
			if strings.Contains(p.String(), secret) {
				t.Errorf("problem shows %q: %s", secret, p)
			}
		}
	}
}
