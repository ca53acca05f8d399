package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/berth-node/berth/runtime/awsauth"
)

// awsOptions are the plugins' shared inputs from the environment: IMDS
// from the hidden --imds flag or the kernel command line, endpoint
// overrides from AWS_ENDPOINT_URL_*.
func awsOptions(e env, imdsFlag string) (awsauth.Options, error) {
	var procCmdline []byte
	if imdsFlag == "" {
		b, err := os.ReadFile("/proc/cmdline")
		if err != nil && !os.IsNotExist(err) {
			return awsauth.Options{}, fmt.Errorf("reading /proc/cmdline for berth.imds: %w", err)
		}
		procCmdline = b
	}
	eps, err := awsauth.IMDSEndpoints(imdsFlag, string(procCmdline))
	if err != nil {
		return awsauth.Options{}, err
	}
	return awsauth.Options{IMDS: eps, Getenv: os.Getenv, Logger: e.log}, nil
}

// cmdEKSToken is kubelet's exec credential plugin for EKS (the
// kubeconfig's user.exec), a stand-in for `aws eks get-token`.
func cmdEKSToken(e env, args []string) int {
	fs := flag.NewFlagSet("eks-token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cluster := fs.String("cluster-name", "", "the EKS cluster name (the cluster ID on Outposts)")
	region := fs.String("region", "", "the cluster's region (default: the instance's, from IMDS)")
	imdsURL := fs.String("imds", "", "") // hidden: tests point it at a stand-in
	usage := "usage: berth eks-token --cluster-name NAME [--region REGION]"
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *cluster == "" {
		fmt.Fprintln(e.stderr, usage)
		return 2
	}
	opts, err := awsOptions(e, *imdsURL)
	if err != nil {
		fmt.Fprintf(e.stderr, "berth eks-token: %v\n", err)
		return 1
	}
	out, err := awsauth.EKSToken(e.ctx, awsauth.EKSTokenOptions{Options: opts, Cluster: *cluster, Region: *region})
	if err != nil {
		fmt.Fprintf(e.stderr, "berth %v\n", err)
		return 1
	}
	if _, err := e.stdout.Write(out); err != nil {
		fmt.Fprintf(e.stderr, "berth eks-token: writing stdout: %v\n", err)
		return 1
	}
	return 0
}
