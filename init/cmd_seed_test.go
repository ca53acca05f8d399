package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest/builtin"
	"github.com/berth-node/berth/internal/golden"
)

// The files of the seeds below, as a vfat or iso9660 cidata volume holds
// them at its root.
const (
	seedMetaData = "instance-id: iid-lab-node-1\nlocal-hostname: lab-node-1\n"
	// seedNetworkV2 is netplan's form: one NIC by MAC, a static address,
	// the default route, DNS and the MTU.
	seedNetworkV2 = `version: 2
ethernets:
  lan:
    match:
      macaddress: "52:54:00:12:34:56"
    addresses: [192.0.2.10/24]
    routes:
      - to: default
        via: 192.0.2.1
    nameservers:
      addresses: [192.0.2.53, 192.0.2.54]
    mtu: 9000
`
	// seedNetworkBadKey has a key netplan does not have (nameserver for
	// nameservers) on line 9.
	seedNetworkBadKey = `network:
  version: 2
  ethernets:
    lan:
      match:
        macaddress: "52:54:00:12:34:56"
      addresses: [192.0.2.10/24]
      gateway4: 192.0.2.1
      nameserver:
        addresses: [192.0.2.53]
`
)

// readUserData reads a user-data file of the plan's tests.
func readUserData(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("plan/testdata/userdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mimeWithBadPart is karpenter.txt's MIME user data with a third part: a
// NodeConfig with a flag the kubelet does not have.
func mimeWithBadPart(t *testing.T) string {
	t.Helper()
	mime := readUserData(t, "karpenter.txt")
	end := strings.LastIndex(mime, "--//--")
	if end < 0 {
		t.Fatal("karpenter.txt has no closing MIME delimiter")
	}
	return mime[:end] + "--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [--no-such-flag=1]\n\n" + mime[end:]
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// writeSeedDir writes files into a new directory, as a cidata volume
// mounted there would show them, and returns it.
func writeSeedDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "seed")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// seedCase is a seed, what check says of it (its golden file under
// testdata/seed) and whether it passes.
type seedCase struct {
	name  string
	files func(t *testing.T) map[string]string
	ok    bool
	// want is a line check must print, SEED standing for the directory.
	want string
}

func seedCases() []seedCase {
	return []seedCase{
		{"good", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": seedMetaData, "network-config": seedNetworkV2}
		}, true, "berth check: ok (0 warning(s))"},
		{"bad-network-config-key", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": seedMetaData, "network-config": seedNetworkBadKey}
		}, false, "error: SEED/network-config: line 9: network.ethernets.lan.nameserver: not supported: berth reads match, set-name, dhcp4, dhcp6, addresses, routes, gateway4, gateway6, nameservers, mtu, optional and renderer"},
		{"no-user-data", func(t *testing.T) map[string]string {
			return map[string]string{"meta-data": seedMetaData, "network-config": seedNetworkV2}
		}, false, "error: SEED/user-data: missing: a NoCloud seed holds user-data and meta-data (meta-data may be empty)"},
		{"empty-user-data", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": "\n", "meta-data": seedMetaData}
		}, false, "error: SEED/user-data: empty: a node booted from this seed has no NodeConfig; put one there (NodeConfig YAML or JSON, MIME multipart, Bottlerocket TOML settings, an Amazon Linux 2 bootstrap.sh script, or gzip of one)"},
		// Neither meta-data's keys nor network-config: DHCP, as without
		// a seed. meta-data must be there, as cloud-init requires.
		{"empty-meta-data-no-network-config", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": ""}
		}, true, "berth check: ok (0 warning(s))"},
		{"no-meta-data", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "plain.yaml")}
		}, false, "error: SEED/meta-data: missing: a NoCloud seed holds user-data and meta-data (meta-data may be empty)"},
		{"mime-user-data", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "karpenter.txt"), "meta-data": seedMetaData, "network-config": seedNetworkV2}
		}, true, "berth check: ok (0 warning(s))"},
		{"mime-user-data-bad-part", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": mimeWithBadPart(t), "meta-data": seedMetaData}
		}, false, "error: SEED/user-data part 3 (application/node.eks.aws): spec.kubelet.flags[0]: kubelet BUILTIN has no flag --no-such-flag"},
		{"gzip-user-data", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": gzipped(t, readUserData(t, "plain.yaml")), "meta-data": seedMetaData}
		}, true, "berth check: ok (0 warning(s))"},
		{"bottlerocket-user-data", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "bottlerocket-karpenter.toml"), "meta-data": seedMetaData, "network-config": seedNetworkV2}
		}, true, "berth check: ok"},
		{"al2-user-data", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": readUserData(t, "al2-mng.txt"), "meta-data": seedMetaData, "network-config": seedNetworkV2}
		}, true, "berth check: ok"},
		// Every file wrong: one run names them all.
		{"every-file-bad", func(t *testing.T) map[string]string {
			return map[string]string{"user-data": "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {name: x}\n",
				"meta-data": "local-hostname: node_1\n", "network-config": "version: 2\nethernets:\n  eth0: {dhcp4: true}\n  eth1: {dhcp4: true}\n"}
		}, false, `error: SEED/meta-data: line 1: local-hostname: "node_1" is not a hostname: label "node_1" has '_'; only letters, digits and '-' are allowed`},
	}
}

