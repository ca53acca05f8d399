package nodeobject

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// fakeAPI stands in for kube-apiserver for the two calls this package
// makes, enforcing what the real one does for them: authentication by a
// client certificate of the cluster CA or a bearer token (401 otherwise);
// the Node authorizer and NodeRestriction (a node reads any Node, patches
// only its own, and not its labels here); PATCH only as
// application/merge-patch+json among the types the stand-in knows (415 for
// others, as the real server answers application/json); RFC 7386 merge
// semantics; the result must still be a valid core/v1 Node (422); 404 with
// a Status for a missing Node. Errors are metav1 Status objects.
type fakeAPI struct {
	t   *testing.T
	ca  *testCA
	srv *httptest.Server

	mu      sync.Mutex
	tokens  map[string]string         // bearer token → node name
	first   string                    // the first Node added
	nodes   map[string]map[string]any // by name
	rv      int
	serials []string // client certificate serial per authenticated request
	conns   int      // TLS connections accepted
	calls   int      // requests to /api/v1/nodes/
}

func newFakeAPI(t *testing.T, ca *testCA) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, ca: ca, tokens: map[string]string{}, nodes: map[string]map[string]any{}, rv: 200000}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.EnableHTTP2 = true
	// Handshakes the tests make fail on purpose are not news.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.serving()},
		ClientCAs:    ca.pool(),
		// kube-apiserver asks for a certificate and verifies one if given,
		// but lets a request without one go on to token authentication.
		ClientAuth: tls.VerifyClientCertIfGiven,
	}
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.mu.Lock()
			f.conns++
			f.mu.Unlock()
		}
	}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// setTokens makes the tokens, and only them, valid for the first Node
// added.
func (f *fakeAPI) setTokens(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = map[string]string{}
	for _, t := range tokens {
		f.tokens[t] = f.first
	}
}

// addNode stores the Node in a JSON file.
func (f *fakeAPI) addNode(path string) string {
	f.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	var n map[string]any
	if err := json.Unmarshal(b, &n); err != nil {
		f.t.Fatal(err)
	}
	name := n["metadata"].(map[string]any)["name"].(string)
	f.mu.Lock()
	f.nodes[name] = n
	if f.first == "" {
		f.first = name
	}
	f.mu.Unlock()
	return name
}

func (f *fakeAPI) addNodeNamed(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[name] = map[string]any{
		"kind": "Node", "apiVersion": "v1",
		"metadata": map[string]any{"name": name, "resourceVersion": "7"},
	}
}

func (f *fakeAPI) node(name string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[name]
}

func (f *fakeAPI) stats() (serials []string, conns, calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.serials...), f.conns, f.calls
}

// status writes a metav1 Status as kube-apiserver does.
func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	// Authentication.
	user := ""
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		// Verified against the CA by the TLS stack (VerifyClientCertIfGiven).
		c := r.TLS.PeerCertificates[0]
		if len(c.Subject.Organization) == 1 && c.Subject.Organization[0] == "system:nodes" {
			user = c.Subject.CommonName
		}
		f.mu.Lock()
		f.serials = append(f.serials, c.SerialNumber.String())
		f.mu.Unlock()
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		f.mu.Lock()
		node, known := f.tokens[tok]
		f.mu.Unlock()
		if !known {
			// An invalid token fails the request even with a certificate.
			status(w, 401, "Unauthorized", "Unauthorized")
			return
		}
		if user == "" {
			user = "system:node:" + node
		}
	}
	if user == "" {
		status(w, 401, "Unauthorized", "Unauthorized")
		return
	}
	self, isNode := strings.CutPrefix(user, "system:node:")

	name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
	if !ok || name == "" || strings.Contains(name, "/") {
		status(w, 404, "NotFound", "the server could not find the requested resource")
		return
	}
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if !isNode {
		status(w, 403, "Forbidden", fmt.Sprintf("nodes %q is forbidden: User %q cannot %s resource \"nodes\" in API group \"\" at the cluster scope", name, user, strings.ToLower(r.Method)))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, found := f.nodes[name]
	switch r.Method {
	case http.MethodGet:
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf("nodes %q not found", name))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n)
	case http.MethodPatch:
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch ct {
		case "application/merge-patch+json":
		case "application/json-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml":
			status(w, 500, "InternalError", "the stand-in implements only merge patches")
			return
		default:
			status(w, 415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json, application/apply-patch+cbor")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
		if err != nil {
			status(w, 400, "BadRequest", err.Error())
			return
		}
		var patch any
		if err := json.Unmarshal(body, &patch); err != nil {
			status(w, 400, "BadRequest", "error decoding patch: "+err.Error())
			return
		}
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf("nodes %q not found", name))
			return
		}
		if name != self {
			status(w, 403, "Forbidden", fmt.Sprintf("nodes %q is forbidden: node %q is not allowed to modify node %q", name, self, name))
			return
		}
		merged, ok := mergePatch(deepCopy(n), patch).(map[string]any)
		if !ok {
			status(w, 422, "Invalid", "the patch replaces the Node with a non-object")
			return
		}
		meta, _ := merged["metadata"].(map[string]any)
		if meta == nil || meta["name"] != name {
			status(w, 422, "Invalid", "metadata.name: Invalid value: field is immutable")
			return
		}
		if !reflect.DeepEqual(meta["labels"], n["metadata"].(map[string]any)["labels"]) {
			// NodeRestriction lets kubelet set only some labels; this
			// package never sets any, so the stand-in refuses all.
			status(w, 403, "Forbidden", fmt.Sprintf("nodes %q is forbidden: is not allowed to modify labels", name))
			return
		}
		// What the API server decodes into must still hold it.
		b, _ := json.Marshal(merged)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var typed corev1.Node
		if err := dec.Decode(&typed); err != nil {
			status(w, 422, "Invalid", fmt.Sprintf("Node %q is invalid: %v", name, err))
			return
		}
		f.rv++
		meta["resourceVersion"] = strconv.Itoa(f.rv)
		f.nodes[name] = merged
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(merged)
	default:
		status(w, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
	}
}

