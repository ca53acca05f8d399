// Package controlplane runs a throwaway Kubernetes control plane on the host
// for berth's QEMU join tests and `make demo`: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, all listening on 127.0.0.1
// only, with a fresh CA, and bootstrap-token auth plus the RBAC kubeadm sets
// up, so a berth node joins it the way an EKS node joins a cluster: from an
// endpoint, a CA and a credential in its user data.
//
// The apiserver advertises 10.0.2.2, the address QEMU's user network gives
// the host as seen from a guest; loopback is refused for the kubernetes
// service endpoints anyway. The apiserver reaches kubelets through an HTTP
// CONNECT proxy in the test process (egress.go), and the control plane
// approves kubelet serving certificates as EKS does (servingcsr.go).
package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
)

// Options configure Start. Zero values take the defaults.
type Options struct {
	// BinDirs are searched in order for etcd, kube-apiserver,
	// kube-controller-manager and kube-scheduler.
	BinDirs []string
	// StateDir holds certificates, kubeconfigs, etcd data and logs; a new
	// temporary directory when empty. It is removed by Stop unless
	// KeepState.
	StateDir  string
	KeepState bool
	// Ports: zero fields get free ports, chosen as each component starts;
	// a component that finds a chosen port taken is restarted on another
	// (see ports.go). Ports given here are used as they are.
	Ports Ports
	// AdvertiseAddress is the apiserver address nodes dial (default
	// 10.0.2.2, the host as QEMU's user network shows it).
	AdvertiseAddress   string
	ServiceCIDR        string
	ClusterCIDR        string
	ExtraAPIServerArgs []string
	// KubeletAddressType is the node address the apiserver dials a
	// kubelet by (--kubelet-preferred-address-types): Hostname (the
	// default) on QEMU's user network, where every node is 10.0.2.15;
	// InternalIP on a virtual network (vnet), where each node has its
	// own, as on EKS. The nodes/<n>/proxy subresource needs InternalIP:
	// the apiserver resolves a Hostname address itself before it dials.
	KubeletAddressType string
	// TokenWebhookURL, when set, registers a token authentication webhook
	// (authentication.k8s.io/v1 TokenReview) with kube-apiserver, as EKS
	// registers its IAM authenticator. Bootstrap tokens keep working: the
	// apiserver asks the webhook only about tokens nothing else accepted.
	// kube-apiserver requires the webhook to be HTTPS.
	TokenWebhookURL string
	// TokenWebhookCA is the PEM CA that signed the webhook's serving
	// certificate.
	TokenWebhookCA []byte
	// ReadyTimeout bounds the whole start, from exec to ready.
	ReadyTimeout time.Duration
	// StopTimeout bounds each component's SIGTERM-to-exit wait.
	StopTimeout time.Duration

	// pickPorts replaces pickFreePorts in tests.
	pickPorts portPicker
}

// Info is what a test or the demo needs to point a node at the cluster; the
// command prints it as JSON.
type Info struct {
	// APIServerEndpoint is the URL as a QEMU guest sees it (NodeConfig
	// spec.cluster.apiServerEndpoint).
	APIServerEndpoint string `json:"apiServerEndpoint"`
	// HostEndpoint is the same apiserver as the host dials it.
	HostEndpoint string `json:"hostEndpoint"`
	// CertificateAuthority is the base64 of the CA PEM (NodeConfig
	// spec.cluster.certificateAuthority).
	CertificateAuthority string `json:"certificateAuthority"`
	BootstrapToken       string `json:"bootstrapToken"`
	ServiceCIDR          string `json:"cidr"`
	ClusterCIDR          string `json:"clusterCIDR"`
	// Kubeconfig is the admin kubeconfig (host endpoint, system:masters).
	Kubeconfig string `json:"kubeconfig"`
	// BootstrapKubeconfig is a kubelet --bootstrap-kubeconfig for a guest
	// (guest endpoint, bootstrap token).
	BootstrapKubeconfig string `json:"bootstrapKubeconfig"`
	StateDir            string `json:"stateDir"`
	LogDir              string `json:"logDir"`
}

