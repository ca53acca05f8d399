package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// verdictCorpus is user data berth must judge the same way in `berth
// check` and `berth render` (and so on the node, whose config and plan
// phases run what render runs): the plan's and nodeconfig's test user data,
// which are good, and bad documents made from a good one, each with what
// is wrong.
func verdictCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	corpus := map[string][]byte{}
	files, _ := filepath.Glob("plan/testdata/userdata/*")
	more, _ := filepath.Glob("../config/nodeconfig/testdata/cases/*/user-data")
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		corpus[f] = data
	}
	good, err := os.ReadFile("plan/testdata/userdata/plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range oracleCorpus(t) {
		corpus["oracle/"+name] = data
	}
	for name, extra := range map[string]string{
		"taint effect":        "  kubelet:\n    flags: [--register-with-taints=k=v:Sometimes]\n",
		"node ip":             "  kubelet:\n    flags: [--node-ip=1.2.3]\n",
		"node labels":         "  kubelet:\n    flags: ['--node-labels=a=b=c,=x']\n",
		"quoted kubeconfig":   "  kubelet:\n    flags: ['\"--kubeconfig=/tmp/evil\"']\n",
		"escaped config":      "  kubelet:\n    flags: ['--con\\fig=/tmp/evil.json']\n",
		"underscore endpoint": "  kubelet:\n    flags: [--container_runtime_endpoint=unix:///tmp/evil.sock]\n",
		"flag newline":        "  kubelet:\n    flags: [\"--v=2\\n--max-pods=3\"]\n",
		"search domain":       "  instance:\n    network:\n      domains: [-a]\n",
		"nameserver zone":     "  instance:\n    network:\n      nameservers: [\"fd00::53%eth0\"]\n",
		"env name":            "  instance:\n    environment:\n      A=B: x\n",
		"env value":           "  instance:\n    environment:\n      HTTPS_PROXY: \"http://p:3128\\nLD_PRELOAD=/x.so\"\n",
		"mount path":          "  instance:\n    localStorage:\n      strategy: RAID0\n      mountPath: \"/mnt/x\\ny\"\n",
		"deep":                "  kubelet:\n    config:\n      a: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "\n",
		"maxPods negative":    "  kubelet:\n    config:\n      maxPods: -5\n",
		"maxPods word":        "  kubelet:\n    config:\n      maxPods: many\n",
		"maxPods fraction":    "  kubelet:\n    config:\n      maxPods: 110.5\n",
		"mount path dots":     "  instance:\n    localStorage:\n      strategy: RAID0\n      mountPath: /mnt/../etc\n",
		"good flags":          "  kubelet:\n    flags: ['--node-labels=\"a=b,c=d\"', --v=2]\n",
		// Refused with what the kubelet berth was built with accepts,
		// which check and render use without --manifest.
		"unknown flag":         "  kubelet:\n    flags: [--no-such-flag=1]\n",
		"unknown feature gate": "  kubelet:\n    config:\n      featureGates: {NoSuchGate: true}\n",
		"cluster domain":       "  kubelet:\n    config:\n      clusterDomain: \"cluster.local\\nnameserver 6.6.6.6\"\n",
		"containerd key":       "  containerd:\n    config: \"[plugins.\\\"a\\\\u0001b\\\"]\\nx = 1\\n\"\n",
		"containerd value":     "  containerd:\n    config: \"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\\nruntime_path = \\\"/usr/bin/runc\\\\u000a-x\\\"\\n\"\n",
		"kubelet config key":   "  kubelet:\n    config:\n      staticPodURLHeader: {\"X\\nY\": [a]}\n",
	} {
		corpus[name] = append(append([]byte{}, good...), extra...)
	}
	for name, extra := range map[string]string{
		"annotation number":          "    example.com/replicas: 3\n",
		"bootstrap token short":      "    berth.dev/bootstrap-token: abc.def\n",
		"bootstrap token upper case": "    berth.dev/bootstrap-token: ABCDEF.0123456789ABCDEF\n",
		"sysctl forwarding":          "    berth.dev/sysctls: '{\"net.ipv4.ip_forward\": \"0\"}'\n",
		"blocks overlay":             "    berth.dev/blocked-kernel-modules: '[\"overlay\"]'\n",
		"good unknown annotation":    "    berth.dev/sysctl: '{}'\n",
	} {
		corpus[name] = withAnnotations(good, extra)
	}
	for name, data := range verdictFormats(t, good) {
		corpus[name] = data
	}
	return corpus
}

// withAnnotations is a NodeConfig with metadata.annotations lines added.
func withAnnotations(doc []byte, lines string) []byte {
	return bytes.Replace(doc, []byte("kind: NodeConfig\n"), []byte("kind: NodeConfig\nmetadata:\n  annotations:\n"+lines), 1)
}

