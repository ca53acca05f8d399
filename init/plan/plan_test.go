package plan

import (
	"bytes"
	"context"
	"flag"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nodeconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func baseInstance() *imds.Metadata {
	return &imds.Metadata{
		InstanceID:       "i-0123456789abcdef0",
		InstanceType:     "m5.large",
		LocalIPv4:        "10.0.12.34",
		LocalHostname:    "ip-10-0-12-34.us-west-2.compute.internal",
		MAC:              "0a:1b:2c:3d:4e:5f",
		AvailabilityZone: "us-west-2a",
		Region:           "us-west-2",
		AccountID:        "123456789012",
	}
}

func baseManifest() *manifest.Manifest {
	return &manifest.Manifest{
		BerthVersion:  "v0.1.0",
		KernelVersion: "6.1.0-56-amd64",
		Components:    map[string]string{"kubelet": "v1.35.4", "containerd": "v2.2.3", "runc": "v1.3.6"},
		SandboxImage:  "localhost/berth/pause:3.10",
		Images: []manifest.Image{
			{Name: "localhost/berth/pause:3.10", Path: "/usr/share/berth/images/pause.tar", ID: "sha256:" + strings.Repeat("a", 64)},
			{Name: "localhost/berth-demo:v1", Path: "/usr/share/berth/images/demo.tar", ID: "sha256:" + strings.Repeat("b", 64)},
		},
	}
}

// goldenCase is one realistic input; user data is read from
// testdata/userdata/<UserData> exactly as IMDS would serve it.
type goldenCase struct {
	name     string
	userData string
	instance func(*imds.Metadata)
	// machine, when set, is a node that is not an EC2 instance: the
	// inputs have it and no instance metadata.
	machine  *Machine
	manifest func(*manifest.Manifest)
	host     Host
	// eks answers the DescribeCluster an AL2 script without endpoint or
	// CA leaves pending (the node's config phase makes the call).
	eks func(t testing.TB) nodeconfig.DescribedCluster
}

// eksAnswer is a DescribeCluster answer for the cluster of the AL2
// scripts, with testdata/ca.crt.
func eksAnswer(t testing.TB) nodeconfig.DescribedCluster {
	ca, err := os.ReadFile(filepath.Join("testdata", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return nodeconfig.DescribedCluster{Endpoint: "https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: ca,
		ServiceIPv4CIDR: "172.20.0.0/16", IPFamily: "ipv4", ID: "0123abcd"}
}

func goldenCases() []goldenCase {
	twoCPU := Host{CPUs: 2, MemoryMiB: 7680}
	return []goldenCase{
		{name: "eksctl", userData: "eksctl.txt", host: twoCPU},
		// Amazon Linux 2 scripts, read as NodeConfigs (config/al2): each
		// renders as its hand-written equivalent does
		// (TestForeignUserDataRendersAsNodeConfig).
		{name: "al2-karpenter", userData: "al2-karpenter.txt", host: twoCPU},
		{name: "al2-mng", userData: "al2-mng.txt", host: twoCPU},
		{name: "al2-terraform", userData: "al2-terraform.txt", instance: func(m *imds.Metadata) {
			m.InstanceType = "m5d.large"
		}, host: twoCPU},
		{name: "al2-cloudformation", userData: "al2-cloudformation.txt", eks: eksAnswer, host: twoCPU},
		// eksctl's AL2 node group: cloud-config (base64 of gzip, as
		// eksctl writes it) whose files bootstrap.al2.sh read.
		{name: "al2-eksctl", userData: "al2-eksctl.txt", host: twoCPU},
		// Bottlerocket settings TOML (config/bottlerocket), Karpenter's.
		{name: "bottlerocket-karpenter", userData: "bottlerocket-karpenter.toml", instance: func(m *imds.Metadata) {
			m.InstanceType = "m5.xlarge"
		}, host: Host{CPUs: 4, MemoryMiB: 15360}},
		// Every setting berth honours (config/bottlerocket's every-key
		// document), the machine settings among them.
		{name: "bottlerocket-every-key", userData: "bottlerocket-every-key.toml", instance: func(m *imds.Metadata) {
			m.InstanceType = "m5.xlarge"
		}, host: Host{CPUs: 4, MemoryMiB: 15360}},
		{name: "karpenter", userData: "karpenter.txt", host: twoCPU},
		{name: "ipv6", userData: "ipv6.yaml", host: twoCPU, instance: func(m *imds.Metadata) {
			m.IPv6s = []string{"2600:1f14:abc:de00:1234:5678:9abc:def0"}
		}},
		{name: "maxpods-expression", userData: "maxpods-expression.yaml", instance: func(m *imds.Metadata) {
			m.InstanceType = "c5.4xlarge"
		}, host: Host{CPUs: 16, MemoryMiB: 32768}},
		{name: "user-config", userData: "user-config.yaml", instance: func(m *imds.Metadata) {
			m.InstanceType = "m5d.24xlarge"
		}, host: Host{CPUs: 96, MemoryMiB: 393216, Nameservers: []string{"10.0.0.2"}, SearchDomains: []string{"us-west-2.compute.internal"}}},
		{name: "unknown-instance-type", userData: "plain.yaml", instance: func(m *imds.Metadata) {
			m.InstanceType = "zz9.plural"
		}, host: twoCPU},
		{name: "containerd-1.7", userData: "plain.yaml", manifest: func(m *manifest.Manifest) {
			m.Components["containerd"] = "1.7.27"
		}, host: twoCPU},
		{name: "instance-id-node-name", userData: "instance-id-node-name.yaml", host: twoCPU},
		// Below kubelet 1.32 the image credential provider config is
		// nodeadm's without ECR Public (the base manifest's 1.35 has it).
		{name: "kubelet-1.31", userData: "plain.yaml", manifest: func(m *manifest.Manifest) {
			m.Components["kubelet"] = "v1.31.9"
		}, host: twoCPU},
		// nodeadm's version toggles by kubelet minor: none on 1.32,
		// DynamicResourceAllocation from 1.33, MutableCSINodeAllocatableCount
		// and graceful node shutdown (2m30s, critical pods 30s) from 1.34;
		// the base manifest's 1.35 has them all (as every other case).
		{name: "kubelet-1.32", userData: "plain.yaml", manifest: func(m *manifest.Manifest) {
			m.Components["kubelet"] = "v1.32.9"
		}, host: twoCPU},
		{name: "kubelet-1.33", userData: "plain.yaml", manifest: func(m *manifest.Manifest) {
			m.Components["kubelet"] = "v1.33.5"
		}, host: twoCPU},
		{name: "kubelet-1.34", userData: "plain.yaml", manifest: func(m *manifest.Manifest) {
			m.Components["kubelet"] = "v1.34.1"
		}, host: twoCPU},
		{name: "kubelet-1.35", userData: "plain.yaml", host: twoCPU},
		// The user's kubelet.config wins: a gate turned off and a shorter
		// grace period, which cuts berth's critical-pods period to fit and
		// sets berth's own pod grace.
		{name: "toggles-user-override", userData: "toggles-user-override.yaml", manifest: func(m *manifest.Manifest) {
			m.Components["kubelet"] = "v1.34.1"
		}, host: twoCPU},
		// A user's containerd.config of version 2 (nodeadm's containerdv2
		// e2e input) is converted to version 3 and merged over berth's:
		// the user's discard_unpacked_layers = false and sandbox image win.
		{name: "containerd-v2-user-config", userData: "containerd-v2-user-config.yaml", host: twoCPU},
		// The storage module list and the pod grace period show in plan.txt.
		{name: "raid10-grace", userData: "raid10-grace.yaml", instance: func(m *imds.Metadata) {
			m.InstanceType = "i4i.8xlarge"
		}, host: Host{CPUs: 32, MemoryMiB: 262144}},
		// Registry auth, a proxy password, an API key and an Authorization
		// header: real in the files, <redacted> in plan.txt.
		{name: "secrets", userData: "secrets.yaml", host: twoCPU},
		// hosts.toml per registry in containerd's certs.d, _default for "*".
		{name: "registry-mirrors", userData: "registry-mirrors.yaml", instance: func(m *imds.Metadata) {
			m.LocalIPv4 = "10.0.2.15"
			m.LocalHostname = "berth-node"
		}, host: Host{CPUs: 2, MemoryMiB: 1024, NodeIP: "10.0.2.15"}},
		{name: "bootstrap-token", userData: "bootstrap-token.yaml", instance: func(m *imds.Metadata) {
			m.LocalIPv4 = "10.0.2.15"
			m.LocalHostname = "berth-node"
		}, host: Host{CPUs: 2, MemoryMiB: 1024, NodeIP: "10.0.2.15"}},
		// Off EC2 (issue 47): a NoCloud seed's node, named by its
		// meta-data, with no provider ID, kubelet's default max pods, no
		// ECR credential provider and no --cloud-provider=external.
		{name: "nocloud-seed", userData: "bootstrap-token.yaml",
			machine: &Machine{Source: "NoCloud seed /dev/vdb", InstanceID: "iid-lab-node-1", Hostname: "lab-node-1"},
			host:    Host{CPUs: 2, MemoryMiB: 1024, NodeIP: "192.0.2.10"}},
	}
}

func (c goldenCase) inputs(t testing.TB) Inputs {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "userdata", c.userData))
	if err != nil {
		t.Fatal(err)
	}
	res, err := nodeconfig.Load(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)),
		[]nodeconfig.Source{{Name: nodeconfig.UserDataSource, Data: data}})
	if err == nil && res.DescribeCluster != nil {
		if c.eks == nil {
			t.Fatalf("%s leaves DescribeCluster pending; give the case an eks answer", c.userData)
		}
		err = nodeconfig.FillFromEKS(res, c.eks(t))
	}
	if err != nil {
		t.Fatalf("loading %s: %v", c.userData, err)
	}
	in := Inputs{Config: res.Config, Instance: baseInstance(), Manifest: baseManifest(), Host: c.host}
	if c.machine != nil {
		m := *c.machine
		in.Instance, in.Machine = nil, &m
	}
	if c.instance != nil {
		c.instance(in.Instance)
	}
	if c.manifest != nil {
		c.manifest(in.Manifest)
	}
	return in
}

