package nodeobject

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestMain lets the test binary act as an exec credential plugin: the
// kubeconfig's exec env sets NODEOBJECT_TEST_PLUGIN.
func TestMain(m *testing.M) {
	if mode := os.Getenv("NODEOBJECT_TEST_PLUGIN"); mode != "" {
		os.Exit(testPlugin(mode))
	}
	os.Exit(m.Run())
}

// testPlugin prints an ExecCredential as `berth eks-token` does. It counts
// its runs in $PLUGIN_STATE/count and keeps each run's
// KUBERNETES_EXEC_INFO as info-N. mode token prints token tok-N; cert
// prints $PLUGIN_STATE/cert.pem and key.pem; fail and hang fail.
func testPlugin(mode string) int {
	state := os.Getenv("PLUGIN_STATE")
	b, _ := os.ReadFile(filepath.Join(state, "count"))
	n, _ := strconv.Atoi(string(b))
	n++
	os.WriteFile(filepath.Join(state, "count"), []byte(strconv.Itoa(n)), 0o600)
	os.WriteFile(filepath.Join(state, "info-"+strconv.Itoa(n)), []byte(os.Getenv("KUBERNETES_EXEC_INFO")), 0o600)
	st := map[string]any{}
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "eks-token: no instance role credentials")
		return 3
	case "hang":
		time.Sleep(10 * time.Minute)
		return 0
	case "garbage":
		fmt.Println("this is not JSON")
		return 0
	case "token":
		st["token"] = "tok-" + strconv.Itoa(n)
	case "cert":
		c, _ := os.ReadFile(filepath.Join(state, "cert.pem"))
		k, _ := os.ReadFile(filepath.Join(state, "key.pem"))
		st["clientCertificateData"], st["clientKeyData"] = string(c), string(k)
	}
	if d, err := time.ParseDuration(os.Getenv("PLUGIN_EXPIRES")); err == nil {
		st["expirationTimestamp"] = time.Now().Add(d).UTC().Format(time.RFC3339)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", "status": st,
	})
	return 0
}

// testEnv is a cluster CA, an API server holding the golden Node, and a
// directory for kubeconfigs and their files.
type testEnv struct {
	t    *testing.T
	ca   *testCA
	api  *fakeAPI
	dir  string
	node string
}

func setup(t *testing.T) *testEnv {
	t.Helper()
	ca := newTestCA(t)
	api := newFakeAPI(t, ca)
	e := &testEnv{t: t, ca: ca, api: api, dir: t.TempDir()}
	e.node = api.addNode("testdata/node.json")
	e.write("ca.crt", ca.pem)
	return e
}

func (e *testEnv) write(name string, data []byte) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	// Atomically, as kubelet replaces its files.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// cluster is the kubeconfig cluster for the API server, CA by file.
func (e *testEnv) cluster() map[string]any {
	return map[string]any{"server": e.api.srv.URL, "certificate-authority": filepath.Join(e.dir, "ca.crt")}
}

