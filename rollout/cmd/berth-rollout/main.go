// Command berth-rollout is the rollout controller: it rolls the release an
// Update (updates.berth.dev/v1alpha1) names across the berth nodes it
// covers, a few at a time, through the Kubernetes API (package
// rollout/controller). Run as a Deployment of two replicas; a Lease elects
// the one that acts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-node/berth/rollout/controller"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Args[1:]); err != nil {
		log.Error("berth-rollout", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, args []string) error {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("berth-rollout", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty: the pod's service account (in-cluster)")
	namespace := fs.String("namespace", envOr("POD_NAMESPACE", "berth-system"), "namespace of the leader election Lease (default $POD_NAMESPACE)")
	leaseName := fs.String("lease-name", "berth-rollout", "name of the leader election Lease")
	id := fs.String("id", envOr("POD_NAME", host), "this replica's identity in the Lease (default $POD_NAME, else the hostname)")
	poll := fs.Duration("poll", controller.DefaultPoll, "how often the Updates, Nodes and pods are read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *id == "" {
		return errors.New("-id: empty, and the hostname is unknown")
	}
	if *poll <= 0 {
		return fmt.Errorf("-poll %s: want more than 0", *poll)
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = controller.Component + "/" + *id
	// No API call may hang a round: every one of them ends in time.
	cfg.Timeout = 30 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("the dynamic client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("berth-rollout starting", "id", *id, "lease", *namespace+"/"+*leaseName, "poll", *poll)
	return controller.RunLeader(ctx, controller.Options{Log: log, Kube: kube, Dynamic: dyn, Poll: *poll, Instance: *id},
		controller.Lease{Namespace: *namespace, Name: *leaseName, ID: *id})
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("the in-cluster config (outside a pod, pass -kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