// normalise makes output independent of the run: the seed and output
// directories, and the kubelet and containerd berth was built with.
func normalise(t *testing.T, s, seed, out string) string {
	t.Helper()
	man, err := builtin.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	s = strings.ReplaceAll(s, seed, "SEED")
	if out != "" {
		s = strings.ReplaceAll(s, out, "OUT")
	}
	s = strings.ReplaceAll(s, builtin.Versions(man), "BUILTIN")
	return strings.ReplaceAll(s, "kubelet "+man.Accepts.Kubelet.Version, "kubelet BUILTIN")
}

// TestCheckSeed: `berth check --seed DIR` checks the seed's user-data as
// a file of any format, and its meta-data and network-config as a node
// booted from the seed reads them; every problem names the seed file,
// the line and the key. The whole output is golden
// (testdata/seed/NAME.check.golden).
func TestCheckSeed(t *testing.T) {
	for _, tc := range seedCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := writeSeedDir(t, tc.files(t))
			var out, errb bytes.Buffer
			code := runCLI([]string{"check", "--seed", dir}, &out, &errb)
			printed := normalise(t, out.String()+errb.String(), dir, "")
			if (code == 0) != tc.ok || (code != 0 && code != 1) {
				t.Errorf("exit %d, want ok=%v:\n%s", code, tc.ok, printed)
			}
			if !strings.Contains(printed, tc.want+"\n") && !strings.Contains(printed, tc.want+" (") {
				t.Errorf("output lacks %q:\n%s", tc.want, printed)
			}
			golden.Check(t, filepath.Join("testdata", "seed", tc.name+".check.golden"), []byte(printed), *updateGolden)
		})
	}
}

