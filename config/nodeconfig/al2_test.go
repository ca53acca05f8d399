package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/al2"
	"github.com/berth-node/berth/config/fate"
)

const al2CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func al2Opts(t *testing.T, args ...string) al2.Options {
	t.Helper()
	o, err := al2.ReadOptions(append([]string{"my-cluster"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestFromAL2EveryOption: each option of al2.Table either lands in the
// NodeConfig field its row names, or is a warning or an error that names
// it, as its Fate says.
func TestFromAL2EveryOption(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(al2CA))
	base := []string{"--apiserver-endpoint", "https://x.eks.amazonaws.com", "--b64-cluster-ca", b64, "--dns-cluster-ip", "10.100.0.10"}
	cfg, ps := FromAL2("s", al2Opts(t, base...))
	if len(ps) != 0 {
		t.Fatalf("the common options: %v", ps)
	}
	c := cfg.Spec.Cluster
	if c.Name != "my-cluster" || c.APIServerEndpoint != "https://x.eks.amazonaws.com" || string(c.CertificateAuthority) != al2CA || c.CIDR != "" ||
		string(cfg.Spec.Kubelet.Config["clusterDNS"]) != `["10.100.0.10"]` {
		t.Errorf("common options gave %+v, kubelet config %s", c, cfg.Spec.Kubelet.Config)
	}

	for _, tc := range []struct {
		args  []string
		check func(*NodeConfig) bool
		fate  fate.Fate
	}{
		{[]string{"--aws-api-retry-attempts", "5"}, nil, fate.Ignored},
		{[]string{"--cluster-id", "abc"}, func(c *NodeConfig) bool { return c.Spec.Cluster.ID == "abc" }, fate.Honoured},
		{[]string{"--container-runtime", "containerd"}, nil, fate.Honoured},
		{[]string{"--container-runtime", "dockerd"}, nil, fate.Refused},
		{[]string{"--containerd-config-file", "/etc/x.toml"}, nil, fate.Refused},
		{[]string{"--docker-config-json", "{}"}, nil, fate.Ignored},
		{[]string{"--enable-docker-bridge", "true"}, nil, fate.Ignored},
		{[]string{"--enable-local-outpost", "false"}, nil, fate.Honoured},
		{[]string{"--enable-local-outpost", "true"}, nil, fate.Refused},
		{[]string{"--ip-family", "IPv4"}, nil, fate.Honoured},
		{[]string{"--ip-family", "ipv5"}, nil, fate.Refused},
		{[]string{"--kubelet-extra-args", `--node-labels="a=b,c=d" --max-pods=110`}, func(c *NodeConfig) bool {
			return slices.Equal(c.Spec.Kubelet.Flags, []string{`--node-labels="a=b,c=d" --max-pods=110`})
		}, fate.Honoured},
		{[]string{"--local-disks", "raid0"}, func(c *NodeConfig) bool { return c.Spec.Instance.LocalStorage.Strategy == LocalStorageRAID0 }, fate.Honoured},
		{[]string{"--local-disks", "mount"}, func(c *NodeConfig) bool { return c.Spec.Instance.LocalStorage.Strategy == LocalStorageMount }, fate.Honoured},
		{[]string{"--local-disks", "raid5"}, nil, fate.Refused},
		{[]string{"--mount-bpf-fs", "true"}, nil, fate.Honoured},
		{[]string{"--mount-bpf-fs", "false"}, nil, fate.Refused},
		{[]string{"--pause-container-account", "602401143452"}, nil, fate.Ignored},
		{[]string{"--pause-container-version", "3.5"}, nil, fate.Ignored},
		{[]string{"--use-max-pods", "false"}, func(c *NodeConfig) bool { return string(c.Spec.Kubelet.Config["maxPods"]) == "110" }, fate.Honoured},
		{[]string{"--use-max-pods", "maybe"}, nil, fate.Refused},
	} {
		cfg, ps := FromAL2("s", al2Opts(t, append(slices.Clone(base), tc.args...)...))
		name := tc.args[0]
		switch tc.fate {
		case fate.Honoured:
			if len(ps) != 0 {
				t.Errorf("%v: %v", tc.args, ps)
			}
		case fate.Ignored:
			if len(ps) != 1 || ps[0].Severity != SeverityWarning || ps[0].Path != "bootstrap.sh "+name || !strings.Contains(ps[0].Message, "ignored") {
				t.Errorf("%v: want one warning naming %s, got %v", tc.args, name, ps)
			}
		case fate.Refused:
			if len(ps) != 1 || ps[0].Severity != SeverityError || ps[0].Path != "bootstrap.sh "+name {
				t.Errorf("%v: want one error naming %s, got %v", tc.args, name, ps)
			}
		}
		if tc.check != nil && !tc.check(cfg) {
			t.Errorf("%v: NodeConfig %+v", tc.args, cfg.Spec)
		}
	}
}

// TestFromAL2ServiceNetwork: the cluster DNS address and the CIDR come
// from wherever bootstrap.sh took them.
func TestFromAL2ServiceNetwork(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		cidr    string
		dns     string
		problem string
	}{
		{name: "dns ip", args: []string{"--dns-cluster-ip", "172.20.0.10"}, dns: `["172.20.0.10"]`},
		{name: "two dns ips", args: []string{"--dns-cluster-ip", "10.100.0.10,10.100.0.11"}, dns: `["10.100.0.10","10.100.0.11"]`},
		{name: "ipv6 cidr", args: []string{"--service-ipv6-cidr", "fd00:10:96::/112"}, cidr: "fd00:10:96::/112"},
		{name: "ipv6 family and cidr", args: []string{"--ip-family", "ipv6", "--service-ipv6-cidr", "fd00:10:96::/112"}, cidr: "fd00:10:96::/112"},
		{name: "ipv6 family and dns", args: []string{"--ip-family", "ipv6", "--dns-cluster-ip", "fd00:10:96::a"}, dns: `["fd00:10:96::a"]`},
		{name: "terraform's exported ipv4 cidr", env: map[string]string{"SERVICE_IPV4_CIDR": "172.20.0.0/16"}, cidr: "172.20.0.0/16"},
		{name: "DescribeCluster's None", env: map[string]string{"SERVICE_IPV4_CIDR": "None"},
			problem: "warning: s: bootstrap.sh --dns-cluster-ip: not given"},
		{name: "nothing", problem: "warning: s: bootstrap.sh --dns-cluster-ip: not given: AL2's bootstrap.sh guessed"},
		{name: "ipv6 family alone", args: []string{"--ip-family", "ipv6"}, problem: "error: s: bootstrap.sh --ip-family: ipv6 needs --service-ipv6-cidr or --dns-cluster-ip"},
		{name: "ipv4 family, ipv6 cidr", args: []string{"--ip-family", "ipv4", "--service-ipv6-cidr", "fd00::/112"}, problem: "error: s: bootstrap.sh --service-ipv6-cidr: given with --ip-family ipv4"},
		{name: "ipv4 family, ipv6 dns", args: []string{"--dns-cluster-ip", "fd00::a"}, problem: `error: s: bootstrap.sh --dns-cluster-ip: "fd00::a" is not an IPv4 address`},
		{name: "not an address", args: []string{"--dns-cluster-ip", "10.100.0.x"}, problem: `error: s: bootstrap.sh --dns-cluster-ip: "10.100.0.x" is not an IP address`},
		{name: "bad exported cidr", env: map[string]string{"SERVICE_IPV4_CIDR": "10.100.0.0"}, problem: `error: s: bootstrap.sh $SERVICE_IPV4_CIDR: "10.100.0.0" is not an IPv4 CIDR`},
	} {
		o := al2Opts(t, tc.args...)
		o.Env = tc.env
		cfg, ps := FromAL2("s", o)
		got := strs(ps)
		if tc.problem != "" {
			if len(got) == 0 || !strings.HasPrefix(got[0], tc.problem) {
				t.Errorf("%s: problems %q, want one starting %q", tc.name, got, tc.problem)
			}
			continue
		}
		if len(got) != 0 || cfg.Spec.Cluster.CIDR != tc.cidr || string(cfg.Spec.Kubelet.Config["clusterDNS"]) != tc.dns {
			t.Errorf("%s: cidr %q, clusterDNS %s, problems %q; want cidr %q, clusterDNS %s", tc.name, cfg.Spec.Cluster.CIDR, cfg.Spec.Kubelet.Config["clusterDNS"], got, tc.cidr, tc.dns)
		}
	}
}

// TestLoadAL2Script: a user-data script part that runs bootstrap.sh is
// read as a NodeConfig, named by its part and line; the script's other
// commands are listed as not run; a script berth cannot read is an
// error naming the line; a script without bootstrap.sh is skipped as
// before.
func TestLoadAL2Script(t *testing.T) {
	b64 := testCA(t)
	script := "#!/bin/bash\nset -ex\nyum install -y htop\n/etc/eks/bootstrap.sh my-cluster --b64-cluster-ca " + b64 +
		" --apiserver-endpoint https://x.eks.amazonaws.com --dns-cluster-ip 10.100.0.10 --kubelet-extra-args '--node-labels=a=b'\n"
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	res, err := Load(context.Background(), log, []Source{{Name: UserDataSource, Data: []byte(script)}})
	if err != nil {
		t.Fatalf("Load: %v (%v)", err, res.Problems)
	}
	if !slices.Equal(res.Used, []string{"user-data, bootstrap.sh on line 4"}) || len(res.Skipped) != 0 {
		t.Errorf("used %q, skipped %v", res.Used, res.Skipped)
	}
	if c := res.Config.Spec.Cluster; c.Name != "my-cluster" || base64.StdEncoding.EncodeToString(c.CertificateAuthority) != b64 {
		t.Errorf("cluster %+v", c)
	}
	want := []NotRun{{"user-data", 2, "set -ex"}, {"user-data", 3, "yum install -y htop"}}
	if !slices.Equal(res.NotRun, want) {
		t.Errorf("not run %+v, want %+v", res.NotRun, want)
	}
	if !strings.Contains(logs.String(), "not run: user-data line 3: yum install -y htop") {
		t.Errorf("the console does not list what was not run:\n%s", logs.String())
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bad := "#!/bin/bash\nCA=$(aws eks describe-cluster --query ca)\n/etc/eks/bootstrap.sh c --b64-cluster-ca $CA\n"
	res, err = Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(bad)}})
	if err == nil || !slices.ContainsFunc(strs(res.Problems), func(s string) bool {
		return strings.HasPrefix(s, "error: user-data: reading its Amazon Linux 2 bootstrap.sh invocation") && strings.Contains(s, "line 3")
	}) {
		t.Errorf("a command substitution the invocation uses: %v %q", err, strs(res.Problems))
	}

	res, _ = Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte("#!/bin/bash\necho hi\n")}})
	if len(res.Skipped) != 1 || res.Skipped[0].Reason != "berth runs no scripts" || len(res.NotRun) != 0 {
		t.Errorf("a script without bootstrap.sh: skipped %v, not run %v", res.Skipped, res.NotRun)
	}
}