// kubeconfig writes a kubeconfig as kubelet's, with context kubelet,
// cluster kubernetes and user kubelet, at name under the directory.
func (e *testEnv) kubeconfig(name string, cluster, user map[string]any) string {
	e.t.Helper()
	b, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "kubelet",
		"clusters": []any{map[string]any{"name": "kubernetes", "cluster": cluster}},
		"contexts": []any{map[string]any{"name": "kubelet", "context": map[string]any{"cluster": "kubernetes", "user": "kubelet"}}},
		"users":    []any{map[string]any{"name": "kubelet", "user": user}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.write(name, b)
}

func (e *testEnv) client(path string) *Client {
	e.t.Helper()
	c, err := New(Options{Kubeconfig: path, NodeName: e.node})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *testEnv) mustGet(c *Client) Node {
	e.t.Helper()
	n, err := c.Get(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	if n.Name != e.node || n.Ready != "True" {
		e.t.Fatalf("Get = %+v, want Node %s, Ready True", n, e.node)
	}
	return n
}

func (e *testEnv) lastSerial() string {
	s, _, _ := e.api.stats()
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestCertFilesRotate uses the kubeconfig kubelet's TLS bootstrap writes:
// certificate and key in kubelet-client-current.pem, a symlink kubelet
// re-points at a new file when it rotates the certificate. The next
// request uses the new certificate, without a restart.
func TestCertFilesRotate(t *testing.T) {
	e := setup(t)
	pki := filepath.Join(e.dir, "pki")
	current := filepath.Join(pki, "kubelet-client-current.pem")
	install := func(stamp string) string {
		is := e.ca.kubeletClient(e.node)
		file := e.write("pki/kubelet-client-"+stamp+".pem", append(is.certPEM, is.keyPEM...))
		tmp := current + ".new"
		if err := os.Symlink(file, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, current); err != nil {
			t.Fatal(err)
		}
		return is.serial
	}
	first := install("2026-12-01-07-00-00")
	kc := e.kubeconfig("kubeconfig", e.cluster(), map[string]any{"client-certificate": current, "client-key": current})
	c := e.client(kc)

	e.mustGet(c)
	e.mustGet(c)
	_, conns, _ := e.api.stats()
	if got := e.lastSerial(); got != first || conns != 1 {
		t.Fatalf("before rotation: serial %s over %d connections, want %s over 1 (kept alive)", got, conns, first)
	}

	second := install("2026-12-02-07-00-00")
	e.mustGet(c)
	_, conns, _ = e.api.stats()
	if got := e.lastSerial(); got != second || conns != 2 {
		t.Fatalf("after rotation: serial %s over %d connections, want the new certificate's %s over a new connection", got, conns, second)
	}
	e.mustGet(c)
	if _, conns, _ = e.api.stats(); conns != 2 {
		t.Errorf("a request after the rotation made connection %d, want the new one reused", conns)
	}

	// A rotated file that is no key pair fails the request and names it.
	bad := e.write("pki/kubelet-client-bad.pem", []byte("garbage"))
	os.Remove(current)
	if err := os.Symlink(bad, current); err != nil {
		t.Fatal(err)
	}
	_, err := c.Get(context.Background())
	if err == nil || !strings.Contains(err.Error(), "loading client certificate "+current) {
		t.Errorf("Get with a broken certificate file: %v, want an error naming %s", err, current)
	}
}

// TestDataFields puts the CA, certificate and key in the kubeconfig.
func TestDataFields(t *testing.T) {
	e := setup(t)
	is := e.ca.kubeletClient(e.node)
	b64 := base64.StdEncoding.EncodeToString
	kc := e.kubeconfig("kubeconfig",
		map[string]any{"server": e.api.srv.URL, "certificate-authority-data": b64(e.ca.pem)},
		map[string]any{"client-certificate-data": b64(is.certPEM), "client-key-data": b64(is.keyPEM)})
	e.mustGet(e.client(kc))
	if got := e.lastSerial(); got != is.serial {
		t.Errorf("the API server saw certificate %s, want %s", got, is.serial)
	}
}

// TestRelativePaths resolves file paths against the kubeconfig's
// directory, as client-go does, not against the working directory.
func TestRelativePaths(t *testing.T) {
	e := setup(t)
	is := e.ca.kubeletClient(e.node)
	e.write("etc/pki/ca.crt", e.ca.pem)
	e.write("etc/pki/client.crt", is.certPEM)
	e.write("etc/pki/client.key", is.keyPEM)
	kc := e.kubeconfig("etc/kubeconfig",
		map[string]any{"server": e.api.srv.URL, "certificate-authority": "pki/ca.crt"},
		map[string]any{"client-certificate": "pki/client.crt", "client-key": "./pki/client.key"})
	e.mustGet(e.client(kc))
	if got := e.lastSerial(); got != is.serial {
		t.Errorf("the API server saw certificate %s, want %s", got, is.serial)
	}
}

// TestToken authenticates with a token, inline and from a file that is
// read again on every request.
func TestToken(t *testing.T) {
	e := setup(t)
	e.api.setTokens("good-token")

	e.mustGet(e.client(e.kubeconfig("inline", e.cluster(), map[string]any{"token": "good-token"})))

	kc := e.kubeconfig("bad", e.cluster(), map[string]any{"token": "stolen"})
	_, err := e.client(kc).Get(context.Background())
	want := "401 Unauthorized: Unauthorized (the API server did not accept the credentials of users[kubelet] in kubeconfig " + kc + " (token))"
	if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, ErrNotFound) {
		t.Errorf("Get with a bad token: %v, want it to contain %q", err, want)
	}

	e.write("secrets/token", []byte("good-token\n"))
	kc = e.kubeconfig("fromfile", e.cluster(), map[string]any{"tokenFile": "secrets/token"})
	c := e.client(kc)
	e.mustGet(c)
	e.write("secrets/token", []byte("revoked\n"))
	if _, err := c.Get(context.Background()); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "tokenFile "+filepath.Join(e.dir, "secrets/token")) {
		t.Errorf("Get after the token file changed: %v, want a 401 naming the token file", err)
	}
	e.write("secrets/token", nil)
	if _, err := c.Get(context.Background()); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("Get with an empty token file: %v, want an error saying so", err)
	}
}