// TestCheckSeedUsage: --seed with FILE arguments is a usage error naming
// both; a seed directory that is not there is an error naming it.
func TestCheckSeedUsage(t *testing.T) {
	dir := writeSeedDir(t, map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": ""})
	var out, errb bytes.Buffer
	code := runCLI([]string{"check", "--seed", dir, "plan/testdata/userdata/plain.yaml"}, &out, &errb)
	want := "berth check: --seed " + dir + " and FILE arguments (plan/testdata/userdata/plain.yaml): the seed's user-data is the node's user data; give one or the other\n" +
		"usage: berth check [--strict] [--manifest FILE] FILE...\n       berth check [--strict] [--manifest FILE] --seed DIR\n"
	if code != 2 || out.Len() != 0 || !strings.HasPrefix(errb.String(), want) {
		t.Errorf("exit %d, want 2 and %q first:\nstdout %q\nstderr %s", code, want, out.String(), errb.String())
	}

	missing := filepath.Join(t.TempDir(), "absent")
	out.Reset()
	errb.Reset()
	code = runCLI([]string{"check", "--seed", missing}, &out, &errb)
	if code != 1 || !strings.HasPrefix(errb.String(), "berth check: seed "+missing+": ") {
		t.Errorf("a missing seed: exit %d:\n%s%s", code, out.String(), errb.String())
	}
}

// TestCheckSeedStrict: --strict holds the seed's user-data to what it
// holds a file to: an unknown field is an error.
func TestCheckSeedStrict(t *testing.T) {
	ud := readUserData(t, "plain.yaml") + "  kubelet:\n    flagz: []\n"
	dir := writeSeedDir(t, map[string]string{"user-data": ud, "meta-data": seedMetaData})
	for strict, want := range map[bool]string{false: "warning: " + dir + "/user-data: spec.kubelet.flagz: unknown field", true: "error: " + dir + "/user-data: spec.kubelet.flagz: unknown field"} {
		args := []string{"check", "--seed", dir}
		if strict {
			args = []string{"check", "--strict", "--seed", dir}
		}
		var out, errb bytes.Buffer
		code := runCLI(args, &out, &errb)
		if (code == 1) != strict || !strings.Contains(out.String(), want+"\n") {
			t.Errorf("strict %v: exit %d, want the line %q:\n%s", strict, code, want, out.String())
		}
	}
}

// renderSeed runs `berth render --seed dir` with the test's instance
// metadata and args, and returns the exit code, stdout, stderr and the
// output directory.
func renderSeed(t *testing.T, dir string, args ...string) (int, string, string, string) {
	t.Helper()
	tmp := t.TempDir()
	md := filepath.Join(tmp, "metadata.json")
	if err := os.WriteFile(md, []byte(renderMetadata), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	var stdout, stderr bytes.Buffer
	code := runCLI(append([]string{"render", "--seed", dir, "--metadata", md, "--cpus", "2", "--out", out}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String(), out
}

// planLines returns plan.txt's lines that start with one of prefixes.
func planLines(t *testing.T, out string, prefixes ...string) []string {
	t.Helper()
	desc, err := os.ReadFile(filepath.Join(out, "run/berth/plan.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(string(desc), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				got = append(got, strings.TrimSpace(l))
			}
		}
	}
	return got
}

// TestRenderSeed: `berth render --seed DIR` prints what the seed decides
// (a section in plan.txt's form, golden in testdata/seed/good.render.golden)
// before the plan's summary, and renders the node with the seed's
// user-data, named by its local-hostname, on its static address.
func TestRenderSeed(t *testing.T) {
	dir := writeSeedDir(t, seedCases()[0].files(t))
	code, stdout, stderr, out := renderSeed(t, dir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	// The section and the summary line; the files written are the
	// plan's, golden in init/plan.
	head, _, found := strings.Cut(normalise(t, stdout, dir, out), "service ")
	if !found {
		t.Fatalf("no service lines in:\n%s", stdout)
	}
	golden.Check(t, filepath.Join("testdata", "seed", "good.render.golden"), []byte(head), *updateGolden)
	want := []string{"node-name: lab-node-1", "node-ip: 192.0.2.10", "--node-ip=192.0.2.10", "--hostname-override=lab-node-1"}
	if got := planLines(t, out, "node-name: ", "node-ip: ", "      --node-ip=", "      --hostname-override="); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan.txt says %q, want %q", got, want)
	}

	// --node-ip wins over the seed's address; DHCP and no local-hostname
	// leave both to the metadata, as without a seed.
	code, stdout, stderr, out = renderSeed(t, dir, "--node-ip", "192.0.2.99")
	if got := planLines(t, out, "node-ip: "); code != 0 || len(got) != 1 || got[0] != "node-ip: 192.0.2.99" {
		t.Errorf("--node-ip: exit %d, plan.txt %q:\n%s%s", code, got, stdout, stderr)
	}
	dhcp := writeSeedDir(t, map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": ""})
	code, stdout, stderr, out = renderSeed(t, dhcp)
	if code != 0 || !strings.Contains(stdout, "  network: none in the seed: DHCP on the first Ethernet interface, as without a seed\n") {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	want = []string{"node-name: ip-10-0-12-34.us-west-2.compute.internal", "node-ip: 10.0.12.34"}
	if got := planLines(t, out, "node-name: ", "node-ip: "); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("a DHCP seed: plan.txt says %q, want %q", got, want)
	}
}

// TestRenderSeedAgreesWithCheck: render refuses the seeds check refuses,
// printing the same problems, and writes nothing for them.
func TestRenderSeedAgreesWithCheck(t *testing.T) {
	for _, tc := range seedCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := writeSeedDir(t, tc.files(t))
			code, stdout, stderr, out := renderSeed(t, dir)
			if (code == 0) != tc.ok {
				t.Fatalf("exit %d, want ok=%v:\n%s%s", code, tc.ok, stdout, stderr)
			}
			if tc.ok {
				return
			}
			if strings.HasPrefix(tc.want, "error: ") && !strings.Contains(normalise(t, stderr, dir, out), tc.want+"\n") {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a refused seed left %s", out)
			}
		})
	}
}

// TestRenderSeedUsage: --seed with --config or --imds is a usage error
// saying why.
func TestRenderSeedUsage(t *testing.T) {
	dir := writeSeedDir(t, map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": ""})
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metadata", "x.json", "--config", "plan/testdata/userdata/plain.yaml"},
			"berth render: --seed " + dir + " with --config: the seed's user-data is the node's user data; give one or the other\n"},
		{[]string{"--imds", "http://127.0.0.1:1"},
			"berth render: --seed " + dir + " with --imds: a node booted from a seed has no IMDS; leave it out to render the node as it boots from the seed, or give instance facts as --metadata FILE\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := runCLI(append([]string{"render", "--seed", dir, "--out", out}, tc.args...), &stdout, &stderr)
		if code != 2 || stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), tc.want+"usage: berth render ") {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, stderr.String())
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a usage error wrote %s", out)
	}
}