// TestDescribeClusterPending: the CloudFormation template's script names
// the cluster only; Load leaves the merged config unvalidated with a
// warning that says berth will call DescribeCluster, and FillFromEKS
// completes it from the answer as bootstrap.sh did. A NodeConfig part
// with the endpoint and CA makes the call unneeded.
func TestDescribeClusterPending(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	script := "#!/bin/bash\nset -o xtrace\n/etc/eks/bootstrap.sh prod --kubelet-extra-args '--node-labels=nodegroup=ng'\n/opt/aws/bin/cfn-signal --exit-code $? --stack s --resource NodeGroup --region us-west-2\n"
	res, err := Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(script)}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	req := res.DescribeCluster
	if req == nil || req.Cluster != "prod" || req.Source != "user-data, bootstrap.sh on line 3" {
		t.Fatalf("DescribeCluster pending: %+v", req)
	}
	if got := strs(res.Problems); len(got) != 2 || !strings.Contains(got[1], "eks:DescribeCluster \"prod\" with the instance role at boot") {
		t.Errorf("problems %q: want the --dns-cluster-ip warning and the DescribeCluster one", got)
	}
	ca, _ := base64.StdEncoding.DecodeString(testCA(t))
	err = FillFromEKS(res, DescribedCluster{Endpoint: "https://ABC.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: ca,
		ServiceIPv4CIDR: "172.20.0.0/16", ServiceIPv6CIDR: "fd00::/108", IPFamily: "ipv4", ID: "id-1"})
	if err != nil {
		t.Fatalf("FillFromEKS: %v", err)
	}
	if c := res.Config.Spec.Cluster; c.APIServerEndpoint != "https://ABC.gr7.us-west-2.eks.amazonaws.com" || c.CIDR != "172.20.0.0/16" || c.ID != "id-1" || res.DescribeCluster != nil ||
		!slices.Contains(res.Used, "eks:DescribeCluster prod (for user-data, bootstrap.sh on line 3)") {
		t.Errorf("filled: %+v, used %q", c, res.Used)
	}

	// An IPv6 cluster with no IPv6 CIDR in the answer: an error naming
	// the call and what to add.
	res, _ = Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(script)}})
	err = FillFromEKS(res, DescribedCluster{Endpoint: "https://x", CertificateAuthority: ca, IPFamily: "ipv6"})
	if err == nil || !slices.ContainsFunc(strs(res.Problems), func(s string) bool {
		return strings.HasPrefix(s, "error: eks:DescribeCluster prod (for user-data, bootstrap.sh on line 3): spec.cluster.cidr: the cluster has no ipv6 service CIDR")
	}) {
		t.Errorf("no CIDR in the answer: %v %q", err, strs(res.Problems))
	}

	// Another part gives the endpoint and CA: no call.
	nc := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    apiServerEndpoint: https://x.eks.amazonaws.com\n    certificateAuthority: " + testCA(t) + "\n    cidr: 10.100.0.0/16\n"
	mime := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n" + script + "\n--B\nContent-Type: application/node.eks.aws\n\n" + nc + "\n--B--\n"
	res, err = Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(mime)}})
	if err != nil || res.DescribeCluster != nil {
		t.Errorf("with a NodeConfig part giving them: %v, pending %+v", err, res.DescribeCluster)
	}
}