// TestGetAndAnnotate reads the golden Node from the API server and
// patches its annotations.
func TestGetAndAnnotate(t *testing.T) {
	e := setup(t)
	is := e.ca.kubeletClient(e.node)
	e.write("pki/client.pem", append(is.certPEM, is.keyPEM...))
	kc := e.kubeconfig("kubeconfig", e.cluster(), map[string]any{"client-certificate": "pki/client.pem", "client-key": "pki/client.pem"})
	c := e.client(kc)
	ctx := context.Background()

	before := e.mustGet(c)
	if !before.Unschedulable || before.Labels["topology.kubernetes.io/zone"] != "eu-west-1a" || before.ResourceVersion != "184467" {
		t.Errorf("Get = %+v, want the golden Node's spec and labels", before)
	}
	trial, other := "trial", "x"
	err := c.Annotate(ctx, map[string]*string{
		"berth.dev/update-state":       &trial,
		"berth.dev/other":              &other,
		"node.alpha.kubernetes.io/ttl": nil, // present: removed
		"berth.dev/absent":             nil, // absent: nothing to do
	})
	if err != nil {
		t.Fatal(err)
	}
	after := e.mustGet(c)
	want := map[string]string{
		"alpha.kubernetes.io/provided-node-ip":                   "10.0.1.23",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"berth.dev/update-state":                                 "trial",
		"berth.dev/other":                                        "x",
	}
	if fmt.Sprint(after.Annotations) != fmt.Sprint(want) {
		t.Errorf("annotations after Annotate = %v, want %v", after.Annotations, want)
	}
	if after.ResourceVersion == before.ResourceVersion || fmt.Sprint(after.Labels) != fmt.Sprint(before.Labels) {
		t.Errorf("after Annotate: resourceVersion %s (was %s), labels %v: want a new version and the labels untouched", after.ResourceVersion, before.ResourceVersion, after.Labels)
	}

	if err := c.Annotate(ctx, map[string]*string{"berth.dev/other": nil}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.mustGet(c).Annotations["berth.dev/other"]; ok {
		t.Error("a nil value did not remove the annotation")
	}

	_, _, calls := e.api.stats()
	if err := c.Annotate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, now := e.api.stats(); now != calls {
		t.Errorf("Annotate with nothing to set made %d requests, want none", now-calls)
	}
}

// TestNotFoundAndForbidden: a Node that does not exist is ErrNotFound; a
// node patching another Node is refused by NodeRestriction, and the
// message says what to check.
func TestNotFoundAndForbidden(t *testing.T) {
	e := setup(t)
	e.api.addNodeNamed("other-node")
	is := e.ca.kubeletClient(e.node)
	e.write("client.pem", append(is.certPEM, is.keyPEM...))
	kc := e.kubeconfig("kubeconfig", e.cluster(), map[string]any{"client-certificate": "client.pem", "client-key": "client.pem"})
	ctx := context.Background()

	missing, err := New(Options{Kubeconfig: kc, NodeName: "no-such-node"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = missing.Get(ctx)
	want := `getting Node no-such-node: GET ` + e.api.srv.URL + `/api/v1/nodes/no-such-node: 404 Not Found: nodes "no-such-node" not found`
	if !errors.Is(err, ErrNotFound) || err.Error() != want {
		t.Errorf("Get of a missing Node: %v, want ErrNotFound reading %q", err, want)
	}
	if err := missing.Annotate(ctx, map[string]*string{"a": nil}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Annotate of a missing Node: %v, want ErrNotFound", err)
	}

	other, err := New(Options{Kubeconfig: kc, NodeName: "other-node"})
	if err != nil {
		t.Fatal(err)
	}
	v := "x"
	err = other.Annotate(ctx, map[string]*string{"a": &v})
	for _, want := range []string{
		"annotating Node other-node: PATCH " + e.api.srv.URL + "/api/v1/nodes/other-node: 403 Forbidden",
		`node "` + e.node + `" is not allowed to modify node "other-node"`,
		`is "other-node" the name kubelet registered?`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Annotate of another Node: %v, want it to contain %q", err, want)
		}
	}
	if errors.Is(err, ErrNotFound) {
		t.Errorf("a 403 is ErrNotFound: %v", err)
	}
}

// TestExecPlugin runs the test binary as an exec credential plugin, as
// kubelet's EKS kubeconfig runs `berth eks-token`.
func TestExecPlugin(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t)
	n := 0
	// plugin returns a client for a kubeconfig running the plugin in mode,
	// and the plugin's state directory.
	plugin := func(mode, expires string, extra map[string]any, opts Options) (*Client, string) {
		t.Helper()
		n++
		state := filepath.Join(e.dir, fmt.Sprintf("state%d", n))
		os.MkdirAll(state, 0o755)
		ex := map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1beta1",
			"command":    self,
			"args":       []string{"eks-token", "--cluster-name", "test"},
			"env": []any{
				map[string]any{"name": "NODEOBJECT_TEST_PLUGIN", "value": mode},
				map[string]any{"name": "PLUGIN_STATE", "value": state},
				map[string]any{"name": "PLUGIN_EXPIRES", "value": expires},
				// Under -race the plugin would sleep a second at exit.
				map[string]any{"name": "GORACE", "value": "atexit_sleep_ms=0"},
			},
			"interactiveMode": "Never",
		}
		for k, v := range extra {
			ex[k] = v
		}
		opts.Kubeconfig = e.kubeconfig(fmt.Sprintf("kubeconfig%d", n), e.cluster(), map[string]any{"exec": ex})
		opts.NodeName = e.node
		if opts.Timeout == 0 {
			// Each run starts this test binary, slow on a busy host.
			opts.Timeout = 2 * time.Minute
		}
		c, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		return c, state
	}
	runs := func(state string) int {
		b, _ := os.ReadFile(filepath.Join(state, "count"))
		n, _ := strconv.Atoi(string(b))
		return n
	}
	ctx := context.Background()

	t.Run("token cached until near expiry", func(t *testing.T) {
		e.api.setTokens("tok-1", "tok-2")
		c, state := plugin("token", "1h", nil, Options{})
		e.mustGet(c)
		e.mustGet(c)
		if got := runs(state); got != 1 {
			t.Errorf("the plugin ran %d times for two requests, want once (cached for its hour)", got)
		}
		info, _ := os.ReadFile(filepath.Join(state, "info-1"))
		// What client-go sets for a v1beta1 plugin without cluster info.
		if want := `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}`; string(info) != want {
			t.Errorf("KUBERNETES_EXEC_INFO = %s, want %s", info, want)
		}

		c, state = plugin("token", "10s", nil, Options{})
		e.mustGet(c)
		e.mustGet(c)
		if got := runs(state); got != 2 {
			t.Errorf("the plugin ran %d times for two requests with a credential expiring in 10s, want twice", got)
		}
	})

	t.Run("401 runs it again once", func(t *testing.T) {
		e.api.setTokens("tok-2")
		c, state := plugin("token", "1h", nil, Options{})
		e.mustGet(c)
		if got := runs(state); got != 2 {
			t.Errorf("the plugin ran %d times, want twice: the first token was refused", got)
		}
		e.api.setTokens()
		_, err := c.Get(ctx)
		if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "exec plugin "+self) {
			t.Errorf("Get with every token refused: %v, want a 401 naming the plugin", err)
		}
		if got := runs(state); got != 3 {
			t.Errorf("after a refused request the plugin had run %d times, want 3: once more, not in a loop", got)
		}
	})

	t.Run("certificate", func(t *testing.T) {
		is := e.ca.kubeletClient(e.node)
		c, state := plugin("cert", "", nil, Options{})
		os.WriteFile(filepath.Join(state, "cert.pem"), is.certPEM, 0o600)
		os.WriteFile(filepath.Join(state, "key.pem"), is.keyPEM, 0o600)
		e.mustGet(c)
		if got := e.lastSerial(); got != is.serial {
			t.Errorf("the API server saw certificate %s, want the plugin's %s", got, is.serial)
		}
	})

	t.Run("provideClusterInfo and a relative command", func(t *testing.T) {
		e.api.setTokens("tok-1")
		if err := os.MkdirAll(filepath.Join(e.dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(self, filepath.Join(e.dir, "bin/plugin")); err != nil {
			t.Fatal(err)
		}
		c, state := plugin("token", "1h", map[string]any{"provideClusterInfo": true, "command": "bin/plugin"}, Options{})
		e.mustGet(c)
		var info struct {
			Spec struct {
				Cluster execCluster `json:"cluster"`
			} `json:"spec"`
		}
		b, _ := os.ReadFile(filepath.Join(state, "info-1"))
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		if info.Spec.Cluster.Server != e.api.srv.URL || string(info.Spec.Cluster.CertificateAuthorityData) != string(e.ca.pem) {
			t.Errorf("KUBERNETES_EXEC_INFO = %s, want the cluster's server and CA", b)
		}
	})

	t.Run("failure", func(t *testing.T) {
		c, _ := plugin("fail", "", nil, Options{})
		_, err := c.Get(ctx)
		if err == nil || !strings.Contains(err.Error(), "exit status 3: eks-token: no instance role credentials") || !strings.Contains(err.Error(), "exec credential plugin "+self) {
			t.Errorf("Get with a failing plugin: %v, want its exit status and stderr", err)
		}
		c, _ = plugin("garbage", "", nil, Options{})
		if _, err := c.Get(ctx); err == nil || !strings.Contains(err.Error(), "decoding its output as an ExecCredential") {
			t.Errorf("Get with a plugin printing garbage: %v", err)
		}
	})

	t.Run("bounded by the timeout", func(t *testing.T) {
		c, _ := plugin("hang", "", nil, Options{Timeout: time.Second})
		start := time.Now()
		_, err := c.Get(ctx)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stopped after") {
			t.Errorf("Get with a hanging plugin: %v, want it stopped at the deadline", err)
		}
		// Generous: the point is that it does not wait out the plugin's
		// ten minutes.
		if d := time.Since(start); d > 2*time.Minute {
			t.Errorf("Get with a hanging plugin took %v", d)
		}
	})
}

