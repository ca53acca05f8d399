// Command demo is the demo pod's program on a berth node: it prints one line
// at start (visible with kubectl logs) and serves HTTP, answering every
// request with its hostname (the pod name), so a demo or test can see the pod
// is really running. It exits 0 on SIGTERM or SIGINT, DEMO_STOP_DELAY after
// it when that is set. "demo hostcheck" is
// the host-contract test's pod-side probe (hostcheck.go); "demo cat FILE..."
// prints files, for kubectl exec and kubectl debug node (cat.go).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	// The host-contract test runs the same image as its probe: "hostcheck"
	// in the pod, "probe-version" on the host after the pod copied it into
	// /opt/cni/bin.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "hostcheck":
			if err := hostcheck(os.Stdout); err != nil {
				log.Error("hostcheck failed", "err", err)
				os.Exit(1)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			<-ctx.Done()
			stop()
			return
		case "probe-version":
			fmt.Println(probeVersion)
			return
		case "cat":
			if err := catFiles(os.Stdout, os.Args[2:]); err != nil {
				log.Error("cat failed", "err", err)
				os.Exit(1)
			}
			return
		}
	}
	addr := ":8080"
	if p := os.Getenv("PORT"); p != "" {
		addr = ":" + p
	}
	host, _ := os.Hostname()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("demo failed", "err", fmt.Errorf("listening on %s: %w", addr, err))
		os.Exit(1)
	}
	if err := run(ctx, log, ln, host); err != nil {
		log.Error("demo failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, ln net.Listener, host string) error {
	fmt.Printf("berth demo pod %s running, serving HTTP on %s\n", host, ln.Addr())
	srv := &http.Server{Handler: handler(host), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// DEMO_STOP_DELAY (a Go duration) makes the pod slow to stop, as a
	// real server draining its connections is: the graceful-shutdown test
	// needs a pod whose exit takes time after SIGTERM.
	if d, err := time.ParseDuration(os.Getenv("DEMO_STOP_DELAY")); err == nil && d > 0 {
		log.Info("stopping after DEMO_STOP_DELAY", "delay", d.String())
		time.Sleep(d)
	}
	log.Info("stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func handler(host string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from berth demo pod %s\n", host)
	})
}
