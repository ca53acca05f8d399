package nodeobject

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The kubeconfig v1 types (k8s.io/client-go/tools/clientcmd/api/v1), only
// the fields this package reads. The -data fields are strings, decoded
// here, so that a bad one is reported by its field path.
type (
	kcFile struct {
		Clusters       []kcNamedCluster  `json:"clusters"`
		AuthInfos      []kcNamedAuthInfo `json:"users"`
		Contexts       []kcNamedContext  `json:"contexts"`
		CurrentContext string            `json:"current-context"`
	}
	kcNamedCluster struct {
		Name    string     `json:"name"`
		Cluster *kcCluster `json:"cluster"`
	}
	kcCluster struct {
		Server                   string `json:"server"`
		TLSServerName            string `json:"tls-server-name"`
		InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
		CertificateAuthority     string `json:"certificate-authority"`
		CertificateAuthorityData string `json:"certificate-authority-data"`
		ProxyURL                 string `json:"proxy-url"`
	}
	kcNamedContext struct {
		Name    string     `json:"name"`
		Context *kcContext `json:"context"`
	}
	kcContext struct {
		Cluster  string `json:"cluster"`
		AuthInfo string `json:"user"`
	}
	kcNamedAuthInfo struct {
		Name     string      `json:"name"`
		AuthInfo *kcAuthInfo `json:"user"`
	}
	kcAuthInfo struct {
		ClientCertificate     string          `json:"client-certificate"`
		ClientCertificateData string          `json:"client-certificate-data"`
		ClientKey             string          `json:"client-key"`
		ClientKeyData         string          `json:"client-key-data"`
		Token                 string          `json:"token"`
		TokenFile             string          `json:"tokenFile"`
		Username              string          `json:"username"`
		Password              string          `json:"password"`
		Exec                  *kcExecConfig   `json:"exec"`
		AuthProvider          json.RawMessage `json:"auth-provider"`
	}
	kcExecConfig struct {
		Command            string      `json:"command"`
		Args               []string    `json:"args"`
		Env                []kcExecEnv `json:"env"`
		APIVersion         string      `json:"apiVersion"`
		ProvideClusterInfo bool        `json:"provideClusterInfo"`
		InteractiveMode    string      `json:"interactiveMode"`
	}
	kcExecEnv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
)

// restConfig is what a kubeconfig says about talking to the API server:
// the current context's cluster and user, paths made absolute.
type restConfig struct {
	path        string // the kubeconfig
	clusterName string // clusters[NAME], for error messages
	userName    string // users[NAME], for error messages
	server      *url.URL
	serverName  string
	insecure    bool
	proxy       *url.URL
	caFile      string
	caData      []byte
	certFile    string
	keyFile     string
	certData    []byte
	keyData     []byte
	token       string
	tokenFile   string
	username    string
	password    string
	exec        *kcExecConfig
	execCluster execCluster // for the plugin, when exec.ProvideClusterInfo
}

