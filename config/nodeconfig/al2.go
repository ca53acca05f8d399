package nodeconfig

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/berth-node/berth/config/al2"
	"github.com/berth-node/berth/config/fate"
)

// FromAL2 is the NodeConfig an Amazon Linux 2 node's bootstrap.sh options
// describe (config/al2 reads them from the script), with a problem for
// each option berth ignores (a warning naming it) or cannot honour (an
// error naming it). source names the script part and the line of the
// invocation. Each option's fate is al2.Table's.
//
// The service CIDR: AL2's bootstrap.sh did not need one. It took
// kubelet's cluster DNS address from --dns-cluster-ip, or from the service
// CIDR (--service-ipv6-cidr, or $SERVICE_IPV4_CIDR as terraform-aws-eks
// exports it), or guessed it from the VPC's CIDR (10.100.0.10, or
// 172.20.0.10 in a VPC within 10.0.0.0/8, the two service CIDRs EKS picks
// when the cluster names none). berth needs the address, so
// --dns-cluster-ip becomes spec.kubelet.config.clusterDNS, and without a
// CIDR spec.cluster.cidr stays unset (see ValidateMerged). With neither,
// the guess needs the VPC, which user data does not hold: a warning that
// says so, and the merged config needs spec.cluster.cidr from elsewhere.
func FromAL2(source string, o al2.Options) (*NodeConfig, []Problem) {
	ps := &problems{source: source}
	cfg := &NodeConfig{APIVersion: APIVersion, Kind: Kind}
	c := &cfg.Spec.Cluster
	c.Name = o.ClusterName
	at := func(name string) string {
		if v, ok := o.FromEnv[name]; ok {
			return "bootstrap.sh " + name + " (from $" + v + ")"
		}
		return "bootstrap.sh " + name
	}
	if v, ok := o.Set["--apiserver-endpoint"]; ok {
		c.APIServerEndpoint = v
	}
	if v, ok := o.Set["--b64-cluster-ca"]; ok {
		ca, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil {
			ps.errorf(at("--b64-cluster-ca"), "not base64 (%v): want the cluster's CA bundle in PEM, base64-encoded, as DescribeCluster's certificateAuthority.data", err)
		} else {
			c.CertificateAuthority = ca
		}
	}
	if v, ok := o.Set["--cluster-id"]; ok {
		c.ID = v
	}
	if v, ok := o.Set["--enable-local-outpost"]; ok && v != "false" {
		ps.errorf(at("--enable-local-outpost"), "%s: berth does not join local clusters on Outposts; only \"false\" is accepted", quote(v))
	}
	if v, ok := o.Set["--container-runtime"]; ok && v != "containerd" {
		ps.errorf(at("--container-runtime"), "%s: containerd is berth's only runtime (AL2 dropped dockershim with Kubernetes 1.24)", quote(v))
	}
	if _, ok := o.Set["--containerd-config-file"]; ok {
		ps.errorf(at("--containerd-config-file"), "names a file on the AMI, which a berth image does not have: put the TOML in a NodeConfig part's spec.containerd.config")
	}
	if v, ok := o.Set["--mount-bpf-fs"]; ok && v != "true" {
		ps.errorf(at("--mount-bpf-fs"), "%s: berth always mounts bpffs at /sys/fs/bpf; only \"true\" is accepted", quote(v))
	}
	kubeletConfig := InlineDocument{}
	switch v := o.Set["--use-max-pods"]; v {
	case "", "true":
		// berth's maxPods from the instance type, as AL2's from
		// eni-max-pods.txt.
	case "false":
		// AL2 then left kubelet's default in place; a --max-pods in
		// --kubelet-extra-args wins over it, on AL2 as in berth, since
		// kubelet's flags override its config file.
		kubeletConfig["maxPods"] = json.RawMessage("110")
	default:
		ps.errorf(at("--use-max-pods"), "%s: want true or false", quote(v))
	}
	if v, ok := o.Set["--local-disks"]; ok {
		switch v {
		case "raid0":
			cfg.Spec.Instance.LocalStorage.Strategy = LocalStorageRAID0
		case "raid10":
			cfg.Spec.Instance.LocalStorage.Strategy = LocalStorageRAID10
		case "mount":
			cfg.Spec.Instance.LocalStorage.Strategy = LocalStorageMount
		default:
			ps.errorf(at("--local-disks"), "%s: want raid0, raid10 or mount", quote(v))
		}
	}
	for _, name := range o.Order {
		if e, ok := al2.Lookup(name); ok && e.Fate == fate.Ignored {
			ps.warnf(at(name), "ignored: %s", e.Why)
		}
	}

	if _, ok := o.Env["PAUSE_CONTAINER_IMAGE"]; ok {
		ps.warnf("bootstrap.sh $PAUSE_CONTAINER_IMAGE", "ignored: the image carries its pause image, imported at boot")
	}
	family, famSet := o.Set["--ip-family"]
	family = strings.ToLower(family) // as bootstrap.sh did
	if famSet && family != "ipv4" && family != "ipv6" {
		ps.errorf(at("--ip-family"), "%s: want ipv4 or ipv6", quote(family))
	}
	v6cidr, v6Set := o.Set["--service-ipv6-cidr"]
	if v6Set {
		if p, err := netip.ParsePrefix(v6cidr); err != nil || !p.Addr().Is6() {
			ps.errorf(at("--service-ipv6-cidr"), "%s is not an IPv6 CIDR", quote(v6cidr))
		} else {
			c.CIDR = v6cidr
		}
	}
	if _, dnsSet := o.Set["--dns-cluster-ip"]; family == "ipv6" && !v6Set && !dnsSet {
		ps.errorf(at("--ip-family"), "ipv6 needs --service-ipv6-cidr or --dns-cluster-ip, as AL2's bootstrap.sh required")
	}
	if famSet && family == "ipv4" && v6Set {
		ps.errorf(at("--service-ipv6-cidr"), "given with --ip-family ipv4: AL2's bootstrap.sh refused that")
	}
	if family == "" && v6Set {
		family = "ipv6" // as bootstrap.sh did
	}
	// terraform-aws-eks exports SERVICE_IPV4_CIDR; bootstrap.sh took the
	// DNS address from it (x.y.z.10), as berth does from the CIDR.
	if v4, ok := o.Env["SERVICE_IPV4_CIDR"]; ok && v4 != "" && v4 != "None" && family != "ipv6" {
		if p, err := netip.ParsePrefix(v4); err != nil || !p.Addr().Is4() {
			ps.errorf("bootstrap.sh $SERVICE_IPV4_CIDR", "%s is not an IPv4 CIDR", quote(v4))
		} else {
			c.CIDR = v4
		}
	}
	if v, ok := o.Set["--dns-cluster-ip"]; ok {
		var dns []string
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			a, err := netip.ParseAddr(s)
			if err != nil {
				ps.errorf(at("--dns-cluster-ip"), "%s is not an IP address", quote(s))
				continue
			}
			if (family == "ipv6") != a.Is6() {
				ps.errorf(at("--dns-cluster-ip"), "%s is not an %s address, the node's IP family", quote(s), map[bool]string{true: "IPv6", false: "IPv4"}[family == "ipv6"])
				continue
			}
			dns = append(dns, a.String())
		}
		if len(dns) > 0 {
			raw, _ := json.Marshal(dns) // strings always marshal
			kubeletConfig["clusterDNS"] = raw
		}
	} else if c.CIDR == "" {
		// A warning: a NodeConfig part may set spec.cluster.cidr, and
		// without one the merged config's error says it is required.
		ps.warnf(at("--dns-cluster-ip"), "not given: AL2's bootstrap.sh guessed the cluster DNS address from the VPC's CIDR (10.100.0.10, or 172.20.0.10 in a VPC within 10.0.0.0/8), and berth reads no VPC for config; it derives the address from spec.cluster.cidr, which a NodeConfig part must then set (or give --dns-cluster-ip the kube-dns Service's address)")
	}
	if len(kubeletConfig) > 0 {
		cfg.Spec.Kubelet.Config = kubeletConfig
	}
	if v, ok := o.Set["--kubelet-extra-args"]; ok && strings.TrimSpace(v) != "" {
		// One element: flagwords splits it as systemd split AL2's
		// $KUBELET_EXTRA_ARGS, and ValidateDocument checks the words.
		cfg.Spec.Kubelet.Flags = []string{v}
	}
	return cfg, ps.problems()
}