// mergePatch is RFC 7386's MergePatch(target, patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// TestMergePatchRFC7386 checks the stand-in's merge against RFC 7386
// Appendix A.
func TestMergePatchRFC7386(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		var target, patch, want any
		for _, x := range []struct {
			s string
			v *any
		}{{c.target, &target}, {c.patch, &patch}, {c.want, &want}} {
			if err := json.Unmarshal([]byte(x.s), x.v); err != nil {
				t.Fatal(err)
			}
		}
		if got := mergePatch(target, patch); !reflect.DeepEqual(got, want) {
			t.Errorf("MergePatch(%s, %s) = %v, want %s", c.target, c.patch, got, c.want)
		}
	}
}

// TestFakeAPIEnforces proves the stand-in refuses what kube-apiserver
// refuses for these calls, with the status codes and Status reasons the
// real one gives.
func TestFakeAPIEnforces(t *testing.T) {
	ca := newTestCA(t)
	f := newFakeAPI(t, ca)
	self := f.addNode("testdata/node.json")
	f.addNodeNamed("other-node")
	f.setTokens("good-token")

	kc := ca.kubeletClient(self)
	cert, err := tls.X509KeyPair(kc.certPEM, kc.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool(), Certificates: []tls.Certificate{cert}}}}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}}
	// A certificate from another CA: the handshake fails.
	otherCA := newTestCA(t)
	okc := otherCA.kubeletClient(self)
	ocert, _ := tls.X509KeyPair(okc.certPEM, okc.keyPEM)
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool(), Certificates: []tls.Certificate{ocert}}}}

	do := func(c *http.Client, method, name, ct, token, body string) (int, string, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+"/api/v1/nodes/"+name, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error(), nil
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		reason, _ := m["reason"].(string)
		return resp.StatusCode, reason, m
	}
	merge := "application/merge-patch+json"
	check := func(what string, code int, reason string, wantCode int, wantReason string) {
		t.Helper()
		if code != wantCode || reason != wantReason {
			t.Errorf("%s: got %d %q, want %d %q", what, code, reason, wantCode, wantReason)
		}
	}

	code, reason, _ := do(noCert, "GET", self, "", "", "")
	check("GET without credentials", code, reason, 401, "Unauthorized")
	code, reason, _ = do(noCert, "GET", self, "", "bad-token", "")
	check("GET with a bad token", code, reason, 401, "Unauthorized")
	code, reason, _ = do(withCert, "GET", self, "", "bad-token", "")
	check("GET with a certificate and a bad token", code, reason, 401, "Unauthorized")
	if code, msg, _ := do(foreign, "GET", self, "", "", ""); code != 0 || !strings.Contains(msg, "certificate") {
		t.Errorf("GET with a certificate of another CA: got %d %q, want a handshake failure", code, msg)
	}
	code, reason, _ = do(noCert, "GET", self, "", "good-token", "")
	check("GET with a good token", code, reason, 200, "")
	code, reason, _ = do(withCert, "GET", "other-node", "", "", "")
	check("GET another Node", code, reason, 200, "")
	code, reason, m := do(withCert, "GET", "no-such-node", "", "", "")
	check("GET a missing Node", code, reason, 404, "NotFound")
	if m["kind"] != "Status" || m["message"] != `nodes "no-such-node" not found` {
		t.Errorf("404 body = %v, want a Status", m)
	}

	code, reason, _ = do(withCert, "PATCH", self, "application/json", "", `{"metadata":{"annotations":{"a":"b"}}}`)
	check("PATCH as application/json", code, reason, 415, "UnsupportedMediaType")
	code, reason, _ = do(withCert, "PATCH", "other-node", merge, "", `{"metadata":{"annotations":{"a":"b"}}}`)
	check("PATCH another Node", code, reason, 403, "Forbidden")
	code, reason, _ = do(withCert, "PATCH", self, merge, "", `{"metadata":{"labels":{"a":"b"}}}`)
	check("PATCH labels", code, reason, 403, "Forbidden")
	code, reason, _ = do(withCert, "PATCH", self, merge, "", `{"metadata":{"annotations":{"a":1}}}`)
	check("PATCH a non-string annotation", code, reason, 422, "Invalid")
	code, reason, _ = do(withCert, "PATCH", self, merge, "", `{"metadata":`)
	check("PATCH malformed JSON", code, reason, 400, "BadRequest")
	code, reason, _ = do(withCert, "PATCH", "no-such-node", merge, "", `{"metadata":{"annotations":{"a":"b"}}}`)
	check("PATCH a missing Node", code, reason, 404, "NotFound")

	code, reason, m = do(withCert, "PATCH", self, merge, "", `{"metadata":{"annotations":{"a":"b","node.alpha.kubernetes.io/ttl":null}}}`)
	check("PATCH annotations", code, reason, 200, "")
	ann := m["metadata"].(map[string]any)["annotations"].(map[string]any)
	if ann["a"] != "b" || ann["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Errorf("after the merge patch annotations = %v, want a=b added and the others kept", ann)
	}
	if _, ok := ann["node.alpha.kubernetes.io/ttl"]; ok {
		t.Errorf("after the merge patch annotations = %v, want node.alpha.kubernetes.io/ttl removed by null", ann)
	}
}
