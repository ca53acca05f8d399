// Command controlplane runs a local Kubernetes control plane for berth's
// join tests and `make demo` (see package controlplane). When it is ready it
// prints one JSON object on stdout (apiServerEndpoint as a QEMU guest sees
// it, the base64 CA, the bootstrap token, the admin kubeconfig path), then
// runs until SIGINT or SIGTERM, when it stops every component and removes its
// state directory (unless -keep-state).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/qemu-tests/controlplane"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, os.Args[1:]); err != nil {
		log.Error("control plane failed", "err", err)
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	var o controlplane.Options
	var binDirs list
	componentsDir := fs.String("components-dir", os.Getenv("BERTH_COMPONENTS_DIR"), "directory of built components (build/components); its subdirectories are searched for the binaries (default $BERTH_COMPONENTS_DIR)")
	fs.Var(&binDirs, "bin-dir", "directory holding etcd or kube-* binaries (repeatable; searched before -components-dir)")
	fs.StringVar(&o.StateDir, "state-dir", "", "state directory (default: a new temporary directory)")
	fs.BoolVar(&o.KeepState, "keep-state", false, "keep the state directory (certificates, logs) on exit")
	fs.IntVar(&o.Ports.APIServer, "api-port", 0, "apiserver port on 127.0.0.1 (default: a free port)")
	fs.StringVar(&o.AdvertiseAddress, "advertise-address", controlplane.DefaultAdvertiseAddress, "address nodes reach the apiserver at")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", controlplane.DefaultReadyTimeout, "deadline for the whole start")
	infoFile := fs.String("info-file", "", "also write the JSON to this file once ready")
	var extra list
	fs.Var(&extra, "apiserver-arg", "extra kube-apiserver flag (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.BinDirs = binDirs
	o.ExtraAPIServerArgs = extra
	if *componentsDir != "" {
		dirs, err := controlplane.BinDirsUnder(*componentsDir)
		if err != nil {
			return err
		}
		o.BinDirs = append(o.BinDirs, dirs...)
	}
	if len(o.BinDirs) == 0 {
		return fmt.Errorf("no binaries: give -components-dir, -bin-dir or $BERTH_COMPONENTS_DIR (run `make components` first)")
	}
	start := time.Now()
	c, err := controlplane.Start(ctx, log, o)
	if err != nil {
		return err
	}
	b, err := json.Marshal(c.Info())
	if err != nil {
		c.Stop()
		return fmt.Errorf("encoding info: %w", err)
	}
	if *infoFile != "" {
		if err := fsutil.WriteFileAtomic(*infoFile, append(b, '\n'), 0o600); err != nil {
			c.Stop()
			return err
		}
	}
	fmt.Println(string(b))
	log.Info("running; SIGINT or SIGTERM stops it", "startup", time.Since(start).Round(time.Millisecond))
	<-ctx.Done()
	log.Info("stopping")
	return c.Stop()
}
