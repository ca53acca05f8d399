package plan

import (
	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nodeconfig"
)

// StandInInstance is the instance `berth check` builds the plan for, so
// that check refuses what the plan refuses (render and the node build the
// same plan for the real instance): an m5.large in us-west-2 with an IPv6
// address, so that an IPv6 cluster is judged on its config. Check cannot
// know the instance; a fact only the real one has (an instance type
// missing from the max-pods table) is render's to show.
func StandInInstance() *imds.Metadata {
	return &imds.Metadata{
		InstanceID: "i-0123456789abcdef0", InstanceType: "m5.large", LocalIPv4: "10.0.12.34",
		LocalHostname: "ip-10-0-12-34.us-west-2.compute.internal", AvailabilityZone: "us-west-2a", Region: "us-west-2",
		IPv6s: []string{"2600:1f14:aaaa::1"},
	}
}

// StandInCluster is what `berth check` takes eks:DescribeCluster's answer
// to be for user data that leaves the cluster to it (AL2's
// CloudFormation shape): the node asks EKS at boot, render takes the
// answer as a file, and check has neither. The values are placeholders
// the plan only copies; EKS's default service CIDRs.
func StandInCluster() nodeconfig.DescribedCluster {
	return nodeconfig.DescribedCluster{
		Endpoint:             "https://describe-cluster.invalid",
		CertificateAuthority: []byte("-----BEGIN CERTIFICATE-----\n(the cluster's CA, from DescribeCluster at boot)\n-----END CERTIFICATE-----\n"),
		ServiceIPv4CIDR:      "172.20.0.0/16",
		ServiceIPv6CIDR:      "fd00:10:96::/112",
	}
}

// Check builds the plan for a validated config on StandInInstance with the
// image manifest man (2 CPUs), as `berth check` does: the error is the one
// Build gives render and the node for the same config.
func Check(cfg *nodeconfig.NodeConfig, man *manifest.Manifest) error {
	_, err := Build(Inputs{Config: cfg, Instance: StandInInstance(), Manifest: man, Host: Host{CPUs: 2}})
	return err
}