// TestKubeconfigFile: a missing kubeconfig is fs.ErrNotExist, before New
// and after; a changed one is read again.
func TestKubeconfigFile(t *testing.T) {
	e := setup(t)
	e.api.setTokens("good-token")
	path := filepath.Join(e.dir, "kubeconfig")

	_, err := New(Options{Kubeconfig: path, NodeName: e.node})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("New without a kubeconfig: %v, want fs.ErrNotExist naming %s", err, path)
	}

	e.kubeconfig("kubeconfig", e.cluster(), map[string]any{"token": "old-token"})
	c := e.client(path)
	if _, err := c.Get(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Get with an unknown token: %v, want 401", err)
	}
	e.kubeconfig("kubeconfig", e.cluster(), map[string]any{"token": "good-token"})
	e.mustGet(c)

	os.Remove(path)
	if _, err := c.Get(context.Background()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get after the kubeconfig was removed: %v, want fs.ErrNotExist", err)
	}

	// The CA file is read by New too.
	kc := e.kubeconfig("noca", map[string]any{"server": e.api.srv.URL, "certificate-authority": "missing-ca.crt"}, map[string]any{"token": "good-token"})
	_, err = New(Options{Kubeconfig: kc, NodeName: e.node})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "clusters[kubernetes].cluster.certificate-authority "+filepath.Join(e.dir, "missing-ca.crt")) {
		t.Errorf("New with a missing CA file: %v, want fs.ErrNotExist naming the field and file", err)
	}
	e.write("notpem.crt", []byte("hello"))
	kc = e.kubeconfig("notpem", map[string]any{"server": e.api.srv.URL, "certificate-authority": "notpem.crt"}, map[string]any{"token": "good-token"})
	if _, err := New(Options{Kubeconfig: kc, NodeName: e.node}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("New with a CA file holding no certificate: %v", err)
	}
}

