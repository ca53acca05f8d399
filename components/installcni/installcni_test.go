package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// plugins is what configFromEnv installs.
var plugins = []string{"bridge", "host-local", "loopback", "portmap"}

func TestPlanCopies(t *testing.T) {
	names := []string{"bridge", "host-local", "loopback", "portmap"}
	src := map[string]string{"bridge": "b", "host-local": "h", "loopback": "l", "portmap": "p"}
	for _, tc := range []struct {
		name string
		dst  map[string]string
		want []string
	}{
		{"empty destination", map[string]string{}, names},
		{"all in place", map[string]string{"bridge": "b", "host-local": "h", "loopback": "l", "portmap": "p", "other": "o"}, nil},
		{"one differs, one missing", map[string]string{"bridge": "b", "host-local": "old", "portmap": "p"}, []string{"host-local", "loopback"}},
	} {
		if got := planCopies(names, src, tc.dst); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: planCopies = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// pluginDirs makes an image's /cni/bin with the four plugins and an empty
// host directory.
func pluginDirs(t *testing.T) (src, dst string) {
	t.Helper()
	src, dst = filepath.Join(t.TempDir(), "cni-bin"), filepath.Join(t.TempDir(), "opt-cni-bin")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range plugins {
		if err := os.WriteFile(filepath.Join(src, n), []byte("plugin "+n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return src, dst
}

func TestInstallPluginsCopiesOnceAndKeepsOtherFiles(t *testing.T) {
	src, dst := pluginDirs(t)
	// Another add-on's plugin, a leftover from a crash mid-copy, and an old
	// loopback: the first stays, the second goes, the third is replaced.
	mustWrite(t, filepath.Join(dst, "aws-cni"), "someone else's", 0o755)
	mustWrite(t, filepath.Join(dst, "bridge.tmp"), "half a bridge", 0o600)
	mustWrite(t, filepath.Join(dst, "loopback"), "old loopback", 0o755)

	copied, err := installPlugins(plugins, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(copied, plugins) {
		t.Errorf("first install copied %v, want %v", copied, plugins)
	}
	for _, n := range plugins {
		p := filepath.Join(dst, n)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "plugin "+n {
			t.Errorf("%s = %q, %v; want the image's copy", p, b, err)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, %v; want 0755", p, st.Mode(), err)
		}
	}
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"aws-cni", "bridge", "host-local", "loopback", "portmap"}; !reflect.DeepEqual(names, want) {
		t.Errorf("host dir holds %v, want %v (no .tmp left, other files kept)", names, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "aws-cni")); string(b) != "someone else's" {
		t.Errorf("aws-cni was changed to %q", b)
	}

	// A restart with everything in place is a no-op.
	copied, err = installPlugins(plugins, src, dst)
	if err != nil || len(copied) != 0 {
		t.Errorf("second install copied %v (%v), want nothing", copied, err)
	}
	// A removed plugin comes back, alone.
	if err := os.Remove(filepath.Join(dst, "portmap")); err != nil {
		t.Fatal(err)
	}
	copied, err = installPlugins(plugins, src, dst)
	if err != nil || !reflect.DeepEqual(copied, []string{"portmap"}) {
		t.Errorf("after removing portmap, copied %v (%v), want [portmap]", copied, err)
	}
}

func TestInstallFileRenamesIntoPlace(t *testing.T) {
	src, dst := pluginDirs(t)
	// The old file is open, as a running plugin's would be: the rename must
	// leave that reader with the old content.
	old := filepath.Join(dst, "bridge")
	mustWrite(t, old, "old bridge", 0o755)
	f, err := os.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := installFile(filepath.Join(src, "bridge"), dst, "bridge"); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(f); string(b) != "old bridge" {
		t.Errorf("an open reader of the old file read %q: the file was rewritten in place", b)
	}
	if b, _ := os.ReadFile(old); string(b) != "plugin bridge" {
		t.Errorf("bridge = %q after install", b)
	}
}

func TestInstallPluginsErrors(t *testing.T) {
	src, dst := pluginDirs(t)
	if err := os.Remove(filepath.Join(src, "host-local")); err != nil {
		t.Fatal(err)
	}
	if _, err := installPlugins(plugins, src, dst); err == nil || !strings.Contains(err.Error(), "host-local") {
		t.Errorf("missing source plugin: err = %v, want one naming host-local", err)
	}
	src, _ = pluginDirs(t)
	if _, err := installPlugins(plugins, src, filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing host dir: err = %v, want one naming it", err)
	}
}

func mustWrite(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func TestConflistGolden(t *testing.T) {
	got, err := renderConflist(netip.MustParsePrefix("10.244.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	goldenPath := filepath.Join("testdata", conflistName+".golden")
	golden.Check(t, goldenPath, got, *update)
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Errorf("conflist is not JSON: %v", err)
	}
	v6, err := renderConflist(netip.MustParsePrefix("fd00:10:244:1::/64"))
	if err != nil || !bytes.Contains(v6, []byte(`"dst": "::/0"`)) {
		t.Errorf("IPv6 conflist has no ::/0 default route (%v):\n%s", err, v6)
	}
	if _, err := renderConflist(netip.Prefix{}); err == nil {
		t.Error("rendered a conflist with no pod CIDR")
	}
}

func TestEnsureConflist(t *testing.T) {
	dir := t.TempDir()
	writes := 0
	write := func(p string, b []byte, m os.FileMode) error {
		writes++
		return fsutil.WriteFileAtomic(p, b, m)
	}
	for i, want := range []bool{true, false} {
		wrote, err := ensureConflist(dir, []byte("conf\n"), write)
		if err != nil || wrote != want {
			t.Errorf("call %d: wrote %v, %v; want %v", i, wrote, err, want)
		}
	}
	mustWrite(t, filepath.Join(dir, conflistName), "edited by hand", 0o644)
	if wrote, err := ensureConflist(dir, []byte("conf\n"), write); err != nil || !wrote {
		t.Errorf("changed conflist not rewritten: %v, %v", wrote, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, conflistName)); string(b) != "conf\n" || writes != 2 {
		t.Errorf("conflist %q after %d writes", b, writes)
	}
}

func TestParseNode(t *testing.T) {
	for _, tc := range []struct {
		name, json, want, errHas string
		noCIDR                   bool
	}{
		{name: "podCIDR", json: `{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24"]}}`, want: "10.244.1.0/24"},
		{name: "podCIDRs only", json: `{"metadata":{"name":"n1"},"spec":{"podCIDRs":["10.244.2.0/24"]}}`, want: "10.244.2.0/24"},
		{name: "host bits masked", json: `{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.3.7/24"}}`, want: "10.244.3.0/24"},
		{name: "not yet", json: `{"metadata":{"name":"n1"},"spec":{}}`, noCIDR: true, errHas: "spec.podCIDR"},
		{name: "bad CIDR", json: `{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.1.0"}}`, errHas: "spec.podCIDR"},
		{name: "bad podCIDRs", json: `{"metadata":{"name":"n1"},"spec":{"podCIDRs":["x"]}}`, errHas: "spec.podCIDRs[0]"},
		{name: "too small", json: `{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.1.0/31"}}`, errHas: "no address"},
		{name: "other node", json: `{"metadata":{"name":"n2"},"spec":{"podCIDR":"10.244.1.0/24"}}`, errHas: "metadata.name"},
		{name: "not JSON", json: `<html>`, errHas: "decoding node n1"},
	} {
		got, err := parseNode([]byte(tc.json), "n1")
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.errHas)
			}
			if errors.Is(err, errNoPodCIDR) != tc.noCIDR {
				t.Errorf("%s: errors.Is(err, errNoPodCIDR) = %v", tc.name, !tc.noCIDR)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("%s: parseNode = %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

func FuzzParseNode(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.1.0/24"}}`))
	f.Add([]byte(`{"metadata":{"name":"n1"},"spec":{"podCIDRs":["fd00::/64"]}}`))
	f.Add([]byte(`{"metadata":{"name":"n1"},"spec":{"podCIDR":"fe80::%eth0/64"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseNode(data, "n1")
		if err != nil {
			return
		}
		if !p.IsValid() || p != p.Masked() {
			t.Fatalf("parseNode accepted %v, not a masked prefix", p)
		}
		if _, err := renderConflist(p); err != nil {
			t.Fatalf("an accepted pod CIDR %v does not render: %v", p, err)
		}
	})
}

// fakeAPI serves node n1 over TLS, with no pod CIDR for the first
// `without` requests, and writes the service account files for it.
func fakeAPI(t *testing.T, without int32) (host, port, saDir string, requests *atomic.Int32) {
	t.Helper()
	requests = &atomic.Int32{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		if r.URL.Path != "/api/v1/nodes/n1" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"kind":"Status","message":"forbidden"}`, http.StatusForbidden)
			return
		}
		if n <= without {
			io.WriteString(w, `{"metadata":{"name":"n1"},"spec":{}}`)
			return
		}
		io.WriteString(w, `{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.1.0/24"}}`)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	saDir = t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	mustWrite(t, filepath.Join(saDir, "ca.crt"), string(ca), 0o644)
	mustWrite(t, filepath.Join(saDir, "token"), "tok\n", 0o600)
	return u.Hostname(), u.Port(), saDir, requests
}

func TestAPIClientNode(t *testing.T) {
	host, port, saDir, _ := fakeAPI(t, 0)
	c, err := newAPIClient(host, port, saDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.node(context.Background(), "n1")
	if err != nil || !bytes.Contains(b, []byte("10.244.1.0/24")) {
		t.Errorf("node(n1) = %s, %v", b, err)
	}
	if _, err := c.node(context.Background(), "n2"); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("node(n2): err = %v, want the 403 and its message", err)
	}
	if _, err := newAPIClient("", port, saDir); err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("no host: err = %v", err)
	}
	if _, err := newAPIClient(host, port, t.TempDir()); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("no CA: err = %v", err)
	}
}

// TestRunInstallsAndKeepsInPlace runs the installer against a fake API
// server that gives the pod CIDR on the third ask, then removes what it
// installed and waits for it to come back, then stops it as SIGTERM would.
func TestRunInstallsAndKeepsInPlace(t *testing.T) {
	host, port, saDir, requests := fakeAPI(t, 2)
	src, bin := pluginDirs(t)
	cfg := config{
		nodeName: "n1", apiHost: host, apiPort: port, saDir: saDir,
		srcDir: src, binDir: bin, netDir: filepath.Join(t.TempDir(), "net.d"), plugins: plugins,
		poll: 10 * time.Millisecond, recheck: 10 * time.Millisecond,
	}
	// Only run writes the log, and the test reads it after run returns.
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, log, cfg) }()

	conf := filepath.Join(cfg.netDir, conflistName)
	waitFor(t, func() bool { _, err := os.Stat(conf); return err == nil }, "the conflist")
	if n := requests.Load(); n != 3 {
		t.Errorf("API asked %d times, want 3 (twice without a pod CIDR)", n)
	}
	if b, _ := os.ReadFile(conf); !bytes.Contains(b, []byte(`"subnet": "10.244.1.0/24"`)) {
		t.Errorf("conflist lacks the node's pod CIDR:\n%s", b)
	}
	for _, p := range []string{conf, filepath.Join(bin, "bridge")} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { _, err := os.Stat(p); return err == nil }, p+" put back")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run on cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	for _, want := range []string{"waiting for the node's pod CIDR", "podCIDR=10.244.1.0/24", "installed CNI plugin", "wrote CNI conflist"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.2.2", "KUBERNETES_SERVICE_PORT": "6443"}
	if _, err := configFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Errorf("no NODE_NAME: err = %v", err)
	}
	env["NODE_NAME"] = "n1"
	c, err := configFromEnv(func(k string) string { return env[k] })
	if err != nil || c.nodeName != "n1" || c.binDir != "/host/opt/cni/bin" || c.netDir != "/host/etc/cni/net.d" || c.srcDir != "/cni/bin" ||
		!reflect.DeepEqual(c.plugins, plugins) {
		t.Errorf("configFromEnv = %+v, %v", c, err)
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
