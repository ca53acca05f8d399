package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

func TestCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: demo
    apiServerEndpoint: http://example.com
    cidr: 10.100.0.0/33
  kubelet:
    flags: ["--kubeconfig=/x"]
    flagz: 1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runCLI([]string{"check", bad}, &out, &errb); code != 1 {
		t.Fatalf("exit code %d, want 1; stdout:\n%s", code, out.String())
	}
	for _, want := range []string{
		"warning: " + bad + ": spec.kubelet.flagz: unknown field",
		"error: " + bad + ": spec.cluster.apiServerEndpoint: want an https URL",
		"error: " + bad + ": spec.cluster.cidr:",
		"error: " + bad + ": spec.kubelet.flags[0]: --kubeconfig is set by berth",
		"error: merged config: spec.cluster.certificateAuthority: required",
		"berth check: 4 error(s), 1 warning(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := runCLI([]string{"check", "--strict", bad}, &out, &errb); code != 1 || !strings.Contains(out.String(), "5 error(s), 0 warning(s)") {
		t.Errorf("--strict: exit %d, output:\n%s", code, out.String())
	}
}

// berth check names each bad lifecycle annotation, and accepts good ones.
func TestCheckLifecycleAnnotations(t *testing.T) {
	dir := t.TempDir()
	doc := func(name, ann string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n  annotations:\n"+ann+
			"spec:\n  cluster:\n    name: c\n    cidr: 10.100.0.0/16\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := doc("bad.yaml", "    berth.dev/on-spot-interruption: drain\n    berth.dev/on-asg-terminated: log\n")
	var out, errb bytes.Buffer
	if code := runCLI([]string{"check", bad}, &out, &errb); code != 1 {
		t.Fatalf("exit code %d, want 1; stdout:\n%s", code, out.String())
	}
	for _, want := range []string{
		"error: " + bad + `: metadata.annotations["berth.dev/on-spot-interruption"]: "drain" is not an action; want shutdown, log or ignore`,
		"error: " + bad + `: metadata.annotations["berth.dev/on-asg-terminated"]: not a berth annotation`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	good := doc("good.yaml", "    berth.dev/on-spot-interruption: log\n    berth.dev/on-rebalance-recommendation: shutdown\n    berth.dev/on-asg-termination: ignore\n")
	out.Reset()
	runCLI([]string{"check", good}, &out, &errb)
	if strings.Contains(out.String(), "annotations") {
		t.Errorf("good annotations reported:\n%s", out.String())
	}
}

func TestCheckAcceptsEksctlUserData(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runCLI([]string{"check", "plan/testdata/userdata/eksctl.txt"}, &out, &errb); code != 0 {
		t.Fatalf("exit code %d; output:\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "berth check: ok") {
		t.Errorf("output: %s", out.String())
	}
}

// TestRenderFromIMDS renders a node's files exactly as boot would read its
// inputs: metadata and user data from an IMDSv2 stand-in.
func TestRenderFromIMDS(t *testing.T) {
	ud, err := os.ReadFile("plan/testdata/userdata/eksctl.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := imdsserver.New(imdsserver.Config{Instance: imdsserver.DefaultInstance(), UserData: ud})
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	render := func() (string, map[string][]byte) {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		if code := runCLI([]string{"render", "--imds", url, "--cpus", "2", "--out", dir}, &out, &errb); code != 0 {
			t.Fatalf("render exit %d:\n%s%s", code, out.String(), errb.String())
		}
		files := map[string][]byte{}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			files[strings.TrimPrefix(p, dir)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), files
	}
	summary, a := render()
	for _, want := range []string{"/etc/kubernetes/kubelet/config.json", "/etc/containerd/config.toml", "/etc/kubernetes/pki/ca.crt", "/run/berth/plan.txt"} {
		if _, ok := a[want]; !ok {
			t.Errorf("render did not write %s; summary:\n%s", want, summary)
		}
	}
	if !strings.Contains(string(a["/etc/kubernetes/kubelet/config.json"]), `"maxPods": 29`) {
		t.Errorf("m5.large should get maxPods 29:\n%s", a["/etc/kubernetes/kubelet/config.json"])
	}
	_, b := render()
	if len(a) != len(b) {
		t.Fatalf("second render wrote %d files, first %d", len(b), len(a))
	}
	for p := range a {
		if !bytes.Equal(a[p], b[p]) {
			t.Errorf("%s differs between two renders of the same inputs", p)
		}
	}
	reqs := srv.Requests()
	if len(reqs) == 0 || reqs[0].Method != "PUT" {
		t.Errorf("render did not start with an IMDSv2 token PUT: %+v", reqs)
	}
}
