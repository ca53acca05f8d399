package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/runtime/awsauth/creds"
	"github.com/berth-node/berth/runtime/awsauth/eksapi"
)

// configTimeout bounds the whole config phase: IMDS metadata and user
// data. EC2's IMDS answers in milliseconds; the rest is for retries.
const configTimeout = 60 * time.Second

// phaseConfig reads user data from the source the source phase chose
// (IMDS with its instance metadata, a NoCloud seed, berth.userdata=, or
// none) and merges every NodeConfig source. No source at all is not an
// error: the node then runs no Kubernetes services, and the report says
// so.
func phaseConfig(ctx context.Context, b *boot, log *slog.Logger) error {
	rep := &report.Config{}
	b.rep.Config = rep
	ov := imds.ParseOverride(b.cl.Get(imds.CmdlineKey))
	d := b.node.source
	if d == nil {
		// No source phase ran (a test's pipeline): IMDS, as before it.
		d = &sources.Decision{Use: sources.IMDS}
	}
	// Whatever the NodeConfig's fate, once IMDS has answered a spot notice
	// must still take the node down in order.
	defer b.startLifecycle(ctx, ov, d.Use)
	var userData *nodeconfig.Source
	var c *imds.Client
	ctx, cancel := context.WithTimeout(ctx, configTimeout)
	defer cancel()
	rep.IMDS = "off"
	switch {
	case d.Use == sources.IMDS && !ov.Off:
		rep.IMDS = cmp.Or(ov.Endpoint, imds.EndpointIPv4)
		c = imds.New(imds.Options{Logger: log, Endpoints: ov.Endpoints()})
		defer func() { rep.Calls = c.Timings(); c.Close() }()
		md, err := c.Metadata(ctx)
		if err != nil {
			return fmt.Errorf("reading instance metadata (berth.imds=off skips IMDS): %w", err)
		}
		b.node.instance = md
		log.Info("instance", "id", md.InstanceID, "type", md.InstanceType, "az", md.AvailabilityZone, "hostname", md.LocalHostname)
		// EC2's private DNS name is the node's hostname, over DHCP's.
		if name, _ := plan.IMDSHostname(md.LocalHostname); name != "" {
			b.setHostname(log, rep, name, "imds")
		}
		ud, err := c.UserData(ctx)
		if err != nil {
			return fmt.Errorf("reading user data: %w", err)
		}
		userData = &nodeconfig.Source{Name: nodeconfig.UserDataSource, Data: ud}
	case d.Use == sources.Seed && b.node.seed != nil:
		seed := b.node.seed
		userData = &nodeconfig.Source{Name: seedUserDataName(d.Seed.Device), Data: seed.Seed.UserData}
		// meta-data's local-hostname names the machine, over DHCP's, as
		// IMDS's does on EC2.
		if name := seed.Seed.MetaData.LocalHostname; name != "" {
			b.setHostname(log, rep, name, "nocloud meta-data")
		}
	case d.Use == sources.URL:
		rep.UserDataURL = d.URL.Where
		data, calls, err := userdataurl.Fetch(ctx, log, d.URL, userdataurl.Options{})
		rep.UserDataURLCalls = calls
		if err != nil {
			return fmt.Errorf("reading user data: %w", err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			// Someone pointed the node at it: an empty answer is a
			// mistake, not a node without config.
			return fmt.Errorf("reading user data: %s=%s: empty", userdataurl.CmdlineKey, d.URL.Where)
		}
		log.Info("user data read", "from", d.URL.Where, "bytes", len(data), "attempts", len(calls))
		userData = &nodeconfig.Source{Name: userdataurl.CmdlineKey + "=" + d.URL.Where, Data: data}
	}
	srcs, err := nodeconfig.BootSourcesWith(nodeconfig.DefaultConfigDir, userData,
		nodeconfig.SplitConfigPaths(b.cl.All(nodeconfig.CmdlineConfigKey)...))
	if err != nil {
		return err
	}
	for _, s := range srcs {
		rep.Sources = append(rep.Sources, s.Name)
	}
	if len(srcs) == 0 {
		rep.Skipped = "no NodeConfig in the image, in user data or on the command line"
		log.Warn("no NodeConfig found; this node will run no Kubernetes services", "source", d.Use, "imds", rep.IMDS, "dir", nodeconfig.DefaultConfigDir)
		return nil
	}
	opts := nodeconfig.Options{Accepts: b.accepts(log)}
	if why := opts.NotChecked(); why != "" {
		log.Warn(why) // an image built before the manifest recorded it
	}
	res, err := nodeconfig.LoadWith(ctx, log, srcs, opts)
	if err == nil && res.DescribeCluster != nil {
		err = describeCluster(ctx, log, c, b.node.instance, res)
	}
	rep.Result = res
	if res != nil {
		b.node.config = res
	}
	if err != nil {
		for _, p := range res.Problems {
			if p.Severity == nodeconfig.SeverityError {
				log.Error(p.String())
			}
		}
		return err
	}
	return nil
}

// seedUserDataName names a seed's user-data in problems and in the
// report's sources.
func seedUserDataName(dev string) string { return "NoCloud seed " + dev + " user-data" }

// setHostname sets the machine's hostname from the config's source
// (IMDS's local-hostname, a seed's meta-data) over DHCP's; a failure is a
// warning, the node keeps the name it has.
func (b *boot) setHostname(log *slog.Logger, rep *report.Config, name, source string) {
	if err := network.SetHostname(name); err != nil {
		log.Warn("setting the hostname", "hostname", name, "source", source, "err", err)
		return
	}
	rep.Hostname, rep.HostnameSource = name, source
}

// describeCluster reads what an Amazon Linux 2 script left out (the
// cluster's endpoint, CA and service CIDR) from EKS's DescribeCluster with
// the instance role, as its bootstrap.sh did, and completes res with it
// (nodeconfig.FillFromEKS). AWS_ENDPOINT_URL_EKS in the NodeConfig's
// spec.instance.environment points the call elsewhere, as it would the
// SDKs.
func describeCluster(ctx context.Context, log *slog.Logger, c *imds.Client, md *imds.Metadata, res *nodeconfig.Result) error {
	req := res.DescribeCluster
	if c == nil || md == nil {
		return fmt.Errorf("%s: the script gives no API server endpoint or CA, and without IMDS there is no instance role to ask eks:DescribeCluster %s with", req.Source, req.Cluster)
	}
	cr, err := c.RoleCredentials(ctx)
	if err != nil {
		return fmt.Errorf("%s: eks:DescribeCluster %s needs the instance role's credentials: %w", req.Source, req.Cluster, err)
	}
	client := &eksapi.Client{
		Endpoint: cmp.Or(res.Config.Spec.Instance.Environment[eksapi.EndpointEnv], eksapi.Endpoint(md.Region, eksapi.Domain(md.Region))),
		Region:   md.Region,
		Creds:    creds.AWS(cr),
	}
	start := time.Now()
	cl, err := client.DescribeCluster(ctx, req.Cluster)
	if err != nil {
		return fmt.Errorf("%s: reading the cluster's endpoint and CA, as AL2's bootstrap.sh did: %w", req.Source, err)
	}
	log.Info("config: cluster described by EKS", "cluster", req.Cluster, "endpoint", cl.Endpoint, "serviceIpv4Cidr", cl.ServiceIPv4CIDR,
		"serviceIpv6Cidr", cl.ServiceIPv6CIDR, "ipFamily", cl.IPFamily, "status", cl.Status, "duration_ms", time.Since(start).Milliseconds())
	return nodeconfig.FillFromEKS(res, cl.Described())
}

// decodeAccepts decodes the manifest's accepts (what the image's kubelet
// and containerd accept, most of the manifest's bytes) beside the phases
// before config, which alone needs them: under TCG the decode costs tens
// of milliseconds that the network phase's waits hide.
func (b *boot) decodeAccepts(log *slog.Logger, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	next := make(chan *accepts.Accepts, 1)
	b.node.acceptsNext = next
	b.goSafe(log, "manifest-accepts", func() {
		var a *accepts.Accepts
		// Sent even on a panic, so accepts never waits forever.
		defer func() { next <- a }()
		var err error
		if a, err = manifest.DecodeAccepts(raw); err != nil {
			log.Warn("the image manifest's accepts are unreadable; user data is checked without them", "path", manifest.DefaultPath, "err", err)
		}
	})
}

// accepts is the manifest's accepts once decoded (decodeAccepts), or nil:
// an image without them, or a decode that failed or did not end within
// acceptsWait; NotChecked then says which checks were not made.
func (b *boot) accepts(log *slog.Logger) *accepts.Accepts {
	next := b.node.acceptsNext
	if next == nil {
		return nil
	}
	b.node.acceptsNext = nil
	t := time.NewTimer(acceptsWait)
	defer t.Stop()
	select {
	case a := <-next:
		return a
	case <-t.C:
		log.Warn("the image manifest's accepts did not decode in time; user data is checked without them", "waited", acceptsWait)
		return nil
	}
}

// acceptsWait bounds accepts' wait: a decode of some 130 KB of JSON,
// milliseconds unless PID 1 is starved.
const acceptsWait = 30 * time.Second
