package controlplane

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Defaults for Options fields left zero.
const (
	DefaultAdvertiseAddress = "10.0.2.2"
	DefaultServiceCIDR      = "10.96.0.0/12"
	DefaultClusterCIDR      = "10.244.0.0/16"
	DefaultReadyTimeout     = 3 * time.Minute
	DefaultStopTimeout      = 15 * time.Second
)

// Ports are the TCP ports the components listen on, all on 127.0.0.1.
type Ports struct {
	APIServer         int
	Etcd              int
	EtcdPeer          int
	ControllerManager int
	Scheduler         int
}

// layout names every file in the state directory; one place, so the argv
// builders and the writer agree.
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}
func (l layout) caCert() string           { return l.path("pki", "ca.crt") }
func (l layout) caKey() string            { return l.path("pki", "ca.key") }
func (l layout) frontProxyCACert() string { return l.path("pki", "front-proxy-ca.crt") }
func (l layout) frontProxyCAKey() string  { return l.path("pki", "front-proxy-ca.key") }
func (l layout) saKey() string            { return l.path("pki", "sa.key") }
func (l layout) saPub() string            { return l.path("pki", "sa.pub") }
func (l layout) cert(n string) string     { return l.path("pki", n+".crt") }
func (l layout) key(n string) string      { return l.path("pki", n+".key") }
func (l layout) kubeconfig(n string) string {
	return l.path(n + ".kubeconfig")
}
func (l layout) log(n string) string { return l.path("logs", n+".log") }
func (l layout) tokenWebhookConfig() string {
	return l.path("token-webhook.kubeconfig")
}
func (l layout) egressSelectorConfig() string { return l.path("egress-selector.yaml") }
func (l layout) egressSocket() string         { return l.path("egress.sock") }

// certSpecs lists the leaf certificates the control plane needs, by file
// name. The apiserver's serving certificate names every address a client
// may dial: loopback on the host, the advertise address from a QEMU guest,
// and the first service IP from pods.
func certSpecs(advertise string, serviceIP net.IP) map[string]CertSpec {
	return map[string]CertSpec{
		"apiserver": {
			CommonName: "kube-apiserver",
			DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPs:        []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(advertise), serviceIP},
			Server:     true,
		},
		"apiserver-kubelet-client": {CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
		"admin":                    {CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true},
		"controller-manager":       {CommonName: "system:kube-controller-manager", Client: true},
		"scheduler":                {CommonName: "system:kube-scheduler", Client: true},
	}
}

// firstServiceIP is the kubernetes service's ClusterIP: the first address of
// the service range.
func firstServiceIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("service CIDR %q: only IPv4 is supported", cidr)
	}
	out := make(net.IP, 4)
	copy(out, ip)
	out[3]++
	return out, nil
}

