package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/runtime/containerd"
)

// secretsInCase are the secret strings in testdata/userdata/secrets.yaml.
var secretsInCase = []string{"hunter2-registry", "proxy-pass-42", "dd-0123456789abcdef", "static-pod-secret"}

// TestRenderRedacts: by default neither the summary nor plan.txt shows a
// secret, while the node's own files keep them (kubelet and containerd
// need them); with ShowSecrets, plan.txt shows them too.
func TestRenderRedacts(t *testing.T) {
	in := caseByName(t, "secrets").inputs(t)
	render := func(o RenderOptions) (summary, desc, toml string) {
		out := t.TempDir()
		var w bytes.Buffer
		if _, err := RenderWith(in, out, &w, o); err != nil {
			t.Fatal(err)
		}
		d, err := os.ReadFile(filepath.Join(out, DescribePath))
		if err != nil {
			t.Fatal(err)
		}
		c, err := os.ReadFile(filepath.Join(out, containerd.ConfigPath))
		if err != nil {
			t.Fatal(err)
		}
		return w.String(), string(d), string(c)
	}

	summary, desc, toml := render(RenderOptions{})
	for _, s := range secretsInCase {
		if strings.Contains(summary, s) || strings.Contains(desc, s) {
			t.Errorf("%q shown without --show-secrets:\n%s\n%s", s, summary, desc)
		}
	}
	if !strings.Contains(toml, "hunter2-registry") {
		t.Errorf("the node's config.toml lost the registry password:\n%s", toml)
	}
	for _, want := range []string{"DATADOG_API_KEY=<redacted>", "KEYBOARD_LAYOUT=us", "http://proxyuser:<redacted>@proxy.internal:3128", "Authorization:Bearer <redacted>,X-Trace:on"} {
		if !strings.Contains(desc, want) {
			t.Errorf("plan.txt lacks %q:\n%s", want, desc)
		}
	}

	_, shown, _ := render(RenderOptions{ShowSecrets: true})
	for _, s := range []string{"proxy-pass-42", "dd-0123456789abcdef", "static-pod-secret"} {
		if !strings.Contains(shown, s) {
			t.Errorf("ShowSecrets: plan.txt lacks %q:\n%s", s, shown)
		}
	}
	if strings.Contains(shown, "<redacted>") {
		t.Errorf("ShowSecrets: plan.txt still redacts:\n%s", shown)
	}
}

// TestDescribeDefaultRedacts: Describe, what PID 1 writes to plan.txt, is
// the redacted description.
func TestDescribeDefaultRedacts(t *testing.T) {
	p, err := Build(caseByName(t, "secrets").inputs(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Describe(), p.DescribeWith(DescribeOptions{})) {
		t.Error("Describe differs from DescribeWith's default")
	}
	if bytes.Equal(p.Describe(), p.DescribeWith(DescribeOptions{ShowSecrets: true})) {
		t.Error("the secrets case describes the same with and without secrets")
	}
}

func TestRenderRedactsWarnings(t *testing.T) {
	in := caseByName(t, "secrets").inputs(t)
	in.Host.Nameservers = []string{"password=hunter2"} // not an IP: warned about
	in.Config.Spec.Instance.Network.Nameservers = []string{"10.0.0.2"}
	var w bytes.Buffer
	p, err := Render(in, t.TempDir(), &w)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) == 0 || !strings.Contains(strings.Join(p.Warnings, "\n"), "hunter2") {
		t.Fatalf("the test's premise is gone: no warning quoting the nameserver: %q", p.Warnings)
	}
	if strings.Contains(w.String(), "hunter2") || !strings.Contains(w.String(), "password=<redacted>") {
		t.Errorf("summary warning not redacted:\n%s", w.String())
	}
}
