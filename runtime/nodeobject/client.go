package nodeobject

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Options say which Node to read and how to reach the API server.
type Options struct {
	// Kubeconfig is the path of kubelet's kubeconfig, e.g.
	// /var/lib/kubelet/kubeconfig.
	Kubeconfig string
	// NodeName is the name kubelet registered the Node with.
	NodeName string
	// Timeout bounds each request, exec plugin run included; 0 means 15s.
	Timeout time.Duration
	// Log receives debug records of requests and credential reloads; nil
	// discards them.
	Log *slog.Logger
}

// defaultTimeout is the per-request timeout when Options.Timeout is 0.
const defaultTimeout = 15 * time.Second

// maxResponse bounds an API server response body; a Node is a few KiB.
const maxResponse = 4 << 20

// ErrNotFound is wrapped by Get's and Annotate's error when the API server
// has no Node of that name (404).
var ErrNotFound = errors.New("node object not found")

// Client reads and annotates one Node. It is safe for concurrent use.
type Client struct {
	path    string
	node    string
	timeout time.Duration
	log     *slog.Logger

	mu sync.Mutex
	cn *conn // from the kubeconfig as last read
}

// conn is everything built from one version of the kubeconfig.
type conn struct {
	info     fs.FileInfo
	rc       *restConfig
	tr       *http.Transport
	hc       *http.Client
	files    *keyPairFiles    // client-certificate and client-key files
	dataCert *tls.Certificate // or the -data fields
	exec     *execPlugin
}

