package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/internal/redact"
	"github.com/berth-node/berth/runtime/awsauth/eksapi"
)

// renderSecretsHelp says what --show-secrets does not cover, so nobody
// mistakes the output directory for something safe to share.
const renderSecretsHelp = `
Secrets are redacted in what render prints and in OUT/run/berth/plan.txt
unless --show-secrets is given. The node's files under --out are never
redacted: they are exactly what the node gets. Files that may hold
credentials (kubeconfigs, containerd's config.toml, the user's kubelet
config drop-in, plan.txt) are written 0600, as on the node.

`

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// cmdRender shows an operator exactly what a node would get, offline: the
// same load, merge, validation and plan as boot, written under --out.
// With --seed DIR the node's user data is a NoCloud seed's, and what the
// seed's meta-data and network-config decide is printed first
// (nocloud.Inspection.Describe) and goes into the plan's inputs. Without
// --metadata the node is rendered as it boots from the seed, not an EC2
// instance (plan.Machine); with it, as an EC2 instance given the seed.
func cmdRender(e env, args []string) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var configs repeated
	fs.Var(&configs, "config", "NodeConfig file (YAML, JSON, MIME user data; may repeat; later files win)")
	imdsURL := fs.String("imds", "", "read instance metadata and user data from this IMDS, as a node would (e.g. http://127.0.0.1:8080)")
	metadata := fs.String("metadata", "", "instance metadata as JSON (imds.Metadata) instead of --imds")
	manifestPath := fs.String("manifest", "", "image manifest (default: the one berth was built with: its kubelet's and containerd's versions and checks, the default image's preload list and sandbox image)")
	out := fs.String("out", "", "directory to write the node's files under (required; the real files, never redacted, with the node's modes)")
	cpus := fs.Int("cpus", runtime.NumCPU(), "CPU count of the node, for kubeReserved")
	nodeIP := fs.String("node-ip", "", "override the node IP from instance metadata")
	describe := fs.String("describe-cluster", "", "EKS DescribeCluster's answer as JSON (aws eks describe-cluster --name NAME), for user data that leaves the cluster's endpoint and CA to it; with --imds, render asks EKS as the node would")
	showSecrets := fs.Bool("show-secrets", false, "show secret values (registry auth, tokens, Authorization headers, env values with secret-looking names) in what is printed and in plan.txt")
	seed := fs.String("seed", "", "render a node booted from the NoCloud seed in this directory (user-data, meta-data, network-config, as on a cidata volume): its user-data is the node's; what its meta-data and network-config decide (node name, network) is printed first; without --metadata the node is not an EC2 instance, as a node booted from a seed; not with --imds or --config")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: berth render [--config FILE]... [--imds URL | --metadata FILE] [--manifest FILE] [--show-secrets] --out DIR\n       berth render --seed DIR [--metadata FILE] [--manifest FILE] [--show-secrets] --out DIR")
		fmt.Fprint(e.stderr, renderSecretsHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *seed != "" {
		// The seed is the node's user data; IMDS and more files would be
		// another node's.
		var why string
		switch {
		case len(configs) > 0:
			why = "--config: the seed's user-data is the node's user data; give one or the other"
		case *imdsURL != "":
			why = "--imds: a node booted from a seed has no IMDS; leave it out to render the node as it boots from the seed, or give instance facts as --metadata FILE"
		}
		if why != "" {
			fmt.Fprintf(e.stderr, "berth render: --seed %s with %s\n", *seed, why)
			fs.Usage()
			return 2
		}
	}
	if *out == "" || fs.NArg() != 0 || (*imdsURL != "" && *metadata != "") || (*imdsURL == "" && *metadata == "" && *seed == "") {
		fs.Usage()
		return 2
	}
	show := func(s string) string {
		if *showSecrets {
			return s
		}
		return redact.Text(s)
	}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "berth render: %s\n", show(err.Error()))
		return 1
	}

	var srcs []nodeconfig.Source
	var md *imds.Metadata
	var c *imds.Client
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	if *imdsURL != "" {
		c = imds.New(imds.Options{Endpoints: []string{*imdsURL}, Logger: e.log})
		defer c.Close()
		var err error
		if md, err = c.Metadata(ctx); err != nil {
			return fail(err)
		}
		ud, err := c.UserData(ctx)
		if err != nil {
			return fail(err)
		}
		if ud != nil {
			srcs = append(srcs, nodeconfig.Source{Name: nodeconfig.UserDataSource, Data: ud})
		}
	} else if *metadata != "" {
		var err error
		if md, err = plan.ReadMetadataFile(*metadata); err != nil {
			return fail(err)
		}
	}
	host := plan.Host{CPUs: *cpus, NodeIP: *nodeIP}
	var machine *plan.Machine
	if *seed != "" {
		in, err := nocloud.InspectDir(*seed)
		if err != nil {
			return fail(err)
		}
		for _, p := range in.NodeConfigProblems() {
			fmt.Fprintln(e.stderr, show(p.String()))
		}
		if n := len(in.Errors); n > 0 {
			return fail(fmt.Errorf("seed %s: %d error(s), listed above", *seed, n))
		}
		e.stdout.Write(append(in.Describe(), '\n'))
		srcs = in.Sources()
		// What the seed decides wins over the metadata file, as it would
		// on the node: its hostname names the node, its static address
		// is the node's IP (unless --node-ip), its DNS servers are the
		// host's.
		if md != nil {
			seeded := *md
			seeded.LocalHostname = cmp.Or(in.Seed.MetaData.LocalHostname, seeded.LocalHostname)
			md = &seeded
		} else {
			machine = &plan.Machine{Source: "NoCloud seed " + *seed, InstanceID: in.Seed.MetaData.InstanceID, Hostname: in.Seed.MetaData.LocalHostname}
		}
		host.NodeIP = cmp.Or(host.NodeIP, in.NodeIP())
		host.Nameservers = in.Nameservers()
	}
	files, err := nodeconfig.FileSources(configs...)
	if err != nil {
		return fail(err)
	}
	srcs = append(srcs, files...)
	if len(srcs) == 0 {
		return fail(fmt.Errorf("no NodeConfig: give --config FILE or an IMDS with user data"))
	}
	// Without --manifest, the manifest berth was built with (its kubelet's
	// and containerd's checks, the default image's preload list and
	// sandbox image), as `berth check` judges: one verdict.
	man, against, err := checkManifest(*manifestPath)
	if err != nil {
		return fail(err)
	}
	if *manifestPath == "" {
		fmt.Fprintln(e.stderr, "berth render: no --manifest: checked against "+against)
	}
	opts := nodeconfig.Options{Accepts: man.Accepts}
	if why := opts.NotChecked(); why != "" {
		fmt.Fprintln(e.stderr, "warning: "+why)
	}
	res, err := nodeconfig.LoadWith(e.ctx, e.log, srcs, opts)
	if err == nil && res.DescribeCluster != nil {
		switch {
		case *describe != "":
			err = fillFromAnswer(*describe, res)
		case c != nil:
			err = describeCluster(ctx, e.log, c, md, res)
		default:
			err = fmt.Errorf("%s leaves the cluster's endpoint and CA to eks:DescribeCluster %s at boot: give render the answer (--describe-cluster FILE) or an IMDS with the instance role (--imds URL)", res.DescribeCluster.Source, res.DescribeCluster.Cluster)
		}
	}
	if res != nil {
		for _, p := range res.Problems {
			fmt.Fprintln(e.stderr, show(p.String()))
		}
	}
	if err != nil {
		return fail(err)
	}
	in := plan.Inputs{
		Config:   res.Config,
		Instance: md,
		Machine:  machine,
		Manifest: man,
		Host:     host,
	}
	if _, err := plan.RenderWith(in, *out, e.stdout, plan.RenderOptions{ShowSecrets: *showSecrets}); err != nil {
		return fail(err)
	}
	return 0
}

// fillFromAnswer completes res with a saved DescribeCluster answer, as the
// node completes it with EKS's (describeCluster).
func fillFromAnswer(path string, res *nodeconfig.Result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the DescribeCluster answer: %w", err)
	}
	cl, err := eksapi.ParseDescribeCluster(b)
	if err != nil {
		return fmt.Errorf("DescribeCluster answer %s: %w", path, err)
	}
	return nodeconfig.FillFromEKS(res, cl.Described())
}
