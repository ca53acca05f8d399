package nodeobject

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// keyPairFiles is a client certificate and key read from files that
// kubelet rotates: kubelet-client-current.pem is a symlink, re-pointed at a
// new file holding both. The files are stat'ed on every use and re-read
// when either changed, so a rotation needs no restart.
type keyPairFiles struct {
	certFile, keyFile string
	who               string // users[x] in kubeconfig y

	mu                sync.Mutex
	certInfo, keyInfo fs.FileInfo
	cert              *tls.Certificate
}

func sameFile(a, b fs.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// load returns the key pair, and whether it was re-read since the last
// call (true on the first).
func (k *keyPairFiles) load() (*tls.Certificate, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fail := func(err error) (*tls.Certificate, bool, error) {
		return nil, false, fmt.Errorf("loading client certificate %s and key %s of %s: %w", k.certFile, k.keyFile, k.who, err)
	}
	// Stat before reading: a change between the two is seen at the next
	// stat, so the worst case is one extra read.
	ci, err := os.Stat(k.certFile)
	if err != nil {
		return fail(err)
	}
	ki, err := os.Stat(k.keyFile)
	if err != nil {
		return fail(err)
	}
	if k.cert != nil && sameFile(ci, k.certInfo) && sameFile(ki, k.keyInfo) {
		return k.cert, false, nil
	}
	certPEM, err := readBounded(k.certFile)
	if err != nil {
		return fail(err)
	}
	keyPEM := certPEM
	if k.keyFile != k.certFile {
		if keyPEM, err = readBounded(k.keyFile); err != nil {
			return fail(err)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fail(err)
	}
	k.cert, k.certInfo, k.keyInfo = &cert, ci, ki
	return k.cert, true, nil
}

// maxFileSize bounds the files a kubeconfig names (certificates, keys,
// tokens) and the kubeconfig itself.
const maxFileSize = 1 << 20

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileSize)
	}
	return b, nil
}

// execPlugin runs a kubeconfig's exec credential plugin as client-go does
// (never interactively) and caches what it returns until it expires.
type execPlugin struct {
	cfg     *kcExecConfig
	cluster *execCluster // nil unless provideClusterInfo
	who     string
	log     *slog.Logger

	mu    sync.Mutex
	have  bool
	token string
	cert  *tls.Certificate
	exp   time.Time // zero: until the API server refuses it
}

// execRefreshMargin is how long before its expiry a credential is
// replaced, so a request never carries one that expires in flight.
const execRefreshMargin = 30 * time.Second

// maxPluginOutput bounds what is kept of the plugin's stdout and stderr.
const maxPluginOutput = 1 << 20

// credentials returns the plugin's current token and certificate,
// running the plugin when there are none or they are about to expire.
// certChanged reports a new certificate replacing an old one.
func (p *execPlugin) credentials(ctx context.Context) (token string, cert *tls.Certificate, certChanged bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.have && (p.exp.IsZero() || time.Now().Before(p.exp.Add(-execRefreshMargin))) {
		return p.token, p.cert, false, nil
	}
	tok, c, exp, err := p.run(ctx)
	if err != nil {
		return "", nil, false, err
	}
	certChanged = p.cert != nil && (c == nil || !bytes.Equal(c.Certificate[0], p.cert.Certificate[0]))
	p.have, p.token, p.cert, p.exp = true, tok, c, exp
	return tok, c, certChanged, nil
}

// clientCert is the certificate the plugin last returned, if any.
func (p *execPlugin) clientCert() *tls.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cert
}

// invalidate drops the cached credential after the API server refused it.
func (p *execPlugin) invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.have = false
}

// execInfo is the ExecCredential client-go passes in KUBERNETES_EXEC_INFO.
type execInfo struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Spec       struct {
		Cluster     *execCluster `json:"cluster,omitempty"`
		Interactive bool         `json:"interactive"`
	} `json:"spec"`
}

// execCredential is what the plugin prints.
type execCredential struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Status     *struct {
		ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
		Token                 string     `json:"token"`
		ClientCertificateData string     `json:"clientCertificateData"`
		ClientKeyData         string     `json:"clientKeyData"`
	} `json:"status"`
}

func (p *execPlugin) run(ctx context.Context) (string, *tls.Certificate, time.Time, error) {
	var none time.Time
	fail := func(format string, a ...any) (string, *tls.Certificate, time.Time, error) {
		return "", nil, none, fmt.Errorf("exec credential plugin %s of %s: "+format, append([]any{p.cfg.Command, p.who}, a...)...)
	}
	info := execInfo{Kind: "ExecCredential", APIVersion: p.cfg.APIVersion}
	info.Spec.Cluster = p.cluster
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return fail("encoding KUBERNETES_EXEC_INFO: %w", err)
	}
	cmd := exec.CommandContext(ctx, p.cfg.Command, p.cfg.Args...)
	// As client-go: berth's environment, the kubeconfig's env, then the
	// exec info; the last of a name wins.
	cmd.Env = os.Environ()
	for _, e := range p.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(infoJSON))
	var stdout, stderr capped
	stdout.max, stderr.max = maxPluginOutput, maxPluginOutput
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A plugin's own children may hold its pipes open after it is killed.
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	err = cmd.Run()
	if msg := stderr.tail(); msg != "" {
		p.log.Debug("exec credential plugin stderr", "command", p.cfg.Command, "stderr", msg)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fail("stopped after %v: %w", time.Since(start).Round(time.Millisecond), ctxErr)
		}
		if msg := stderr.tail(); msg != "" {
			return fail("%w: %s", err, msg)
		}
		return fail("%w", err)
	}
	if stdout.over {
		return fail("printed more than %d bytes", maxPluginOutput)
	}
	var cred execCredential
	if err := json.Unmarshal(stdout.b.Bytes(), &cred); err != nil {
		return fail("decoding its output as an ExecCredential: %w", err)
	}
	if cred.Kind != "ExecCredential" || cred.APIVersion != p.cfg.APIVersion {
		return fail("printed kind %q apiVersion %q, want ExecCredential %s", cred.Kind, cred.APIVersion, p.cfg.APIVersion)
	}
	st := cred.Status
	switch {
	case st == nil:
		return fail("printed no status")
	case st.Token == "" && st.ClientCertificateData == "" && st.ClientKeyData == "":
		return fail("printed neither a token nor a certificate and key")
	case (st.ClientCertificateData == "") != (st.ClientKeyData == ""):
		return fail("printed only one of clientCertificateData and clientKeyData")
	}
	var cert *tls.Certificate
	if st.ClientCertificateData != "" {
		c, err := tls.X509KeyPair([]byte(st.ClientCertificateData), []byte(st.ClientKeyData))
		if err != nil {
			return fail("status.clientCertificateData/clientKeyData: %w", err)
		}
		if c.Leaf == nil {
			if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
				return fail("status.clientCertificateData: %w", err)
			}
		}
		cert = &c
	}
	exp := none
	if st.ExpirationTimestamp != nil {
		exp = *st.ExpirationTimestamp
	}
	p.log.Debug("exec credential plugin ran", "command", p.cfg.Command, "took", time.Since(start), "expires", exp)
	return st.Token, cert, exp, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.b.Len(); room < len(p) {
		p = p[:max(room, 0)]
		c.over = true
	}
	c.b.Write(p)
	return n, nil
}

// tail is the end of what was written, on one line, for an error message.
func (c *capped) tail() string {
	s := strings.TrimSpace(c.b.String())
	if len(s) > 1024 {
		s = "..." + s[len(s)-1024:]
	}
	return strings.Join(strings.Fields(s), " ")
}