// execCluster is client.authentication.k8s.io's Cluster, as client-go
// fills it in KUBERNETES_EXEC_INFO.
type execCluster struct {
	Server                   string `json:"server"`
	TLSServerName            string `json:"tls-server-name,omitempty"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	ProxyURL                 string `json:"proxy-url,omitempty"`
}

// Exec credential API versions client-go accepts (v1alpha1 is gone).
const (
	execV1beta1 = "client.authentication.k8s.io/v1beta1"
	execV1      = "client.authentication.k8s.io/v1"
)

// parseKubeconfig decodes a kubeconfig read from path and resolves its
// current context. It reads no other file: paths are only made absolute,
// against the kubeconfig's directory, as client-go does.
func parseKubeconfig(path string, data []byte) (*restConfig, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("kubeconfig %s: "+format, append([]any{path}, a...)...)
	}
	var f kcFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fail("%w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fail("%w", err)
	}
	resolve := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}

	if f.CurrentContext == "" {
		return nil, fail("current-context is not set")
	}
	ctxIdx := -1
	for i, c := range f.Contexts {
		if c.Name == f.CurrentContext {
			if ctxIdx >= 0 {
				return nil, fail("contexts: two entries named %q", c.Name)
			}
			ctxIdx = i
		}
	}
	if ctxIdx < 0 {
		return nil, fail("current-context: no context named %q", f.CurrentContext)
	}
	ctxPath := fmt.Sprintf("contexts[%s].context", f.CurrentContext)
	kctx := f.Contexts[ctxIdx].Context
	if kctx == nil {
		return nil, fail("%s is missing", ctxPath)
	}
	if kctx.Cluster == "" {
		return nil, fail("%s.cluster is not set", ctxPath)
	}
	if kctx.AuthInfo == "" {
		return nil, fail("%s.user is not set", ctxPath)
	}

	var cl *kcCluster
	for _, c := range f.Clusters {
		if c.Name == kctx.Cluster {
			if cl != nil {
				return nil, fail("clusters: two entries named %q", c.Name)
			}
			cl = c.Cluster
			if cl == nil {
				return nil, fail("clusters[%s].cluster is missing", c.Name)
			}
		}
	}
	if cl == nil {
		return nil, fail("%s.cluster: no cluster named %q", ctxPath, kctx.Cluster)
	}
	var ai *kcAuthInfo
	for _, u := range f.AuthInfos {
		if u.Name == kctx.AuthInfo {
			if ai != nil {
				return nil, fail("users: two entries named %q", u.Name)
			}
			ai = u.AuthInfo
			if ai == nil {
				return nil, fail("users[%s].user is missing", u.Name)
			}
		}
	}
	if ai == nil {
		return nil, fail("%s.user: no user named %q", ctxPath, kctx.AuthInfo)
	}

	rc := &restConfig{path: path, clusterName: kctx.Cluster, userName: kctx.AuthInfo}
	clPath := fmt.Sprintf("clusters[%s].cluster", kctx.Cluster)
	if cl.Server == "" {
		return nil, fail("%s.server is not set", clPath)
	}
	u, err := url.Parse(cl.Server)
	if err != nil {
		return nil, fail("%s.server: %w", clPath, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return nil, fail("%s.server: %q is not an http(s) URL with a host", clPath, cl.Server)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fail("%s.server: %q has a query or fragment", clPath, cl.Server)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	rc.server = u
	rc.serverName = cl.TLSServerName
	rc.insecure = cl.InsecureSkipTLSVerify
	if cl.ProxyURL != "" {
		p, err := url.Parse(cl.ProxyURL)
		if err != nil {
			return nil, fail("%s.proxy-url: %w", clPath, err)
		}
		switch p.Scheme {
		case "http", "https", "socks5":
		default:
			return nil, fail("%s.proxy-url: scheme %q is not http, https or socks5", clPath, p.Scheme)
		}
		rc.proxy = p
	}
	if cl.CertificateAuthorityData != "" {
		if rc.caData, err = base64.StdEncoding.DecodeString(cl.CertificateAuthorityData); err != nil {
			return nil, fail("%s.certificate-authority-data: %w", clPath, err)
		}
	} else {
		// client-go: the -data field, when set, wins over the file.
		rc.caFile = resolve(cl.CertificateAuthority)
	}
	if rc.insecure && (rc.caFile != "" || rc.caData != nil) {
		// As client-go refuses it: which of the two was meant is unclear.
		return nil, fail("%s: insecure-skip-tls-verify is set together with a certificate authority", clPath)
	}

	uPath := fmt.Sprintf("users[%s].user", kctx.AuthInfo)
	if len(ai.AuthProvider) > 0 && string(ai.AuthProvider) != "null" {
		return nil, fail("%s.auth-provider: auth provider plugins are not supported", uPath)
	}
	if ai.ClientCertificateData != "" {
		if rc.certData, err = base64.StdEncoding.DecodeString(ai.ClientCertificateData); err != nil {
			return nil, fail("%s.client-certificate-data: %w", uPath, err)
		}
	} else {
		rc.certFile = resolve(ai.ClientCertificate)
	}
	if ai.ClientKeyData != "" {
		if rc.keyData, err = base64.StdEncoding.DecodeString(ai.ClientKeyData); err != nil {
			return nil, fail("%s.client-key-data: %w", uPath, err)
		}
	} else {
		rc.keyFile = resolve(ai.ClientKey)
	}
	hasCert := rc.certData != nil || rc.certFile != ""
	hasKey := rc.keyData != nil || rc.keyFile != ""
	if hasCert != hasKey {
		if hasCert {
			return nil, fail("%s: client-certificate is set but client-key is not", uPath)
		}
		return nil, fail("%s: client-key is set but client-certificate is not", uPath)
	}
	rc.token = ai.Token
	rc.tokenFile = resolve(ai.TokenFile)
	rc.username, rc.password = ai.Username, ai.Password
	if (rc.token != "" || rc.tokenFile != "") && (rc.username != "" || rc.password != "") {
		return nil, fail("%s: more than one authentication method: token and username/password", uPath)
	}

	if e := ai.Exec; e != nil {
		ePath := uPath + ".exec"
		switch {
		case hasCert:
			return nil, fail("%s: an exec plugin cannot be combined with client-certificate", ePath)
		case rc.token != "" || rc.tokenFile != "" || rc.username != "" || rc.password != "":
			return nil, fail("%s: an exec plugin cannot be combined with a token or username/password", ePath)
		case e.Command == "":
			return nil, fail("%s.command is not set", ePath)
		}
		switch e.APIVersion {
		case execV1beta1, execV1:
		case "":
			return nil, fail("%s.apiVersion is not set", ePath)
		default:
			return nil, fail("%s.apiVersion: %q is not %s or %s", ePath, e.APIVersion, execV1beta1, execV1)
		}
		switch e.InteractiveMode {
		case "":
			if e.APIVersion == execV1 {
				return nil, fail("%s.interactiveMode is not set (%s requires it)", ePath, execV1)
			}
		case "Never", "IfAvailable":
			// berth has no terminal: IfAvailable runs non-interactively.
		case "Always":
			return nil, fail("%s.interactiveMode: Always needs a terminal, and berth has none", ePath)
		default:
			return nil, fail("%s.interactiveMode: %q is not Never, IfAvailable or Always", ePath, e.InteractiveMode)
		}
		for i, v := range e.Env {
			if v.Name == "" {
				return nil, fail("%s.env[%d].name is not set", ePath, i)
			}
		}
		ec := *e
		// As client-go: only a command with a path separator is a path.
		if strings.ContainsRune(ec.Command, filepath.Separator) {
			ec.Command = resolve(ec.Command)
		}
		rc.exec = &ec
		rc.execCluster = execCluster{
			Server:                cl.Server,
			TLSServerName:         cl.TLSServerName,
			InsecureSkipTLSVerify: cl.InsecureSkipTLSVerify,
			ProxyURL:              cl.ProxyURL,
		}
	}
	return rc, nil
}

// authDescription names the credential in use, for 401 and 403 messages.
func (rc *restConfig) authDescription() string {
	var what string
	switch {
	case rc.exec != nil:
		what = "exec plugin " + rc.exec.Command
	case rc.certFile != "":
		what = "client certificate " + rc.certFile
		if rc.token != "" || rc.tokenFile != "" {
			what += " and a token"
		}
	case rc.certData != nil:
		what = "client-certificate-data"
	case rc.tokenFile != "":
		what = "tokenFile " + rc.tokenFile
	case rc.token != "":
		what = "token"
	case rc.username != "":
		what = "username/password"
	default:
		what = "no credentials"
	}
	return fmt.Sprintf("users[%s] in kubeconfig %s (%s)", rc.userName, rc.path, what)
}