// Without --metadata, render --seed renders the node as it boots from the
// seed: not an EC2 instance, named by local-hostname, no provider ID, and
// joining by bootstrap token (an EKS token needs a region it does not
// have: refused, saying so).
func TestRenderSeedOffEC2(t *testing.T) {
	dir := writeSeedDir(t, map[string]string{
		"user-data": readUserData(t, "bootstrap-token.yaml"),
		"meta-data": "instance-id: iid-lab-node-1\nlocal-hostname: lab-node-1\n",
	})
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	if code := runCLI([]string{"render", "--seed", dir, "--cpus", "2", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	want := []string{"platform: not EC2 (user data from NoCloud seed " + dir + ")", "node-name: lab-node-1 (NoCloud seed " + dir + " meta-data local-hostname)",
		"provider-id: none (not EC2: kubelet runs without --cloud-provider=external)", "region: none (no ECR credential provider, no EKS token)"}
	if got := planLines(t, out, "platform: ", "node-name: ", "provider-id: ", "region: "); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan.txt says %q, want %q", got, want)
	}

	eks := writeSeedDir(t, map[string]string{"user-data": readUserData(t, "plain.yaml"), "meta-data": "local-hostname: lab-node-1\n"})
	stdout.Reset()
	stderr.Reset()
	code := runCLI([]string{"render", "--seed", eks, "--cpus", "2", "--out", filepath.Join(t.TempDir(), "out")}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "no region or instance role for an EKS token; join with a bootstrap token") {
		t.Errorf("EKS token off EC2: exit %d:\n%s", code, stderr.String())
	}
}