// Cluster is a running control plane.
type Cluster struct {
	info   Info
	opts   Options
	log    *slog.Logger
	procs  []*proc // in start order
	client *http.Client
	caPEM  []byte
	pairs  map[string]*KeyPair // leaf certificates by name

	// startFn runs one try of a component; pick chooses ports, never one
	// in avoid (every port this cluster has used or been given).
	startFn func(name string, args []string) (*proc, error)
	pick    portPicker
	avoid   map[int]bool

	// proxy carries the apiserver's kubelet traffic (egress.go);
	// stopApprover ends the serving CSR approver (servingcsr.go) and the
	// node initializer (cloudnode.go), and loops waits for both, so none
	// of their requests outlives Stop.
	proxy        *kubeletProxy
	stopApprover context.CancelFunc
	loops        sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// Binaries are the programs Start runs.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// BinDirsUnder lists the subdirectories of a components directory (as laid
// out by components.mk: kube-<version>/, etcd-<version>/), for
// Options.BinDirs.
func BinDirsUnder(componentsDir string) ([]string, error) {
	ents, err := os.ReadDir(componentsDir)
	if err != nil {
		return nil, fmt.Errorf("listing components directory %s: %w", componentsDir, err)
	}
	var dirs []string
	for _, e := range ents {
		// Stat, not the entry's type: a component directory may be a
		// symlink to a shared build (a second checkout's build/).
		p := filepath.Join(componentsDir, e.Name())
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return dirs, nil
}

func findBinary(dirs []string, name string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %v: run `make components`", name, dirs)
}

func (o *Options) setDefaults() error {
	if o.AdvertiseAddress == "" {
		o.AdvertiseAddress = DefaultAdvertiseAddress
	}
	switch o.KubeletAddressType {
	case "":
		o.KubeletAddressType = "Hostname"
	case "Hostname", "InternalIP":
	default:
		return fmt.Errorf("kubelet address type %q: want Hostname or InternalIP", o.KubeletAddressType)
	}
	if net.ParseIP(o.AdvertiseAddress) == nil {
		return fmt.Errorf("advertise address %q is not an IP address", o.AdvertiseAddress)
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = DefaultClusterCIDR
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.pickPorts == nil {
		o.pickPorts = pickFreePorts
	}
	seen := map[int]string{}
	for name, p := range o.Ports.byName() {
		if p == 0 {
			continue
		}
		if p < 0 || p > 65535 {
			return fmt.Errorf("port %s=%d out of range", name, p)
		}
		if other, dup := seen[p]; dup {
			return fmt.Errorf("ports %s and %s are both %d", other, name, p)
		}
		seen[p] = name
	}
	return nil
}

// byName lists the ports by field name.
func (p Ports) byName() map[string]int {
	return map[string]int{"APIServer": p.APIServer, "Etcd": p.Etcd, "EtcdPeer": p.EtcdPeer, "ControllerManager": p.ControllerManager, "Scheduler": p.Scheduler}
}

// Start generates the PKI, starts the components in order, waits until the
// apiserver is ready and the controllers work, and creates the bootstrap
// token and RBAC. On any failure it stops what it started and the error names
// the component with the tail of its log. ctx bounds the start; when ctx
// ends later, the cluster is stopped.
func Start(ctx context.Context, log *slog.Logger, opts Options) (_ *Cluster, err error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, b := range binaries {
		p, err := findBinary(opts.BinDirs, b)
		if err != nil {
			return nil, err
		}
		bins[b] = p
	}
	if opts.StateDir == "" {
		d, err := os.MkdirTemp("", "berth-controlplane-")
		if err != nil {
			return nil, fmt.Errorf("creating state directory: %w", err)
		}
		opts.StateDir = d
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", opts.StateDir, err)
	}
	opts.StateDir = abs
	l := layout{dir: opts.StateDir}
	c := &Cluster{opts: opts, log: log, pick: opts.pickPorts, avoid: map[int]bool{}}
	for _, p := range opts.Ports.byName() {
		if p != 0 {
			c.avoid[p] = true
		}
	}
	c.startFn = func(name string, args []string) (*proc, error) {
		return startProc(log, name, bins[name], l.log(name), args)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	token, err := NewBootstrapToken()
	if err != nil {
		return nil, err
	}
	if err := c.writePKI(l); err != nil {
		return nil, err
	}

	if opts.TokenWebhookURL != "" {
		wk, err := TokenWebhookKubeconfig(opts.TokenWebhookURL, opts.TokenWebhookCA)
		if err != nil {
			return nil, err
		}
		if err := fsutil.WriteFileAtomic(l.tokenWebhookConfig(), wk, 0o600); err != nil {
			return nil, err
		}
	}

	ec, err := egressSelectorConfig(l.egressSocket())
	if err != nil {
		return nil, err
	}
	if err := fsutil.WriteFileAtomic(l.egressSelectorConfig(), ec, 0o600); err != nil {
		return nil, err
	}
	// A kept state directory may hold the socket of an earlier run.
	if err := os.Remove(l.egressSocket()); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("removing stale egress socket: %w", err)
	}
	if c.proxy, err = startKubeletProxy(ctx, log, l.egressSocket()); err != nil {
		return nil, err
	}

	sctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()

	// Each component's ports are chosen as it starts (launch), and the
	// argv, URLs and files naming them are made after (the closures read
	// c.opts.Ports when called), so a component restarted on fresh ports
	// is found there by everything after it.
	ports := &c.opts.Ports
	etcd := c.newComponent("etcd", func() []string { return etcdArgs(l, c.opts.Ports) }, &ports.Etcd, &ports.EtcdPeer)
	if err := c.launch(etcd); err != nil {
		return nil, err
	}
	if err := c.await(sctx, etcd, "health", func(ctx context.Context) error {
		return c.getOK(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(ports.Etcd)+"/health", `"health":"true"`)
	}); err != nil {
		return nil, err
	}
	api := c.newComponent("kube-apiserver", func() []string { return apiServerArgs(l, c.opts) }, &ports.APIServer)
	if err := c.launch(api); err != nil {
		return nil, err
	}
	if err := c.await(sctx, api, "/readyz", func(ctx context.Context) error {
		return c.getOK(ctx, c.client, c.hostEndpoint()+"/readyz", "ok")
	}); err != nil {
		return nil, err
	}
	host := c.hostEndpoint()
	if err := c.writeKubeconfigs(l, token); err != nil {
		return nil, err
	}
	actx, stopApprover := context.WithCancel(ctx)
	c.stopApprover = stopApprover
	c.loops.Go(func() { c.approveServingCSRs(actx) })
	c.loops.Go(func() { c.initializeNodes(actx) })
	for _, o := range bootstrapObjects(token, time.Now().Add(certValidity)) {
		if err := c.create(sctx, host, o); err != nil {
			return nil, api.proc.failure(err)
		}
	}
	cm := c.newComponent("kube-controller-manager", func() []string { return controllerManagerArgs(l, c.opts) }, &ports.ControllerManager)
	if err := c.launch(cm); err != nil {
		return nil, err
	}
	sched := c.newComponent("kube-scheduler", func() []string { return schedulerArgs(l, c.opts) }, &ports.Scheduler)
	if err := c.launch(sched); err != nil {
		return nil, err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec: self-signed health endpoint on loopback
	if err := c.await(sctx, sched, "/healthz", func(ctx context.Context) error {
		return c.getOK(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(ports.Scheduler)+"/healthz", "ok")
	}); err != nil {
		return nil, err
	}
	// The default ServiceAccount appearing proves the controllers run with
	// working credentials; without it every pod is refused.
	if err := c.await(sctx, cm, "default ServiceAccount", func(ctx context.Context) error {
		return c.getOK(ctx, c.client, host+"/api/v1/namespaces/default/serviceaccounts/default", `"name":"default"`)
	}); err != nil {
		return nil, err
	}
	log.Info("control plane ready", "endpoint", c.info.APIServerEndpoint, "host", host, "state", opts.StateDir, "ports", fmt.Sprintf("%+v", c.opts.Ports))

	go func() {
		<-ctx.Done()
		c.Stop()
	}()
	return c, nil
}

// hostEndpoint is the apiserver URL on the host, at its current port.
func (c *Cluster) hostEndpoint() string {
	return "https://127.0.0.1:" + strconv.Itoa(c.opts.Ports.APIServer)
}

// writeKubeconfigs fills in Info and writes every kubeconfig, once the
// apiserver's port is settled.
func (c *Cluster) writeKubeconfigs(l layout, token BootstrapToken) error {
	host := c.hostEndpoint()
	c.info = Info{
		APIServerEndpoint:    "https://" + net.JoinHostPort(c.opts.AdvertiseAddress, strconv.Itoa(c.opts.Ports.APIServer)),
		HostEndpoint:         host,
		CertificateAuthority: base64.StdEncoding.EncodeToString(c.caPEM),
		BootstrapToken:       token.String(),
		ServiceCIDR:          c.opts.ServiceCIDR,
		ClusterCIDR:          c.opts.ClusterCIDR,
		Kubeconfig:           l.kubeconfig("admin"),
		BootstrapKubeconfig:  l.kubeconfig("bootstrap"),
		StateDir:             c.opts.StateDir,
		LogDir:               l.path("logs"),
	}
	for _, name := range []string{"admin", "controller-manager", "scheduler"} {
		kc, err := kubeconfig(host, name, c.caPEM, c.pairs[name])
		if err != nil {
			return err
		}
		if err := fsutil.WriteFileAtomic(l.kubeconfig(name), kc, 0o600); err != nil {
			return err
		}
	}
	bk, err := BootstrapKubeconfig(c.info)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(c.info.BootstrapKubeconfig, bk, 0o600)
}

func (c *Cluster) getOK(ctx context.Context, client *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(want)) {
		return fmt.Errorf("GET %s: %s: %.200s: %w", url, resp.Status, body, errNotReady)
	}
	return nil
}

// create POSTs an object; one that already exists is fine (a kept state
// directory reused).
func (c *Cluster) create(ctx context.Context, host string, o object) error {
	body, err := json.Marshal(o.Body)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", o.Path, err)
	}
	name := o.Body["metadata"].(map[string]any)["name"]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, host+o.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("creating %s %v: %w", o.Body["kind"], name, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("creating %s %v: %s: %.300s", o.Body["kind"], name, resp.Status, rb)
	}
	return nil
}

// writePKI creates the CA, every leaf certificate, the service account key
// and the admin HTTPS client. The kubeconfigs, which name the apiserver's
// port, come later (writeKubeconfigs).
func (c *Cluster) writePKI(l layout) error {
	now := time.Now()
	for _, d := range []string{"pki", "logs", "etcd", "apiserver", "controller-manager"} {
		if err := os.MkdirAll(l.path(d), 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", l.path(d), err)
		}
	}
	ca, err := NewCA("berth-test-ca", now)
	if err != nil {
		return err
	}
	c.caPEM = ca.CertPEM
	write := func(path string, data []byte, mode os.FileMode) error {
		return fsutil.WriteFileAtomic(path, data, mode)
	}
	if err := write(l.caCert(), ca.CertPEM, 0o644); err != nil {
		return err
	}
	if err := write(l.caKey(), ca.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFrontProxyPKI(l, now); err != nil {
		return err
	}
	serviceIP, err := firstServiceIP(c.opts.ServiceCIDR)
	if err != nil {
		return err
	}
	pairs := map[string]*KeyPair{}
	for name, spec := range certSpecs(c.opts.AdvertiseAddress, serviceIP) {
		kp, err := ca.Issue(spec, now)
		if err != nil {
			return err
		}
		pairs[name] = kp
		if err := write(l.cert(name), kp.CertPEM, 0o644); err != nil {
			return err
		}
		if err := write(l.key(name), kp.KeyPEM, 0o600); err != nil {
			return err
		}
	}
	c.pairs = pairs
	priv, pub, err := NewServiceAccountKey()
	if err != nil {
		return err
	}
	if err := write(l.saKey(), priv, 0o600); err != nil {
		return err
	}
	if err := write(l.saPub(), pub, 0o644); err != nil {
		return err
	}
	admin, err := tls.X509KeyPair(pairs["admin"].CertPEM, pairs["admin"].KeyPEM)
	if err != nil {
		return fmt.Errorf("loading admin key pair: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	c.client = &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      roots,
			Certificates: []tls.Certificate{admin},
		}},
	}
	return nil
}

// Info returns what a node needs to join, and where the admin kubeconfig is.
func (c *Cluster) Info() Info { return c.info }

// Ports are the ports the components listen on, as finally chosen.
func (c *Cluster) Ports() Ports { return c.opts.Ports }

// Kubeconfig is the path of the admin kubeconfig (system:masters, host
// endpoint).
func (c *Cluster) Kubeconfig() string { return c.info.Kubeconfig }

// Client is an HTTPS client that trusts the cluster CA and authenticates as
// the admin, for raw API requests against Info().HostEndpoint.
func (c *Cluster) Client() *http.Client { return c.client }

// RouteKubelet makes the apiserver's connections to node's kubelet
// (kubectl logs, exec, attach, port-forward, debug) go to
// 127.0.0.1:hostPort, the node VM's hostfwd to its port 10250. Until a node
// is routed, the proxy answers the apiserver 502 naming the target.
func (c *Cluster) RouteKubelet(node string, hostPort int) error {
	return c.proxy.route(node, hostPort)
}

// RouteKubeletVia makes the apiserver's connections to a kubelet go to
// addr (the node's IP and port 10250) through dial: a node on a virtual
// network (vnet) that the host has no route to. node is the address the
// apiserver names it by (KubeletAddressType): its InternalIP there.
func (c *Cluster) RouteKubeletVia(node, addr string, dial DialFunc) error {
	return c.proxy.routeVia(node, addr, dial)
}

// RoutePodsVia makes the apiserver's connections to an IP in prefix (a
// pod IP: pods/services proxy, webhooks and aggregated APIs dialled by
// endpoint) go to that address through dial, the virtual network the pods
// are reached on (vnet.Network.DialContext, its gateway routing each
// node's pod CIDR to the node: RouteNodePods). A target in no routed
// prefix gets a 502 that names it.
func (c *Cluster) RoutePodsVia(prefix netip.Prefix, dial DialFunc) error {
	return c.proxy.routeNet(prefix, dial)
}

// Stop stops the components in reverse start order, each bounded by
// StopTimeout, then removes the state directory unless KeepState. It is safe
// to call more than once and from several goroutines.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	var errs []error
	if c.stopApprover != nil {
		c.stopApprover()
		c.loops.Wait()
	}
	if c.proxy != nil {
		if err := c.proxy.close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the egress proxy: %w", err))
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].stop(c.opts.StopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.opts.KeepState && c.opts.StateDir != "" {
		if err := os.RemoveAll(c.opts.StateDir); err != nil {
			errs = append(errs, fmt.Errorf("removing state directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// getJSON GETs url with the admin client and decodes the answer into out.
func (c *Cluster) getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
	}
	return json.Unmarshal(body, out)
}