// quote quotes a value for a message: clipped, control characters
// escaped.
func quote(v string) string { return strconv.Quote(truncate(v)) }

// al2Source names the NodeConfig read from a script part's bootstrap.sh
// invocation, for messages and the report's used list.
func al2Source(part string, line int) string {
	return fmt.Sprintf("%s, bootstrap.sh on line %d", part, line)
}

// DescribeClusterRequest is a cluster to read from EKS's DescribeCluster,
// as AL2's bootstrap.sh did when its options gave no API server endpoint
// or no CA (the EKS CloudFormation node group template gives neither).
type DescribeClusterRequest struct {
	Cluster string `json:"cluster"`
	// Source is the script part that asked, for messages.
	Source string `json:"source"`
	// IPFamily is the script's --ip-family, which wins over the
	// cluster's; empty when not given.
	IPFamily string `json:"ipFamily,omitempty"`
}

// DescribedCluster is what DescribeCluster answered, as FillFromEKS needs
// it (runtime/awsauth/eksapi makes the call).
type DescribedCluster struct {
	Endpoint             string
	CertificateAuthority []byte
	ServiceIPv4CIDR      string
	ServiceIPv6CIDR      string
	IPFamily             string
	ID                   string
}

// FillFromEKS completes a Result whose DescribeCluster was pending with
// the answer, as bootstrap.sh used it: the endpoint and the CA where the
// user data gave none (bootstrap.sh replaced both when either was
// missing; berth keeps what a NodeConfig part says), the answer's cluster
// ID, and without a service CIDR or DNS address from the user data the
// answer's CIDR of the script's --ip-family, else of the cluster's. Then
// the merged config is validated, and the error is Load's: non-nil when
// any problem is an error.
func FillFromEKS(res *Result, c DescribedCluster) error {
	req := res.DescribeCluster
	if req == nil {
		return fmt.Errorf("no DescribeCluster was pending")
	}
	cl := &res.Config.Spec.Cluster
	src := fmt.Sprintf("eks:DescribeCluster %s (for %s)", req.Cluster, req.Source)
	if cl.APIServerEndpoint == "" {
		cl.APIServerEndpoint = c.Endpoint
	}
	if len(cl.CertificateAuthority) == 0 {
		cl.CertificateAuthority = c.CertificateAuthority
	}
	if c.ID != "" {
		cl.ID = c.ID
	}
	var found problemList
	found.add(res.Problems...)
	if _, dnsSet := res.Config.Spec.Kubelet.Config["clusterDNS"]; cl.CIDR == "" && !dnsSet {
		family := cmp.Or(req.IPFamily, strings.ToLower(c.IPFamily), "ipv4")
		cidr := c.ServiceIPv4CIDR
		if family == "ipv6" {
			cidr = c.ServiceIPv6CIDR
		}
		if cidr == "" || cidr == "None" {
			found.add(Problem{Severity: SeverityError, Source: src, Path: "spec.cluster.cidr",
				Message: fmt.Sprintf("the cluster has no %s service CIDR, and the user data gives no --dns-cluster-ip: add it to the bootstrap.sh options, or spec.cluster.cidr in a NodeConfig part", family)})
		} else {
			cl.CIDR = cidr
		}
	}
	res.Used = append(res.Used, src)
	res.DescribeCluster = nil
	found.add(ValidateMerged(res.Config)...)
	res.Problems = found.problems()
	return Errors(res.Problems)
}