func etcdArgs(l layout, p Ports) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(p.Etcd)
	peer := "http://127.0.0.1:" + strconv.Itoa(p.EtcdPeer)
	return []string{
		"--name=berth-test",
		"--data-dir=" + l.path("etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=berth-test=" + peer,
		// A throwaway test store: durability buys nothing and fsync is slow
		// on shared CI disks.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

func apiServerArgs(l layout, o Options) []string {
	args := []string{
		"--advertise-address=" + o.AdvertiseAddress,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.Ports.APIServer),
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(o.Ports.Etcd),
		"--cert-dir=" + l.path("apiserver"),
		"--tls-cert-file=" + l.cert("apiserver"),
		"--tls-private-key-file=" + l.key("apiserver"),
		"--client-ca-file=" + l.caCert(),
		"--kubelet-client-certificate=" + l.cert("apiserver-kubelet-client"),
		"--kubelet-client-key=" + l.key("apiserver-kubelet-client"),
		// Kubelet traffic goes through the test's CONNECT proxy to each
		// VM's hostfwd, named by the node's Hostname address, or to each
		// node's InternalIP on a virtual network (egress.go).
		"--egress-selector-config-file=" + l.egressSelectorConfig(),
		"--kubelet-preferred-address-types=" + o.KubeletAddressType,
		"--enable-bootstrap-token-auth=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + l.saPub(),
		"--service-account-signing-key-file=" + l.saKey(),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
		// Front-proxy (requestheader) authentication, kubeadm's flags: the
		// aggregator proxies a request to an aggregated API server (the e2e
		// suite's sample-apiserver) with the user in the X-Remote-* headers,
		// presenting the front-proxy-client certificate; the aggregated
		// server believes those headers from a client the requestheader CA
		// signed under an allowed name. kube-apiserver publishes the CA and
		// the header names in kube-system/extension-apiserver-authentication,
		// where the aggregated server reads them. writeFrontProxyPKI writes
		// the files.
		"--requestheader-client-ca-file=" + l.frontProxyCACert(),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + l.cert(frontProxyClientName),
		"--proxy-client-key-file=" + l.key(frontProxyClientName),
		// This kube-apiserver runs on the host, outside every node's
		// kube-proxy, so a Service's ClusterIP leads nowhere from it: it
		// dials aggregated API servers and admission (and conversion)
		// webhooks at their Service's endpoints, pod IPs, which the egress
		// proxy routes into the nodes' network. One resolver serves both
		// (buildServiceResolver in cmd/kube-apiserver).
		"--enable-aggregator-routing=true",
	}
	if o.TokenWebhookURL != "" {
		args = append(args,
			"--authentication-token-webhook-config-file="+l.tokenWebhookConfig(),
			"--authentication-token-webhook-version=v1",
		)
	}
	return append(args, o.ExtraAPIServerArgs...)
}

func controllerManagerArgs(l layout, o Options) []string {
	kc := l.kubeconfig("controller-manager")
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.Ports.ControllerManager),
		"--cert-dir=" + l.path("controller-manager"),
		"--leader-elect=false",
		// bootstrapsigner and tokencleaner are off by default; TLS
		// bootstrap of kubelets needs the CSR signer and approver, which
		// sign with the cluster CA. "*" keeps every default-on
		// controller the add-ons need: serviceaccount-token (their
		// tokens), daemonset, deployment, replicaset, endpointslice
		// (kube-proxy's and CoreDNS's view of Services) and nodeipam
		// (spec.podCIDR, which install-cni waits for).
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--cluster-signing-cert-file=" + l.caCert(),
		"--cluster-signing-key-file=" + l.caKey(),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + l.saKey(),
		"--root-ca-file=" + l.caCert(),
		// A /24 of the cluster CIDR per node (the IPv4 default, named so
		// the per-node range the tests expect does not hang on it):
		// install-cni's host-local range is the node's spec.podCIDR.
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + o.ClusterCIDR,
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + o.ServiceCIDR,
	}
}

func schedulerArgs(l layout, o Options) []string {
	kc := l.kubeconfig("scheduler")
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.Ports.Scheduler),
		"--leader-elect=false",
	}
}

// kubeconfig renders a client-certificate kubeconfig with embedded data, so
// the file works when copied elsewhere.
func kubeconfig(server, user string, caPEM []byte, kp *KeyPair) ([]byte, error) {
	cfg := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		CurrentContext: user,
		Clusters: []clientcmdv1.NamedCluster{{
			Name:    "berth-test",
			Cluster: clientcmdv1.Cluster{Server: server, CertificateAuthorityData: caPEM},
		}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{
			Name:     user,
			AuthInfo: clientcmdv1.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM},
		}},
		Contexts: []clientcmdv1.NamedContext{{
			Name:    user,
			Context: clientcmdv1.Context{Cluster: "berth-test", AuthInfo: user},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig for %s: %w", user, err)
	}
	return b, nil
}

// TokenWebhookKubeconfig is the file kube-apiserver's
// --authentication-token-webhook-config-file takes: a kubeconfig whose
// cluster is the webhook (server URL and the CA of its serving
// certificate). The apiserver authenticates to the webhook with nothing.
func TokenWebhookKubeconfig(url string, caPEM []byte) ([]byte, error) {
	if !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("token webhook URL %q: kube-apiserver requires https", url)
	}
	if len(caPEM) == 0 {
		return nil, fmt.Errorf("token webhook %s: no CA given for its serving certificate", url)
	}
	cfg := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		CurrentContext: "webhook",
		Clusters: []clientcmdv1.NamedCluster{{
			Name:    "token-webhook",
			Cluster: clientcmdv1.Cluster{Server: url, CertificateAuthorityData: caPEM},
		}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "apiserver"}},
		Contexts: []clientcmdv1.NamedContext{{
			Name:    "webhook",
			Context: clientcmdv1.Context{Cluster: "token-webhook", AuthInfo: "apiserver"},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding token webhook kubeconfig: %w", err)
	}
	return b, nil
}

