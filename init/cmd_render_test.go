package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renderMetadata is instance metadata for `berth render --metadata`.
const renderMetadata = `{"instanceId":"i-0123456789abcdef0","instanceType":"m5.large","localIpv4":"10.0.12.34",` +
	`"localHostname":"ip-10-0-12-34.us-west-2.compute.internal","availabilityZone":"us-west-2a","region":"us-west-2"}`

// secretsUserData holds one secret of each kind berth redacts; see
// init/plan/testdata/userdata/secrets.yaml.
const secretsUserData = "plan/testdata/userdata/secrets.yaml"

var renderSecrets = []string{"hunter2-registry", "proxy-pass-42", "dd-0123456789abcdef", "static-pod-secret"}

// runRender runs `berth render` with args plus --metadata and --out, and
// returns the exit code, stdout+stderr, and the output directory.
func runRender(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	md := filepath.Join(dir, "metadata.json")
	if err := os.WriteFile(md, []byte(renderMetadata), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := runCLI(append([]string{"render", "--metadata", md, "--cpus", "2", "--out", out}, args...), &stdout, &stderr)
	return code, stdout.String() + stderr.String(), out
}

func TestRenderRedactsByDefault(t *testing.T) {
	code, printed, out := runRender(t, "--config", secretsUserData)
	if code != 0 {
		t.Fatalf("render exit %d:\n%s", code, printed)
	}
	desc, err := os.ReadFile(filepath.Join(out, "run/berth/plan.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range renderSecrets {
		if strings.Contains(printed, s) || strings.Contains(string(desc), s) {
			t.Errorf("%q shown without --show-secrets; printed:\n%s\nplan.txt:\n%s", s, printed, desc)
		}
	}
	if !strings.Contains(string(desc), "DATADOG_API_KEY=<redacted>") {
		t.Errorf("plan.txt does not redact the API key:\n%s", desc)
	}
	// The files under --out are the node's: real, and private where the
	// mode table says so.
	toml := filepath.Join(out, "etc/containerd/config.toml")
	data, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "hunter2-registry") {
		t.Errorf("--out config.toml was redacted; it must be what the node gets:\n%s", data)
	}
	for path, want := range map[string]os.FileMode{
		toml:                                     0o600,
		filepath.Join(out, "run/berth/plan.txt"): 0o600,
		filepath.Join(out, "var/lib/kubelet/kubeconfig"):         0o600,
		filepath.Join(out, "etc/kubernetes/pki/ca.crt"):          0o644,
		filepath.Join(out, "etc/kubernetes/kubelet/config.json"): 0o644,
	} {
		st, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, st.Mode().Perm(), want)
		}
	}
}

func TestRenderShowSecrets(t *testing.T) {
	code, printed, out := runRender(t, "--show-secrets", "--config", secretsUserData)
	if code != 0 {
		t.Fatalf("render exit %d:\n%s", code, printed)
	}
	desc, err := os.ReadFile(filepath.Join(out, "run/berth/plan.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"proxy-pass-42", "dd-0123456789abcdef", "static-pod-secret"} {
		if !strings.Contains(string(desc), s) {
			t.Errorf("--show-secrets: plan.txt lacks %q:\n%s", s, desc)
		}
	}
}

// TestRenderRedactsProblems: a NodeConfig problem about a field under a
// secret name is printed without the value, with or without --show-secrets.
func TestRenderRedactsProblems(t *testing.T) {
	data, err := os.ReadFile(secretsUserData)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "DATADOG_API_KEY: dd-0123456789abcdef", "DATADOG_API_KEY: 987654321", 1)
	if bad == string(data) {
		t.Fatal("the test's premise is gone: secrets.yaml has no DATADOG_API_KEY line to change")
	}
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, printed, _ := runRender(t, "--config", cfg)
	if code != 1 || !strings.Contains(printed, "spec.instance.environment.DATADOG_API_KEY") {
		t.Fatalf("want exit 1 naming the field; exit %d:\n%s", code, printed)
	}
	if strings.Contains(printed, "987654321") {
		t.Errorf("the problem quotes the secret value:\n%s", printed)
	}
	// nodeconfig never puts a secret-named field's value into a problem,
	// so --show-secrets has nothing to reveal there; the field and the
	// kind are still named.
	_, shown, _ := runRender(t, "--show-secrets", "--config", cfg)
	if strings.Contains(shown, "987654321") || !strings.Contains(shown, "DATADOG_API_KEY: want a string, got a number") {
		t.Errorf("--show-secrets: want the field and its kind, never the value:\n%s", shown)
	}
}