// TestServerIdentity: tls-server-name and insecure-skip-tls-verify are
// honoured as kubectl honours them.
func TestServerIdentity(t *testing.T) {
	e := setup(t)
	e.api.setTokens("good-token")
	user := map[string]any{"token": "good-token"}

	cl := e.cluster()
	cl["tls-server-name"] = apiServerName
	e.mustGet(e.client(e.kubeconfig("sni", cl, user)))

	cl["tls-server-name"] = "wrong.example"
	if _, err := e.client(e.kubeconfig("wrongname", cl, user)).Get(context.Background()); err == nil || !strings.Contains(err.Error(), "wrong.example") {
		t.Errorf("Get with a tls-server-name the certificate is not for: %v, want a verification error", err)
	}
	if _, err := e.client(e.kubeconfig("noca", map[string]any{"server": e.api.srv.URL}, user)).Get(context.Background()); err == nil || !strings.Contains(err.Error(), "x509") {
		t.Errorf("Get without the cluster CA: %v, want a verification error", err)
	}
	e.mustGet(e.client(e.kubeconfig("insecure", map[string]any{"server": e.api.srv.URL, "insecure-skip-tls-verify": true}, user)))
}

func TestNewChecksOptions(t *testing.T) {
	for _, o := range []struct {
		opts Options
		want string
	}{
		{Options{NodeName: "n"}, "no kubeconfig path"},
		{Options{Kubeconfig: "/k"}, "no node name"},
		{Options{Kubeconfig: "/k", NodeName: "../secrets"}, `node name "../secrets" is not a lowercase DNS subdomain`},
		{Options{Kubeconfig: "/k", NodeName: "Node-A"}, "not a lowercase DNS subdomain"},
		{Options{Kubeconfig: "/k", NodeName: "a..b"}, "not a lowercase DNS subdomain"},
		{Options{Kubeconfig: "/k", NodeName: strings.Repeat("a", 254)}, "longer than 253"},
	} {
		if _, err := New(o.opts); err == nil || !strings.Contains(err.Error(), o.want) {
			t.Errorf("New(%+v): %v, want %q", o.opts, err, o.want)
		}
	}
}