// BootstrapToken is a kubeadm-style bootstrap token: ID "[a-z0-9]{6}" and
// secret "[a-z0-9]{16}", presented as "ID.SECRET".
type BootstrapToken struct {
	ID, Secret string
}

func (t BootstrapToken) String() string { return t.ID + "." + t.Secret }

// NewBootstrapToken draws a random token.
func NewBootstrapToken() (BootstrapToken, error) {
	id, err := randomToken(6)
	if err != nil {
		return BootstrapToken{}, err
	}
	secret, err := randomToken(16)
	if err != nil {
		return BootstrapToken{}, err
	}
	return BootstrapToken{ID: id, Secret: secret}, nil
}

func randomToken(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating bootstrap token: %w", err)
	}
	for i := range b {
		// 256 % 36 = 4: a negligible bias for a throwaway test token.
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b), nil
}

// object is one API object to create after the apiserver is ready.
type object struct {
	// Path is the collection URL path the object is POSTed to.
	Path string
	Body map[string]any
}

// bootstrapObjects are what a kubelet needs to join with a bootstrap token:
// the token Secret (read by the apiserver's bootstrap authenticator) and the
// ClusterRoleBindings kubeadm creates so system:bootstrappers may create
// CSRs and have them auto-approved, and nodes may renew their certificates.
func bootstrapObjects(t BootstrapToken, expires time.Time) []object {
	secret := object{
		Path: "/api/v1/namespaces/kube-system/secrets",
		Body: map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata":   map[string]any{"name": "bootstrap-token-" + t.ID, "namespace": "kube-system"},
			"type":       "bootstrap.kubernetes.io/token",
			"stringData": map[string]string{
				"description":                    "berth local control plane",
				"token-id":                       t.ID,
				"token-secret":                   t.Secret,
				"expiration":                     expires.UTC().Format(time.RFC3339),
				"usage-bootstrap-authentication": "true",
				"usage-bootstrap-signing":        "true",
				"auth-extra-groups":              "system:bootstrappers:kubeadm:default-node-token",
			},
		},
	}
	binding := func(name, role, group string) object {
		return object{
			Path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
			Body: map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1",
				"kind":       "ClusterRoleBinding",
				"metadata":   map[string]any{"name": name},
				"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
				"subjects":   []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}},
			},
		}
	}
	return []object{
		secret,
		binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "system:bootstrappers"),
		binding("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"),
		binding("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
	}
}

// BootstrapKubeconfig renders the kubeconfig a node's kubelet uses for TLS
// bootstrap (--bootstrap-kubeconfig): the guest-side endpoint, the CA, and
// the bootstrap token. Tests that do not go through NodeConfig use it as is.
func BootstrapKubeconfig(info Info) ([]byte, error) {
	ca, err := base64.StdEncoding.DecodeString(info.CertificateAuthority)
	if err != nil {
		return nil, fmt.Errorf("bootstrap kubeconfig: certificateAuthority is not base64: %w", err)
	}
	cfg := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		CurrentContext: "kubelet-bootstrap",
		Clusters: []clientcmdv1.NamedCluster{{
			Name:    "berth-test",
			Cluster: clientcmdv1.Cluster{Server: info.APIServerEndpoint, CertificateAuthorityData: ca},
		}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{
			Name:     "kubelet-bootstrap",
			AuthInfo: clientcmdv1.AuthInfo{Token: info.BootstrapToken},
		}},
		Contexts: []clientcmdv1.NamedContext{{
			Name:    "kubelet-bootstrap",
			Context: clientcmdv1.Context{Cluster: "berth-test", AuthInfo: "kubelet-bootstrap"},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding bootstrap kubeconfig: %w", err)
	}
	return b, nil
}