// New checks the options and reads and checks the kubeconfig, and the
// certificate authority it names; it makes no request. A missing
// kubeconfig (kubelet's TLS bootstrap not done yet) gives an error for
// which errors.Is(err, fs.ErrNotExist) holds. The kubeconfig is read again
// whenever it changes, client certificate files whenever kubelet rotates
// them.
func New(o Options) (*Client, error) {
	if o.Kubeconfig == "" {
		return nil, errors.New("node object client: no kubeconfig path")
	}
	if err := checkNodeName(o.NodeName); err != nil {
		return nil, fmt.Errorf("node object client: %w", err)
	}
	c := &Client{path: o.Kubeconfig, node: o.NodeName, timeout: o.Timeout, log: o.Log}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if _, err := c.current(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkNodeName requires a DNS-1123 subdomain, as the API server does for
// Node names, so that the name is one path segment as it stands.
func checkNodeName(name string) error {
	if name == "" {
		return errors.New("no node name")
	}
	if len(name) > 253 {
		return fmt.Errorf("node name %.20q... is longer than 253 characters", name)
	}
	for _, label := range strings.Split(name, ".") {
		ok := label != "" && label[0] != '-' && label[len(label)-1] != '-'
		for _, r := range label {
			ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
		}
		if !ok {
			return fmt.Errorf("node name %q is not a lowercase DNS subdomain", name)
		}
	}
	return nil
}

// current returns the conn for the kubeconfig as it is on disk now.
func (c *Client) current() (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(c.path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	if c.cn != nil && sameFile(fi, c.cn.info) {
		return c.cn, nil
	}
	data, err := readBounded(c.path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	rc, err := parseKubeconfig(c.path, data)
	if err != nil {
		return nil, err
	}
	cn, err := newConn(rc, c.log)
	if err != nil {
		return nil, err
	}
	cn.info = fi
	if c.cn != nil {
		c.cn.tr.CloseIdleConnections()
	}
	c.cn = cn
	c.log.Debug("kubeconfig loaded", "path", c.path, "server", rc.server.String(), "credentials", rc.authDescription())
	if rc.insecure {
		c.log.Warn("kubeconfig skips verifying the API server's certificate (insecure-skip-tls-verify)", "path", c.path, "cluster", rc.clusterName)
	}
	return cn, nil
}

func newConn(rc *restConfig, log *slog.Logger) (*conn, error) {
	cn := &conn{rc: rc}
	tlsConf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         rc.serverName,
		InsecureSkipVerify: rc.insecure, // as kubectl honours it
	}
	if rc.caData != nil || rc.caFile != "" {
		pemData, field := rc.caData, "certificate-authority-data"
		if rc.caFile != "" {
			field = "certificate-authority " + rc.caFile
			var err error
			if pemData, err = readBounded(rc.caFile); err != nil {
				return nil, fmt.Errorf("kubeconfig %s: clusters[%s].cluster.%s: %w", rc.path, rc.clusterName, field, err)
			}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("kubeconfig %s: clusters[%s].cluster.%s: no PEM certificate in it", rc.path, rc.clusterName, field)
		}
		tlsConf.RootCAs = pool
		if rc.exec != nil && rc.exec.ProvideClusterInfo {
			rc.execCluster.CertificateAuthorityData = pemData
		}
	}
	who := fmt.Sprintf("users[%s] in kubeconfig %s", rc.userName, rc.path)
	switch {
	case rc.certFile != "" && rc.keyFile != "":
		cn.files = &keyPairFiles{certFile: rc.certFile, keyFile: rc.keyFile, who: who}
	case rc.certFile != "" || rc.keyFile != "" || rc.certData != nil:
		// Data fields, or one data field and one file: read now.
		certPEM, keyPEM := rc.certData, rc.keyData
		var err error
		if rc.certFile != "" {
			certPEM, err = readBounded(rc.certFile)
		} else if rc.keyFile != "" {
			keyPEM, err = readBounded(rc.keyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("loading client certificate of %s: %w", who, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate of %s: %w", who, err)
		}
		cn.dataCert = &cert
	}
	if rc.exec != nil {
		cn.exec = &execPlugin{cfg: rc.exec, who: who, log: log}
		if rc.exec.ProvideClusterInfo {
			cn.exec.cluster = &rc.execCluster
		}
	}
	tlsConf.GetClientCertificate = cn.clientCertificate
	proxy := http.ProxyFromEnvironment
	if rc.proxy != nil {
		proxy = http.ProxyURL(rc.proxy)
	}
	cn.tr = &http.Transport{
		Proxy:               proxy,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	}
	cn.hc = &http.Client{
		Transport: cn.tr,
		// The API server does not redirect these calls; a redirect would
		// carry the credentials elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return cn, nil
}

// clientCertificate is called in each TLS handshake the server asks for
// a certificate in, so a rotated certificate file is used by the next
// connection.
func (cn *conn) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	switch {
	case cn.files != nil:
		cert, _, err := cn.files.load()
		return cert, err
	case cn.dataCert != nil:
		return cn.dataCert, nil
	case cn.exec != nil:
		if cert := cn.exec.clientCert(); cert != nil {
			return cert, nil
		}
	}
	return &tls.Certificate{}, nil
}

// authorize adds the request's credentials. When the client certificate
// changed, idle connections (made with the old one) are closed so that the
// request makes a new one.
func (cn *conn) authorize(ctx context.Context, req *http.Request) error {
	rc := cn.rc
	if cn.files != nil {
		_, changed, err := cn.files.load()
		if err != nil {
			return err
		}
		if changed {
			cn.tr.CloseIdleConnections()
		}
	}
	if cn.exec != nil {
		token, _, certChanged, err := cn.exec.credentials(ctx)
		if err != nil {
			return err
		}
		if certChanged {
			cn.tr.CloseIdleConnections()
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}
	token := rc.token
	if rc.tokenFile != "" {
		// Read on every request, as the file may be rotated.
		b, err := readBounded(rc.tokenFile)
		if err != nil {
			return fmt.Errorf("reading token of users[%s] in kubeconfig %s: %w", rc.userName, rc.path, err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return fmt.Errorf("reading token of users[%s] in kubeconfig %s: tokenFile %s is empty", rc.userName, rc.path, rc.tokenFile)
		}
	}
	switch {
	case token != "":
		req.Header.Set("Authorization", "Bearer "+token)
	case rc.username != "" || rc.password != "":
		req.SetBasicAuth(rc.username, rc.password)
	}
	return nil
}

func (c *Client) nodeURL(cn *conn) string {
	u := *cn.rc.server
	u.Path += "/api/v1/nodes/" + c.node
	return u.String()
}

// do makes one API request for the Node and returns a 2xx response's body.
func (c *Client) do(ctx context.Context, method, contentType string, body []byte) ([]byte, error) {
	cn, err := c.current()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	target := c.nodeURL(cn)
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, target, err)
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", "berth-nodeobject")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if err := cn.authorize(ctx, req); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, target, err)
		}
		start := time.Now()
		resp, err := cn.hc.Do(req)
		if err != nil {
			// *url.Error names the method and URL.
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
		resp.Body.Close()
		c.log.Debug("node object request", "method", method, "url", target, "status", resp.StatusCode, "took", time.Since(start))
		if err != nil {
			return nil, fmt.Errorf("%s %s: reading the %s response: %w", method, target, resp.Status, err)
		}
		if len(data) > maxResponse {
			return nil, fmt.Errorf("%s %s: the %s response is larger than %d bytes", method, target, resp.Status, maxResponse)
		}
		if resp.StatusCode == http.StatusUnauthorized && cn.exec != nil && attempt == 0 {
			// The plugin's credential may have been revoked before its
			// expiry: run it again, once.
			cn.exec.invalidate()
			continue
		}
		if resp.StatusCode/100 == 2 {
			return data, nil
		}
		return nil, fmt.Errorf("%s %s: %w", method, target, newAPIError(resp, data, cn.rc, c.node))
	}
}

// Get reads the Node. When there is no Node of that name, the error wraps
// ErrNotFound.
func (c *Client) Get(ctx context.Context) (Node, error) {
	data, err := c.do(ctx, http.MethodGet, "", nil)
	if err != nil {
		return Node{}, fmt.Errorf("getting Node %s: %w", c.node, err)
	}
	n, err := decodeNode(data)
	if err != nil {
		return Node{}, fmt.Errorf("getting Node %s: %w", c.node, err)
	}
	if n.Name != c.node {
		return Node{}, fmt.Errorf("getting Node %s: the API server returned Node %q", c.node, n.Name)
	}
	return n, nil
}

// Annotate sets the Node's annotations in set to their values and removes
// those whose value is nil, leaving others alone: a JSON merge patch of
// the Node's metadata.annotations, which NodeRestriction lets a node make
// to its own Node. It makes no request when set is empty.
func (c *Client) Annotate(ctx context.Context, set map[string]*string) error {
	if len(set) == 0 {
		return nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": set}}
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("annotating Node %s: %w", c.node, err)
	}
	if _, err := c.do(ctx, http.MethodPatch, "application/merge-patch+json", body); err != nil {
		return fmt.Errorf("annotating Node %s: %w", c.node, err)
	}
	return nil
}

// apiError is a non-2xx response, with what the API server's Status says.
type apiError struct {
	code   int
	status string // "403 Forbidden"
	reason string // the Status's reason, e.g. NotFound
	msg    string // its message, or the start of a body that is no Status
	hint   string
}

func newAPIError(resp *http.Response, body []byte, rc *restConfig, node string) *apiError {
	e := &apiError{code: resp.StatusCode, status: resp.Status}
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
		Code    int    `json:"code"`
	}
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		e.reason, e.msg = st.Reason, st.Message
	} else {
		s := strings.Join(strings.Fields(string(body)), " ")
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		e.msg = s
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		e.hint = "the API server did not accept the credentials of " + rc.authDescription()
	case http.StatusForbidden:
		e.hint = fmt.Sprintf("the API server refused %s; a node may only read and patch its own Node object: is %q the name kubelet registered?", rc.authDescription(), node)
	}
	return e
}

func (e *apiError) Error() string {
	s := e.status
	switch {
	case e.msg != "":
		s += ": " + e.msg
	case e.reason != "":
		s += ": " + e.reason
	}
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

// Is makes a 404 match ErrNotFound.
func (e *apiError) Is(target error) bool {
	return target == ErrNotFound && e.code == http.StatusNotFound
}