func TestRenderHelpSaysOutIsNotRedacted(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runCLI([]string{"render", "-h"}, &stdout, &stderr); code != 2 {
		t.Errorf("render -h exit %d, want 2", code)
	}
	help := stderr.String()
	for _, want := range []string{"--show-secrets", "never\nredacted", "0600"} {
		if !strings.Contains(help, want) {
			t.Errorf("render help lacks %q:\n%s", want, help)
		}
	}
}

// TestRenderCredentialProviderGate: `berth render --manifest` writes the
// image credential provider config the plan goldens hold, with ECR Public's
// hosts for kubelet 1.35 and without them for 1.31, and without them (and a
// warning) when the manifest names no kubelet.
func TestRenderCredentialProviderGate(t *testing.T) {
	const cfgPath = "etc/eks/image-credential-provider/config.json"
	for _, tc := range []struct {
		kubelet, golden string
	}{
		{"v1.35.4", "plan/testdata/golden/eksctl/" + cfgPath},
		{"v1.31.9", "plan/testdata/golden/kubelet-1.31/" + cfgPath},
		{"", "plan/testdata/golden/kubelet-1.31/" + cfgPath},
	} {
		man := filepath.Join(t.TempDir(), "manifest.json")
		comps := `{"containerd":"v2.2.3"}`
		if tc.kubelet != "" {
			comps = `{"containerd":"v2.2.3","kubelet":"` + tc.kubelet + `"}`
		}
		if err := os.WriteFile(man, []byte(`{"berthVersion":"v0.1.0","kernelVersion":"6.1.0","components":`+comps+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		code, printed, out := runRender(t, "--config", "plan/testdata/userdata/plain.yaml", "--manifest", man)
		if code != 0 {
			t.Fatalf("kubelet %q: render exit %d:\n%s", tc.kubelet, code, printed)
		}
		got, err := os.ReadFile(filepath.Join(out, cfgPath))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(tc.golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("kubelet %q: %s differs from %s:\n%s", tc.kubelet, cfgPath, tc.golden, got)
		}
		if warned := strings.Contains(printed, "names no kubelet version"); warned != (tc.kubelet == "") {
			t.Errorf("kubelet %q: warning shown %v:\n%s", tc.kubelet, warned, printed)
		}
	}
}

// TestRenderKubeletToggles: `berth render` shows nodeadm's version toggles
// for the manifest's kubelet, and the user's kubelet.config over them, as
// the plan goldens hold them: config.json byte for byte, and the shutdown
// line of plan.txt.
func TestRenderKubeletToggles(t *testing.T) {
	const cfgPath = "etc/kubernetes/kubelet/config.json"
	for _, tc := range []struct {
		kubelet, userData, golden string
	}{
		{"v1.32.9", "plain.yaml", "kubelet-1.32"},
		{"v1.33.5", "plain.yaml", "kubelet-1.33"},
		{"v1.34.1", "plain.yaml", "kubelet-1.34"},
		{"v1.35.4", "plain.yaml", "kubelet-1.35"},
		{"v1.34.1", "toggles-user-override.yaml", "toggles-user-override"},
	} {
		man := filepath.Join(t.TempDir(), "manifest.json")
		if err := os.WriteFile(man, []byte(`{"berthVersion":"v0.1.0","kernelVersion":"6.1.0","components":{"containerd":"v2.2.3","kubelet":"`+tc.kubelet+`"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		code, printed, out := runRender(t, "--config", "plan/testdata/userdata/"+tc.userData, "--manifest", man)
		if code != 0 {
			t.Fatalf("%s: render exit %d:\n%s", tc.golden, code, printed)
		}
		golden := filepath.Join("plan/testdata/golden", tc.golden)
		got, err := os.ReadFile(filepath.Join(out, cfgPath))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(golden, cfgPath))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %s differs from the golden:\n%s", tc.golden, cfgPath, got)
		}
		shutdownLine := func(desc []byte) string {
			for _, l := range strings.Split(string(desc), "\n") {
				if strings.HasPrefix(l, "shutdown: ") {
					return l
				}
			}
			return ""
		}
		gotDesc, err := os.ReadFile(filepath.Join(out, "run/berth/plan.txt"))
		if err != nil {
			t.Fatal(err)
		}
		wantDesc, err := os.ReadFile(filepath.Join(golden, "run/berth/plan.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := shutdownLine(gotDesc), shutdownLine(wantDesc); g == "" || g != w {
			t.Errorf("%s: plan.txt says %q, golden %q", tc.golden, g, w)
		}
	}
}
