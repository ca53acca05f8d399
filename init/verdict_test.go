package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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
	} {
		corpus[name] = append(append([]byte{}, good...), extra...)
	}
	return corpus
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
	var cases []struct{ Name, Spec, UserData, File string }
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