// verdictFormats are bad inputs in each format berth reads besides a
// plain NodeConfig: MIME (gzip parts among them), an AL2 bootstrap.sh
// script, eksctl's AL2 cloud-config and Bottlerocket settings, each made
// from the repository's good example of the format.
func verdictFormats(t *testing.T, good []byte) map[string][]byte {
	t.Helper()
	read := func(f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mime := func(parts ...[]byte) []byte {
		var b bytes.Buffer
		b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n")
		for _, p := range parts {
			b.WriteString("--B\nContent-Type: application/node.eks.aws\n\n")
			b.Write(p)
			b.WriteString("\n")
		}
		b.WriteString("--B--\n")
		return b.Bytes()
	}
	gz := func(p []byte) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(p)
		zw.Close()
		return b.Bytes()
	}
	out := map[string][]byte{
		"mime annotation number": mime(withAnnotations(good, "    example.com/replicas: 3\n")),
		"mime bootstrap token":   mime(withAnnotations(good, "    berth.dev/bootstrap-token: abc.def\n")),
		"mime cluster domain":    mime(good, []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      clusterDomain: \"cluster.local\\nnameserver 6.6.6.6\"\n")),
	}
	// Eight gzip parts of 10 KiB in all, within EC2's 16 KiB, whose
	// containerd configs merge to 3 MiB: over the plan's bound on one
	// rendered file.
	var parts [][]byte
	for i := range 8 {
		parts = append(parts, gz(fmt.Appendf(nil, "%s  containerd:\n    config: |\n      [plugins.\"x%d\"]\n      v = \"%s\"\n", good, i, strings.Repeat("a", 400000))))
	}
	out["mime eight gzip parts"] = mime(parts...)

	al2 := read("plan/testdata/userdata/al2-mng.txt")
	for name, args := range map[string]string{
		"al2 unknown flag":         "--no-such-flag=1",
		"al2 unknown feature gate": "--feature-gates=NoSuchGate=true",
		"al2 labels":               "--node-labels=a=b=c",
	} {
		out[name] = []byte(regexp.MustCompile(`--kubelet-extra-args '[^']*'`).ReplaceAllLiteralString(al2, "--kubelet-extra-args '"+args+"'"))
	}

	eksctl := read("../config/al2/testdata/golden/eksctl.cloud-config")
	extraJSON := regexp.MustCompile(`(?m)^- content: '\{"kubeReserved".*'$`)
	if !extraJSON.MatchString(eksctl) {
		t.Fatal("eksctl.cloud-config has no kubelet-extra.json line to replace")
	}
	for name, js := range map[string]string{
		"eksctl cluster domain":        `{"clusterDomain":"cluster.local\nnameserver 6.6.6.6"}`,
		"eksctl unknown feature gate":  `{"featureGates":{"NoSuchGate":true}}`,
		"eksctl kubelet config number": `{"maxPods":"many"}`,
	} {
		out[name] = []byte(extraJSON.ReplaceAllLiteralString(eksctl, "- content: '"+js+"'"))
	}

	br := read("plan/testdata/userdata/bottlerocket-karpenter.toml")
	for name, extra := range map[string]string{
		"bottlerocket blocks overlay":    "\n[settings.kernel.modules.overlay]\nallowed = false\n",
		"bottlerocket sysctl forwarding": "\n[settings.kernel.sysctl]\n'net.ipv4.ip_forward' = '0'\n",
		"bottlerocket eviction signal":   "\n[settings.kubernetes.eviction-soft]\n'memory.nonsense' = '1Gi'\n",
	} {
		out[name] = []byte(br + extra)
	}
	out["bottlerocket cluster domain"] = []byte(strings.Replace(br, "max-pods = 58\n", "max-pods = 58\ncluster-domain = \"cluster.local\\nnameserver 6.6.6.6\"\n", 1))
	out["bottlerocket bootstrap token"] = []byte(strings.Replace(br, "max-pods = 58\n", "max-pods = 58\nauthentication-mode = \"tls\"\nbootstrap-token = \"abc.def\"\n", 1))
	return out
}