// TestLoadEksctl: eksctl's AL2 user data (cloud-config, base64 of gzip as
// eksctl writes it) is read as a NodeConfig named by its part, its
// preBootstrapCommand listed as not run, and what its scripts did that
// berth does not is a warning; a shape berth does not read stops the node
// with "eksctl's AL2 user data" and what to do.
func TestLoadEksctl(t *testing.T) {
	doc, err := os.ReadFile("../al2/testdata/golden/eksctl.cloud-config")
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(doc)
	w.Close()
	data := []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	res, err := Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: data}})
	if err != nil {
		t.Fatalf("Load: %v\n%q", err, strs(res.Problems))
	}
	if !slices.Equal(res.Used, []string{"user-data (eksctl's AL2 cloud-config)"}) {
		t.Errorf("used %q", res.Used)
	}
	c := res.Config
	if c.Spec.Cluster.Name != "prod-west" || len(c.Spec.Cluster.CertificateAuthority) == 0 {
		t.Errorf("cluster %+v", c.Spec.Cluster)
	}
	kc, _ := json.Marshal(c.Spec.Kubelet.Config)
	for _, want := range []string{`"clusterDNS":["10.100.0.10"]`, `"kubeReserved":{"cpu":"300m","ephemeral-storage":"1Gi","memory":"300Mi"}`} {
		if !strings.Contains(string(kc), want) {
			t.Errorf("kubelet config %s lacks %s", kc, want)
		}
	}
	if len(res.NotRun) != 1 || res.NotRun[0].Line != 4 {
		t.Errorf("not run %+v", res.NotRun)
	}
	if !slices.ContainsFunc(res.Problems, func(p Problem) bool {
		return p.Severity == SeverityWarning && strings.Contains(p.Message, "node-lifecycle")
	}) {
		t.Errorf("no warning about the labels: %q", strs(res.Problems))
	}

	bad := bytes.Replace(doc, []byte("- - /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh\n"), nil, 1)
	res, err = Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: bad}})
	if err == nil || !slices.ContainsFunc(strs(res.Problems), func(s string) bool {
		return strings.HasPrefix(s, "error: user-data (eksctl's AL2 cloud-config): line 1: eksctl's AL2 user data: runcmd does not run") &&
			strings.Contains(s, "berth convert")
	}) {
		t.Errorf("eksctl's cloud-config that does not run its script: %v %q", err, strs(res.Problems))
	}
}
