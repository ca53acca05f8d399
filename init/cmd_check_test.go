package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest/builtin"
)

// checkDoc writes the plan's plain user data with more lines and runs
// `berth check` with args on it.
func checkDoc(t *testing.T, extra string, args ...string) (int, string, string) {
	t.Helper()
	good, err := os.ReadFile("plan/testdata/userdata/plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "user-data.yaml")
	if err := os.WriteFile(f, append(good, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runCLI(append(append([]string{"check"}, args...), f), &out, &errb)
	return code, out.String() + errb.String(), f
}

// TestCheckWithoutManifest: with no --manifest, check holds kubelet's
// flags and feature gates to what the kubelet berth was built with
// accepts, and says which versions those are.
func TestCheckWithoutManifest(t *testing.T) {
	man, err := builtin.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	kv := man.Accepts.Kubelet.Version
	against := "berth check: checked against what kubelet " + kv + " and containerd " + man.Accepts.Containerd.Version + " accept, as built into berth"
	for _, tc := range []struct{ name, extra, want string }{
		{"unknown flag", "  kubelet:\n    flags: [--no-such-flag=1]\n",
			`: spec.kubelet.flags[0]: kubelet ` + kv + ` has no flag --no-such-flag`},
		{"unknown feature gate", "  kubelet:\n    config:\n      featureGates: {NoSuchGate: true}\n",
			`: spec.kubelet.config.featureGates.NoSuchGate: kubelet ` + kv + ` has no feature gate "NoSuchGate" (it refuses to start on one it does not know)`},
		{"unknown feature gate by flag", "  kubelet:\n    flags: ['--feature-gates=NoSuchGate=true']\n",
			`: spec.kubelet.flags[0]: --feature-gates: kubelet ` + kv + ` has no feature gate "NoSuchGate" (it refuses to start on one it does not know)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, printed, f := checkDoc(t, tc.extra)
			if code != 1 || !strings.Contains(printed, "error: "+f+tc.want) || !strings.Contains(printed, against) {
				t.Errorf("exit %d, want 1, an error ending %q and %q:\n%s", code, tc.want, against, printed)
			}
			if strings.Contains(printed, "not checked without") {
				t.Errorf("a warning of checks not made:\n%s", printed)
			}
		})
	}
	code, printed, _ := checkDoc(t, "  kubelet:\n    flags: [--max-pods=30]\n    config:\n      featureGates: {RotateKubeletServerCertificate: true}\n")
	if code != 0 || !strings.Contains(printed, against) {
		t.Errorf("a known flag and gate: exit %d:\n%s", code, printed)
	}
}

// TestCheckWithManifest: --manifest replaces the built-in checks with the
// image's, and says so; a manifest without them gets the warning naming
// the checks not made.
func TestCheckWithManifest(t *testing.T) {
	man := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(man, []byte(`{"components":{"kubelet":"v1.35.4","containerd":"v2.2.3"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, printed, _ := checkDoc(t, "  kubelet:\n    flags: [--no-such-flag=1]\n", "--manifest", man)
	for _, want := range []string{"checked against the image's manifest " + man + ", which records nothing of what its kubelet and containerd accept", "warning: not checked without what the image's components accept"} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q:\n%s", want, printed)
		}
	}
	if code != 0 {
		t.Errorf("exit %d: the flag is not judged without the data:\n%s", code, printed)
	}

	// An image whose kubelet lacks --max-pods: its data, not berth's.
	m, err := builtin.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	m.Accepts.Kubelet.Version = "v1.99.0"
	delete(m.Accepts.Kubelet.Flags, "max-pods")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(man, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, printed, f := checkDoc(t, "  kubelet:\n    flags: [--max-pods=30]\n", "--manifest", man)
	for _, want := range []string{
		"error: " + f + ": spec.kubelet.flags[0]: kubelet v1.99.0 has no flag --max-pods",
		"checked against what the image's kubelet v1.99.0 and containerd " + m.Accepts.Containerd.Version + " accept (" + man + ")",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q:\n%s", want, printed)
		}
	}
	if code != 1 || strings.Contains(printed, "not checked without") {
		t.Errorf("exit %d, want 1 and no warning of checks not made:\n%s", code, printed)
	}
}

// TestCheckUnknownAnnotation: an unknown berth.dev/ annotation is a
// warning naming the known ones, an error under --strict; other
// prefixes are not berth's.
func TestCheckUnknownAnnotation(t *testing.T) {
	const ann = "metadata:\n  annotations:\n    berth.dev/sysctl: '{\"vm.max_map_count\": \"262144\"}'\n    example.com/sysctl: x\n"
	good, err := os.ReadFile("plan/testdata/userdata/plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(good), "kind: NodeConfig\n", "kind: NodeConfig\n"+ann, 1)
	f := filepath.Join(t.TempDir(), "user-data.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	want := `: ` + f + `: metadata.annotations["berth.dev/sysctl"]: not a berth annotation, and berth ignores it; the known ones are berth.dev/blocked-kernel-modules, `
	var out, errb bytes.Buffer
	if code := runCLI([]string{"check", f}, &out, &errb); code != 0 || !strings.Contains(out.String(), "warning"+want) ||
		!strings.Contains(out.String(), "berth.dev/sysctls") || !strings.Contains(out.String(), "ok (1 warning(s))") || strings.Contains(out.String(), "example.com") {
		t.Errorf("exit %d, want 0 and one warning %q:\n%s", code, want, out.String())
	}
	out.Reset()
	if code := runCLI([]string{"check", "--strict", f}, &out, &errb); code != 1 || !strings.Contains(out.String(), "error"+want) {
		t.Errorf("--strict: exit %d, want 1 and the error:\n%s", code, out.String())
	}
}

// TestCheckBuildsThePlan: what only the plan refuses (a sysctl kubelet
// needs set otherwise) check refuses, naming the file and the field.
func TestCheckBuildsThePlan(t *testing.T) {
	good, err := os.ReadFile("plan/testdata/userdata/plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(good), "kind: NodeConfig\n", "kind: NodeConfig\nmetadata:\n  annotations:\n    berth.dev/sysctls: '{\"net.ipv4.ip_forward\": \"0\"}'\n", 1)
	f := filepath.Join(t.TempDir(), "user-data.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	want := "error: " + f + `: metadata.annotations["berth.dev/sysctls"]["net.ipv4.ip_forward"]: "0": berth needs net.ipv4.ip_forward = 1`
	if code := runCLI([]string{"check", f}, &out, &errb); code != 1 || !strings.Contains(out.String(), want) {
		t.Errorf("exit %d, want 1 and %q:\n%s", code, want, out.String())
	}
}
