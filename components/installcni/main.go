// Command install-cni is the node's CNI installer, run by a DaemonSet as
// aws-node's init container and Cilium's install-cni do: it copies the CNI
// plugins from its image into the host's /opt/cni/bin, reads the node's pod
// CIDR from the API server and writes a bridge conflist for it into the
// host's /etc/cni/net.d. The node turns Ready only then: kubelet reports
// NetworkReady=false while /etc/cni/net.d is empty.
//
// It then stays running, putting back every few seconds whatever was
// removed or changed (a plugin, the conflist), and exits 0 on SIGTERM.
//
// The environment: NODE_NAME (downward API spec.nodeName),
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (the API server), and
// the service account's token and CA at their usual path. Host directories
// are mounted at /host/opt/cni/bin and /host/etc/cni/net.d.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
)

// config is where the installer reads and writes, and how often.
type config struct {
	nodeName string
	apiHost  string
	apiPort  string
	saDir    string
	srcDir   string // the plugins in the image
	binDir   string // the host's /opt/cni/bin
	netDir   string // the host's /etc/cni/net.d
	// plugins are the files of srcDir to install, the ones the conflist
	// uses (loopback is kubelet's, for every pod's lo).
	plugins []string
	// poll is the wait between asks for the pod CIDR; recheck the wait
	// between checks that the installed files are still in place.
	poll    time.Duration
	recheck time.Duration
}

func configFromEnv(getenv func(string) string) (config, error) {
	c := config{
		nodeName: getenv("NODE_NAME"),
		apiHost:  getenv("KUBERNETES_SERVICE_HOST"),
		apiPort:  getenv("KUBERNETES_SERVICE_PORT"),
		saDir:    "/var/run/secrets/kubernetes.io/serviceaccount",
		srcDir:   "/cni/bin",
		binDir:   "/host/opt/cni/bin",
		netDir:   "/host/etc/cni/net.d",
		plugins:  []string{"bridge", "host-local", "loopback", "portmap"},
		poll:     2 * time.Second,
		recheck:  5 * time.Second,
	}
	if c.nodeName == "" {
		return c, fmt.Errorf("NODE_NAME is empty: set it from the downward API (fieldRef spec.nodeName)")
	}
	return c, nil
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := configFromEnv(os.Getenv)
	if err == nil {
		err = run(ctx, log, cfg)
	}
	if err != nil {
		log.Error("install-cni failed", "err", err)
		os.Exit(1)
	}
	log.Info("stopping on signal; the installed plugins and conflist stay")
}

// run installs, then keeps the installation in place until ctx ends. An
// error before the first install is fatal (the pod restarts, and its
// status shows why); later ones are logged and retried.
func run(ctx context.Context, log *slog.Logger, cfg config) error {
	api, err := newAPIClient(cfg.apiHost, cfg.apiPort, cfg.saDir)
	if err != nil {
		return err
	}
	log.Info("starting", "node", cfg.nodeName, "apiServer", api.base)
	cidr, err := waitPodCIDR(ctx, log, cfg, api)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	conf, err := renderConflist(cidr)
	if err != nil {
		return err
	}
	log.Info("node has its pod CIDR", "node", cfg.nodeName, "podCIDR", cidr.String())
	if err := ensure(log, cfg, conf); err != nil {
		return err
	}
	log.Info("CNI installed; checking every "+cfg.recheck.String()+" that it stays in place", "plugins", cfg.binDir, "conflist", cfg.netDir+"/"+conflistName)
	t := time.NewTicker(cfg.recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := ensure(log, cfg, conf); err != nil {
			log.Warn("reinstalling failed; retrying", "err", err)
		}
	}
}

// waitPodCIDR asks for the node until the controller manager has set its
// pod CIDR, logging each new reason to wait once.
func waitPodCIDR(ctx context.Context, log *slog.Logger, cfg config, api *apiClient) (netip.Prefix, error) {
	last := ""
	for {
		data, err := api.node(ctx, cfg.nodeName)
		if err == nil {
			var cidr netip.Prefix
			if cidr, err = parseNode(data, cfg.nodeName); err == nil {
				return cidr, nil
			}
			if !errors.Is(err, errNoPodCIDR) {
				return netip.Prefix{}, err
			}
		}
		if msg := err.Error(); msg != last {
			log.Info("waiting for the node's pod CIDR", "node", cfg.nodeName, "reason", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return netip.Prefix{}, ctx.Err()
		case <-time.After(cfg.poll):
		}
	}
}

// ensure puts the plugins and the conflist in place, logging what it had to
// do; with everything in place it does and logs nothing.
func ensure(log *slog.Logger, cfg config, conf []byte) error {
	copied, err := installPlugins(cfg.plugins, cfg.srcDir, cfg.binDir)
	if err != nil {
		return err
	}
	for _, n := range copied {
		log.Info("installed CNI plugin", "plugin", n, "dir", cfg.binDir)
	}
	wrote, err := ensureConflist(cfg.netDir, conf, fsutil.WriteFileAtomic)
	if err != nil {
		return err
	}
	if wrote {
		log.Info("wrote CNI conflist", "path", cfg.netDir+"/"+conflistName)
	}
	return nil
}