// TestForeignUserDataRendersAsNodeConfig: each AL2 script and
// Bottlerocket settings document renders the same files as the NodeConfig
// written by hand beside it, which is what it means on an AL2023 node (and
// what `berth convert` prints).
func TestForeignUserDataRendersAsNodeConfig(t *testing.T) {
	n := 0
	for _, c := range goldenCases() {
		if !strings.HasPrefix(c.name, "al2-") && !strings.HasPrefix(c.name, "bottlerocket-") {
			continue
		}
		n++
		t.Run(c.name, func(t *testing.T) {
			eq := c
			eq.userData, eq.eks = strings.TrimSuffix(strings.TrimSuffix(c.userData, ".txt"), ".toml")+".yaml", nil
			render := func(gc goldenCase) map[string][]byte {
				out := t.TempDir()
				var summary bytes.Buffer
				if _, err := Render(gc.inputs(t), out, &summary); err != nil {
					t.Fatalf("%s: %v", gc.userData, err)
				}
				tree := readTree(t, out)
				tree["summary"] = bytes.ReplaceAll(summary.Bytes(), []byte(out), []byte("OUT"))
				return tree
			}
			got, want := render(c), render(eq)
			for path, w := range want {
				if !bytes.Equal(got[path], w) {
					t.Errorf("%s: %s renders\n%s\n%s renders\n%s", path, c.userData, got[path], eq.userData, w)
				}
			}
			for path := range got {
				if _, ok := want[path]; !ok {
					t.Errorf("%s: rendered from %s only", path, c.userData)
				}
			}
		})
	}
	if n < 7 {
		t.Errorf("%d cases, want the 5 AL2 shapes and Bottlerocket's 2", n)
	}
}

// TestGolden renders every case and compares each file under the output
// directory, plus the summary, with testdata/golden/<case>.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			var summary bytes.Buffer
			if _, err := Render(c.inputs(t), out, &summary); err != nil {
				t.Fatal(err)
			}
			// The summary names the output directory; make it stable.
			sum := strings.ReplaceAll(summary.String(), out, "OUT")
			if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(sum), 0o644); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", c.name)
			if *update {
				if err := os.RemoveAll(golden); err != nil {
					t.Fatal(err)
				}
				if err := os.CopyFS(golden, os.DirFS(out)); err != nil {
					t.Fatal(err)
				}
			}
			got, want := readTree(t, out), readTree(t, golden)
			for path, w := range want {
				g, ok := got[path]
				if !ok {
					t.Errorf("%s: golden file not rendered", path)
					continue
				}
				if !bytes.Equal(g, w) {
					t.Errorf("%s differs from golden (run go test ./plan -run TestGolden -update):\n--- got\n%s\n--- want\n%s", path, g, w)
				}
			}
			for path := range got {
				if _, ok := want[path]; !ok {
					t.Errorf("%s: rendered but not in golden", path)
				}
			}
		})
	}
}

func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", root, err)
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no files", root)
	}
	return files
}