// One validator, one verdict: check and render accept the same user data,
// and what check refuses render refuses naming the same field paths.
func TestCheckAndRenderAgree(t *testing.T) {
	pathRE := regexp.MustCompile(`(?m)^error: [^:]+: ((?:spec|metadata)\S*):`)
	for name, data := range verdictCorpus(t) {
		t.Run(name, func(t *testing.T) {
			// runCLI keeps no state between calls; the corpus is 250 cases.
			t.Parallel()
			f := filepath.Join(t.TempDir(), "userdata")
			if err := os.WriteFile(f, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			checkCode := runCLI([]string{"check", f}, &out, &errOut)
			checked := out.String() + errOut.String()
			// The instance has an IPv6 address, so that IPv6 clusters are
			// judged on their config: check cannot know the instance.
			md := filepath.Join(t.TempDir(), "metadata.json")
			if err := os.WriteFile(md, []byte(strings.Replace(renderMetadata, `"region"`, `"ipv6s":["2600:1f14:aaaa::1"],"region"`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			// The answer the node would get from DescribeCluster, for user
			// data that leaves the cluster to it (AL2's CloudFormation
			// shape); render needs it given offline, and takes it only then.
			ans := filepath.Join(t.TempDir(), "describe-cluster.json")
			if err := os.WriteFile(ans, describeAnswer(t), 0o644); err != nil {
				t.Fatal(err)
			}
			var rout, rerr bytes.Buffer
			renderCode := runCLI([]string{"render", "--metadata", md, "--describe-cluster", ans, "--cpus", "2", "--out", filepath.Join(t.TempDir(), "out"), "--config", f}, &rout, &rerr)
			rendered := rout.String() + rerr.String()
			if (checkCode == 0) != (renderCode == 0) {
				t.Fatalf("check exit %d, render exit %d\ncheck:\n%s\nrender:\n%s", checkCode, renderCode, checked, rendered)
			}
			for _, m := range pathRE.FindAllStringSubmatch(checked, -1) {
				if !strings.Contains(rendered, m[1]+":") {
					t.Errorf("check names %s, render does not:\n%s", m[1], rendered)
				}
			}
			if wantBad := !strings.HasPrefix(name, "good") && !strings.Contains(name, "/"); wantBad && checkCode == 0 {
				t.Errorf("check accepted the bad input:\n%s", checked)
			}
		})
	}
}

// describeAnswer is a DescribeCluster answer, as `aws eks describe-cluster`
// prints it, with plan's test CA.
func describeAnswer(t *testing.T) []byte {
	t.Helper()
	ca, err := os.ReadFile("plan/testdata/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"cluster": map[string]any{
		"name": "my-cluster", "endpoint": "https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com", "status": "ACTIVE",
		"certificateAuthority":    map[string]string{"data": base64.StdEncoding.EncodeToString(ca)},
		"kubernetesNetworkConfig": map[string]string{"serviceIpv4Cidr": "172.20.0.0/16", "ipFamily": "ipv4"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRenderPendingDescribeCluster: user data that leaves the cluster to
// DescribeCluster renders with the answer given, and without it fails
// naming the call and what to give.
func TestRenderPendingDescribeCluster(t *testing.T) {
	code, printed, out := runRender(t, "--config", "plan/testdata/userdata/al2-cloudformation.txt")
	if code != 1 || !strings.Contains(printed, "leaves the cluster's endpoint and CA to eks:DescribeCluster my-cluster at boot: give render the answer (--describe-cluster FILE)") {
		t.Errorf("without the answer: exit %d\n%s", code, printed)
	}
	ans := filepath.Join(t.TempDir(), "answer.json")
	if err := os.WriteFile(ans, describeAnswer(t), 0o644); err != nil {
		t.Fatal(err)
	}
	code, printed, out = runRender(t, "--config", "plan/testdata/userdata/al2-cloudformation.txt", "--describe-cluster", ans)
	if code != 0 {
		t.Fatalf("with the answer: exit %d\n%s", code, printed)
	}
	kc, err := os.ReadFile(filepath.Join(out, "var/lib/kubelet/kubeconfig"))
	if err != nil || !strings.Contains(string(kc), "https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com") {
		t.Errorf("kubeconfig %s: %v", kc, err)
	}
}

// oracleCorpus is config/nodeconfig's oracle corpus (its
// oracle_components_test.go holds it to kubelet and containerd) as user
// data: base.yaml with a case's spec under spec:, or its userData with
// {{base}} and {{ca}} filled in, or the file it names.
func oracleCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	const dir = "../config/nodeconfig"
	raw, err := os.ReadFile(dir + "/testdata/oracle/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(dir + "/testdata/oracle/base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string `yaml:"name"`
		Spec     string `yaml:"spec"`
		UserData string `yaml:"userData"`
		File     string `yaml:"file"`
	}
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	ca := regexp.MustCompile(`certificateAuthority: (\S+)`).FindSubmatch(base)
	if len(cases) < 150 || ca == nil {
		t.Fatalf("the oracle corpus: %d cases, CA %q", len(cases), ca)
	}
	out := map[string][]byte{}
	for _, c := range cases {
		switch {
		case c.File != "":
			if out[c.Name], err = os.ReadFile(filepath.Join(dir, c.File)); err != nil {
				t.Fatal(err)
			}
		case c.UserData != "":
			out[c.Name] = []byte(strings.NewReplacer("{{base}}", string(base), "{{ca}}", string(ca[1])).Replace(c.UserData))
		default:
			var b bytes.Buffer
			b.Write(base)
			for _, line := range strings.Split(strings.TrimRight(c.Spec, "\n"), "\n") {
				b.WriteString("  " + line + "\n")
			}
			out[c.Name] = b.Bytes()
		}
	}
	return out
}
