package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// The test binary doubles as fake control plane components, so Start runs
// end to end (real processes, real ports, real bind failures) in plain `go
// test`. fakeComponentEnv names the component to play.
const fakeComponentEnv = "BERTH_CONTROLPLANE_FAKE_COMPONENT"

func TestMain(m *testing.M) {
	if name := os.Getenv(fakeComponentEnv); name != "" {
		os.Exit(fakeComponent(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeComponentDir writes, for each binary Start runs plus "listener", a
// wrapper that runs this test binary as that fake component. Under -race,
// the fakes skip the race runtime's 1 s pause at exit, which would make
// every Stop take seconds.
func fakeComponentDir(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, b := range append([]string{"listener"}, binaries...) {
		script := fmt.Sprintf("#!/bin/sh\nGORACE=\"$GORACE atexit_sleep_ms=0\" %s=%s exec '%s' \"$@\"\n", fakeComponentEnv, b, self)
		if err := os.WriteFile(filepath.Join(dir, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeComponent plays name with args, as far as Start can tell: it binds
// the ports its flags name, failing as the real program does when one is
// taken (the same Go error text, in that program's log format), serves the
// endpoint Start polls, and checks it was pointed at the right etcd or
// apiserver. It runs until SIGTERM.
func fakeComponent(name string, args []string) int {
	flags := map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[k] = v
		}
	}
	kubeFail := func(err error) int {
		fmt.Fprintf(os.Stderr, "E0101 00:00:00.000000 %7d run.go:72] \"command failed\" err=%q\n", os.Getpid(), err.Error())
		return 1
	}
	kubeListen := func() (net.Listener, int) {
		addr := net.JoinHostPort(flags["bind-address"], flags["secure-port"])
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, kubeFail(fmt.Errorf("failed to create listener: failed to listen on %s: %w", addr, err))
		}
		return ln, 0
	}
	var srv *http.Server
	switch name {
	case "listener":
		// Binds --port and does nothing else; fails like the kube-* do.
		flags["bind-address"], flags["secure-port"] = "127.0.0.1", flags["port"]
		ln, rc := kubeListen()
		if ln == nil {
			return rc
		}
		defer ln.Close()
	case "etcd":
		// etcd binds its peer URL first, then its client URL.
		var lns []net.Listener
		for _, f := range []string{"listen-peer-urls", "listen-client-urls"} {
			ln, err := net.Listen("tcp", strings.TrimPrefix(flags[f], "http://"))
			if err != nil {
				fmt.Fprintf(os.Stderr, `{"level":"fatal","ts":%q,"caller":"etcdmain/etcd.go:204","msg":"discovery failed","error":%q}`+"\n",
					time.Now().Format(time.RFC3339Nano), err.Error())
				return 1
			}
			lns = append(lns, ln)
		}
		defer lns[0].Close()
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"health":"true","reason":""}`) })
		srv = &http.Server{Handler: mux}
		go srv.Serve(lns[1])
	case "kube-apiserver":
		// The etcd it was given must be up: after an etcd restart on fresh
		// ports, that proves the apiserver got the new ones.
		if err := fakeGet(http.DefaultClient, flags["etcd-servers"]+"/health", `"health":"true"`); err != nil {
			return kubeFail(fmt.Errorf("etcd: %w", err))
		}
		ln, rc := kubeListen()
		if ln == nil {
			return rc
		}
		cert, err := tls.LoadX509KeyPair(flags["tls-cert-file"], flags["tls-private-key-file"])
		if err != nil {
			return kubeFail(err)
		}
		caPEM, err := os.ReadFile(flags["client-ca-file"])
		if err != nil {
			return kubeFail(err)
		}
		cas := x509.NewCertPool()
		cas.AppendCertsFromPEM(caPEM)
		// The default ServiceAccount exists once the controller manager
		// has called, as it would once the real one runs.
		var cmCalled atomic.Bool
		srv = &http.Server{
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: cas, ClientAuth: tls.RequireAndVerifyClientCert},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn == "system:kube-controller-manager" {
					cmCalled.Store(true)
				}
				switch {
				case r.URL.Path == "/readyz":
					io.WriteString(w, "ok")
				case r.Method == http.MethodPost:
					w.WriteHeader(http.StatusCreated)
					io.WriteString(w, "{}")
				case strings.HasSuffix(r.URL.Path, "/serviceaccounts/default") && cmCalled.Load():
					io.WriteString(w, `{"metadata":{"name":"default"}}`)
				default:
					http.NotFound(w, r)
				}
			}),
		}
		go srv.ServeTLS(ln, "", "")
	case "kube-controller-manager", "kube-scheduler":
		// Its kubeconfig must reach this control plane's apiserver: after
		// an apiserver restart on a fresh port, that proves the
		// kubeconfigs name the new one.
		client, server, err := fakeKubeconfigClient(flags["kubeconfig"])
		if err != nil {
			return kubeFail(err)
		}
		if err := fakeGet(client, server+"/readyz", "ok"); err != nil {
			return kubeFail(err)
		}
		ln, rc := kubeListen()
		if ln == nil {
			return rc
		}
		ca, err := NewCA("fake-"+name, time.Now())
		if err != nil {
			return kubeFail(err)
		}
		kp, err := ca.Issue(CertSpec{CommonName: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}, time.Now())
		if err != nil {
			return kubeFail(err)
		}
		cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
		if err != nil {
			return kubeFail(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		srv = &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
		go srv.ServeTLS(ln, "", "")
		if name == "kube-controller-manager" {
			// "Run the controllers": tell the apiserver we are here.
			if err := fakeGet(client, server+"/api/v1/namespaces/default/serviceaccounts/default", ""); err != nil && !strings.Contains(err.Error(), "404") {
				return kubeFail(err)
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "no fake component %q\n", name)
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if srv != nil {
		srv.Close()
	}
	return 0
}

// fakeGet bounds its own request: client is the cluster's, shared with its
// CSR approver and node initializer, so its Timeout is not ours to set.
func fakeGet(client *http.Client, url, want string) error {
	bounded := *client
	bounded.Timeout = 5 * time.Second
	resp, err := bounded.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
		return fmt.Errorf("GET %s: %s %.100s", url, resp.Status, b)
	}
	return nil
}

// fakeKubeconfigClient is an HTTPS client for a kubeconfig written by
// kubeconfig(), and its server URL.
func fakeKubeconfigClient(path string) (*http.Client, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var cfg clientcmdv1.Config
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, "", err
	}
	if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
		return nil, "", fmt.Errorf("kubeconfig %s: want one cluster and one user", path)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.Clusters[0].Cluster.CertificateAuthorityData)
	ai := cfg.AuthInfos[0].AuthInfo
	cert, err := tls.X509KeyPair(ai.ClientCertificateData, ai.ClientKeyData)
	if err != nil {
		return nil, "", err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
	return client, cfg.Clusters[0].Cluster.Server, nil
}