// TestResponses: a body over 4 MiB is refused, and an error body that is
// no Status (a proxy's page) is quoted, shortened, on one line.
func TestResponses(t *testing.T) {
	e := setup(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/huge") {
			w.Write(bytes.Repeat([]byte(" "), maxResponse+1))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "<html>\n<body>%s</body>\n</html>\n", strings.Repeat("bad gateway ", 100))
	}))
	defer srv.Close()
	kc := e.kubeconfig("kubeconfig", map[string]any{"server": srv.URL, "insecure-skip-tls-verify": true}, map[string]any{"token": "t"})
	huge, err := New(Options{Kubeconfig: kc, NodeName: "huge"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := huge.Get(context.Background()); err == nil || !strings.Contains(err.Error(), "the 200 OK response is larger than 4194304 bytes") {
		t.Errorf("Get of a huge response: %v", err)
	}
	gw, err := New(Options{Kubeconfig: kc, NodeName: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gw.Get(context.Background())
	if err == nil || !strings.Contains(err.Error(), "502 Bad Gateway: <html> <body>bad gateway bad gateway") || strings.Contains(err.Error(), "\n") || len(err.Error()) > 400 {
		t.Errorf("Get through a failing proxy: %v", err)
	}
}

// TestConcurrentUse shares a Client between goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	e := setup(t)
	is := e.ca.kubeletClient(e.node)
	e.write("client.pem", append(is.certPEM, is.keyPEM...))
	c := e.client(e.kubeconfig("kubeconfig", e.cluster(), map[string]any{"client-certificate": "client.pem", "client-key": "client.pem"}))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			v := strconv.Itoa(i)
			if err := c.Annotate(context.Background(), map[string]*string{"berth.dev/w" + v: &v}); err != nil {
				errs <- err
				return
			}
			if _, err := c.Get(context.Background()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := e.mustGet(c)
	for i := range 8 {
		if v := strconv.Itoa(i); n.Annotations["berth.dev/w"+v] != v {
			t.Errorf("annotation berth.dev/w%s = %q, want %q", v, n.Annotations["berth.dev/w"+v], v)
		}
	}
}
