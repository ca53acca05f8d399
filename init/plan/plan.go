// Package plan is the centre of berth's boot: a pure function from the
// merged NodeConfig, the instance metadata, the image manifest and a few
// host facts to everything the node needs (files with path, mode and
// bytes; the local-storage request; the services with argv, env, cgroup,
// dependencies and readiness probe). Nothing here touches the machine, so
// `berth render` shows an operator exactly what a node would get, offline,
// and the same inputs always give byte-identical output.
//
// # Bootstrap-token join
//
// EKS nodes authenticate with an exec credential plugin (see
// kubelet.TokenProvider). Clusters that are not EKS, and berth's local test
// cluster, join by TLS bootstrapping with a bootstrap token instead. The
// token is requested with an annotation on the NodeConfig, so the document
// stays a valid nodeadm NodeConfig (nodeadm ignores metadata):
//
//	apiVersion: node.eks.aws/v1alpha1
//	kind: NodeConfig
//	metadata:
//	  annotations:
//	    berth.dev/bootstrap-token: abcdef.0123456789abcdef
//	spec:
//	  cluster: {name: ..., apiServerEndpoint: ..., certificateAuthority: ..., cidr: ...}
//
// With the annotation, berth writes /var/lib/kubelet/bootstrap-kubeconfig
// (mode 0600) and passes --bootstrap-kubeconfig; kubelet writes
// /var/lib/kubelet/kubeconfig itself once its certificate is issued.
// Without it, berth writes /var/lib/kubelet/kubeconfig with the EKS exec
// plugin.
package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/internal/flagwords"
	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/network/resolvconf"
	"github.com/berth-node/berth/runtime/containerd"
	"github.com/berth-node/berth/runtime/kubelet"
	"github.com/berth-node/berth/runtime/kubelet/maxpods"
	"github.com/berth-node/berth/runtime/supervise"
)

// Fixed facts of the node image layout.
const (
	ContainerdBinary = "/usr/bin/containerd"
	KubeletBinary    = "/usr/bin/kubelet"
	ResolvConfPath   = "/etc/resolv.conf"
	// DescribePath is where the plan description goes on a node (and under
	// the output directory of `berth render`).
	DescribePath = "/run/berth/plan.txt"
	// BootstrapTokenAnnotation requests a bootstrap-token join (see the
	// package doc).
	BootstrapTokenAnnotation = "berth.dev/bootstrap-token"
	// LabelVersion is the node label carrying the image's berth version.
	LabelVersion = "berth.dev/version"
	// DefaultPath is the PATH services get unless the user's
	// instance.environment sets one.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Inputs are everything the plan depends on. Build never changes them.
type Inputs struct {
	// Config is the merged, validated NodeConfig.
	Config *nodeconfig.NodeConfig
	// Instance is what IMDS said about this instance; nil on a machine
	// that is not an EC2 instance, which Machine describes instead.
	Instance *imds.Metadata
	// Machine is a node's identity off EC2 (its user data from a NoCloud
	// seed, berth.userdata= or the image): set exactly when Instance is
	// nil.
	Machine *Machine
	// Manifest is the image manifest: component versions, sandbox image.
	Manifest *manifest.Manifest
	// Host are facts the caller read from the machine.
	Host Host
	// TokenProvider picks the EKS exec credential plugin (zero: berth's own
	// signer, `berth eks-token`).
	TokenProvider kubelet.TokenProvider
}

// Machine is what identifies a node that is not an EC2 instance. Off EC2
// there is no instance type, zone, region or instance role, so the plan
// (issue 47):
//   - names the node by --hostname-override in spec.kubelet.flags, else
//     Hostname (a seed's meta-data local-hostname), and stops when
//     neither is there;
//   - gives it no provider ID, and kubelet no --cloud-provider=external
//     (no cloud controller would ever lift its uninitialized taint);
//   - sets max pods from spec.kubelet.config.maxPods, else kubelet's
//     default (maxpods.DefaultMaxPods), since there is no ENI table to
//     look up;
//   - has no region: no ECR credential provider, and no EKS token (the
//     node joins with a bootstrap token);
//   - derives /etc/machine-id from InstanceID, else the node name.
type Machine struct {
	// Source names where the node's user data came from, for plan.txt:
	// "NoCloud seed /dev/vdb", "berth.userdata=URL", "the image".
	Source string
	// InstanceID and Hostname are a seed's meta-data instance-id and
	// local-hostname; empty when there are none.
	InstanceID string
	Hostname   string
}

// OffEC2 is how the plan decided what instance metadata decides on EC2,
// for plan.txt; nil on EC2.
type OffEC2 struct {
	// NodeNameFrom says where NodeName came from.
	NodeNameFrom string
	// MaxPodsFrom says where MaxPods came from.
	MaxPodsFrom string
	// Source is Machine.Source.
	Source string
}

// Host are machine facts the caller reads (nodeadm reads the CPU count from
// the machine too); keeping them inputs keeps Build pure.
type Host struct {
	// CPUs is the number of online CPUs, for kubeReserved cpu.
	CPUs int
	// MemoryMiB is total memory; Build warns when kubeReserved would leave
	// pods nothing. Zero skips the check.
	MemoryMiB int64
	// NodeIP overrides the node IP from instance metadata (local-ipv4, or
	// the first IPv6 for IPv6 clusters), e.g. under QEMU.
	NodeIP string
	// Nameservers and SearchDomains are what the network phase got from
	// DHCP; instance.network fields override them in /etc/resolv.conf.
	Nameservers   []string
	SearchDomains []string
}

// File is one file to write, at its path on the node.
type File struct {
	Path string
	Mode os.FileMode
	Data []byte
}

// DNS is the name resolution the plan decided: the NodeConfig's
// spec.instance.network nameservers and domains, each falling back to the
// host's (what DHCP gave at boot) when the NodeConfig leaves it empty.
// Addresses are in canonical form, duplicates and trailing dots dropped.
type DNS struct {
	Nameservers []string
	Search      []string
}

// Plan is everything decided for a node.
type Plan struct {
	// Files are sorted by path.
	Files []File
	// Services are in start order.
	Services []supervise.Spec
	// Storage is the instance-store request, copied from the config; nil
	// when no strategy is set. The storage code decides with the disks it
	// finds.
	Storage *nodeconfig.LocalStorageOptions
	// StorageModules are loaded before the storage phase; empty without a
	// strategy.
	StorageModules []string
	// Shutdown is kubelet's effective graceful-shutdown periods, berth's
	// fallback pod grace period and the stop bound it needs.
	Shutdown Shutdown
	// Sysctls must be written to /proc/sys before kubelet starts, sorted by
	// key: berth's, with the berth.dev/sysctls annotation's over them
	// (machine.go).
	Sysctls []kubelet.Sysctl
	// KernelModules are loaded before the sysctls are written (the
	// berth.dev/kernel-modules annotation); a module the image lacks is
	// a warning.
	KernelModules []string
	// BlockedModules are never loaded once the apply phase has written
	// them to BlockedModulesPath (the berth.dev/blocked-kernel-modules
	// annotation): berth modprobe refuses the kernel's requests that
	// need one, the hotplug loop devices' (machine.go).
	BlockedModules []string
	// Hostname is the machine's hostname (the berth.dev/hostname
	// annotation), set by the apply phase over instance metadata's; empty
	// leaves that one. The node's name is NodeName, whatever this is.
	Hostname string
	// NTPServers are asked first, on port 123, from the apply phase on
	// (the berth.dev/ntp-servers annotation); the time phase's sources
	// stay as fallbacks.
	NTPServers []string
	// DNS is what /etc/resolv.conf says when the NodeConfig sets
	// spec.instance.network nameservers or domains; nil otherwise (the
	// network phase's DHCP resolv.conf stands). PID 1 hands it to the DHCP
	// renewer (network.Handle.SetDNSOverride) so renewals keep it.
	DNS *DNS
	// Warnings are fallbacks taken, for the boot report.
	Warnings []string

	NodeName   string
	NodeIP     string
	ProviderID string
	// OffEC2 says how a node that is not an EC2 instance was named and
	// sized; nil on EC2.
	OffEC2     *OffEC2
	ClusterDNS string
	MaxPods    int32
	// ContainerdSchema is the config.toml schema version written.
	ContainerdSchema int
	// BootstrapToken says kubelet joins by TLS bootstrapping.
	BootstrapToken bool
	// RegistryMirrors are the berth.dev/registry-mirrors annotation's, a
	// hosts.toml each among Files.
	RegistryMirrors []nodeconfig.RegistryMirrors
	// PulledRecords are the image's preloaded images as kubelet's pull
	// records (kubelet.PreloadedRecords), one per image ID, which the
	// apply phase merges into kubelet.PulledRecordsDir before kubelet
	// starts; none when the user's kubelet.config asks kubelet to verify
	// preloaded images.
	PulledRecords []kubelet.PulledRecord
}

var bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// builder carries one Build: the inputs, the plan being filled in, the
// files in the order they were decided, and the few facts one step hands
// the next.
type builder struct {
	in    Inputs
	spec  *nodeconfig.NodeConfigSpec
	p     *Plan
	files []File
	// ipv6 is the cluster's family (cluster step), for the node IP and the
	// sysctls.
	ipv6 bool
	// configDir is kubelet's drop-in directory when the user set
	// kubelet.config (kubelet step); bootstrapKubeconfig the bootstrap
	// kubeconfig's path when joining by token (kubeconfig step). Both
	// become kubelet flags (services step).
	configDir, bootstrapKubeconfig string
}

func (b *builder) add(path string, mode os.FileMode, data []byte) {
	b.files = append(b.files, File{Path: path, Mode: mode, Data: data})
}

// Build decides the plan, one named step after the other, each deciding
// its part of the node; the golden tests cover every step. Errors name the
// field or input at fault.
func Build(in Inputs) (*Plan, error) {
	switch {
	case in.Config == nil:
		return nil, fmt.Errorf("building plan: no NodeConfig")
	case in.Instance == nil && in.Machine == nil:
		return nil, fmt.Errorf("building plan: no instance metadata and no machine facts")
	case in.Instance != nil && in.Machine != nil:
		return nil, fmt.Errorf("building plan: both instance metadata and machine facts; an EC2 instance has only the first")
	case in.Manifest == nil:
		return nil, fmt.Errorf("building plan: no image manifest")
	}
	if err := checkInputs(in); err != nil {
		return nil, err
	}
	b := &builder{in: in, spec: &in.Config.Spec, p: &Plan{}}
	if in.Machine != nil {
		b.p.OffEC2 = &OffEC2{Source: in.Machine.Source}
	}
	for _, step := range []func() error{
		b.cluster,            // cluster facts: DNS IP, provider ID, CA, machine ID
		b.node,               // node name and IP
		b.kubelet,            // max pods, version toggles, shutdown, config.json and drop-in
		b.kubeconfig,         // bootstrap token or EKS token
		b.credentialProvider, // ECR logins
		b.containerd,         // config.toml and the base runtime spec
		b.mirrors,            // hosts.toml per registry mirror
		b.dns,                // resolv.conf when the user sets it
		b.storage,            // instance store and its modules
		b.machine,            // sysctls, modules to load, hostname, NTP servers
		b.services,           // containerd and kubelet
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	p := b.p
	slices.SortFunc(b.files, func(x, y File) int { return strings.Compare(x.Path, y.Path) })
	p.Files = b.files
	for i, w := range p.Warnings {
		p.Warnings[i] = oneLine(w)
	}
	if err := p.checkRendered(); err != nil {
		return nil, err
	}
	return p, nil
}

// cluster decides the cluster facts: the DNS service IP, the provider ID,
// the CA and the machine ID.
func (b *builder) cluster() error {
	var err error
	if b.p.ClusterDNS, b.ipv6, err = nodeconfig.ClusterDNSOf(b.spec); err != nil {
		return fmt.Errorf("spec.%w", err)
	}
	if len(b.spec.Cluster.CertificateAuthority) == 0 {
		return fmt.Errorf("spec.cluster.certificateAuthority is empty")
	}
	if b.in.Instance == nil {
		// Off EC2: no provider ID (nothing in the cluster knows such a
		// provider), and the machine ID once the node is named (node).
		b.add(kubelet.CACertPath, ModeFor(kubelet.CACertPath), b.spec.Cluster.CertificateAuthority)
		return nil
	}
	if b.in.Instance.InstanceID == "" || b.in.Instance.AvailabilityZone == "" {
		return fmt.Errorf("instance metadata: instance-id %q and placement/availability-zone %q are both needed for the provider ID", b.in.Instance.InstanceID, b.in.Instance.AvailabilityZone)
	}
	b.p.ProviderID = kubelet.ProviderID(b.in.Instance.AvailabilityZone, b.in.Instance.InstanceID)
	b.add(kubelet.CACertPath, ModeFor(kubelet.CACertPath), b.spec.Cluster.CertificateAuthority)
	// kubelet reports /etc/machine-id as the node's system UUID, and there is
	// no systemd to make one: derive it from the instance ID, so it is stable
	// across reboots of one instance and distinct between instances.
	b.add(MachineIDPath, ModeFor(MachineIDPath), machineID(b.in.Instance.InstanceID))
	return nil
}

// node decides the node's name and IP.
func (b *builder) node() error {
	if b.in.Instance == nil {
		return b.nodeOffEC2()
	}
	switch {
	case b.spec.FeatureEnabled(nodeconfig.InstanceIdNodeName):
		b.p.NodeName = b.in.Instance.InstanceID
	case b.in.Instance.LocalHostname != "":
		name, warn := IMDSHostname(b.in.Instance.LocalHostname)
		if warn != "" {
			b.p.Warnings = append(b.p.Warnings, warn)
		}
		b.p.NodeName = name
	default:
		return fmt.Errorf("instance metadata: local-hostname is empty; it names the node (or enable feature gate %s)", nodeconfig.InstanceIdNodeName)
	}
	switch {
	case b.in.Host.NodeIP != "":
		b.p.NodeIP = b.in.Host.NodeIP
	case b.ipv6 && len(b.in.Instance.IPv6s) > 0:
		b.p.NodeIP = b.in.Instance.IPv6s[0]
	case b.ipv6:
		return fmt.Errorf("instance metadata: the cluster's services are IPv6 (cluster DNS %s) but the instance has no IPv6 address", b.p.ClusterDNS)
	case b.in.Instance.LocalIPv4 != "":
		b.p.NodeIP = b.in.Instance.LocalIPv4
	default:
		b.p.Warnings = append(b.p.Warnings, "instance metadata has no local-ipv4; kubelet picks the node IP itself")
	}
	return nil
}

// nodeOffEC2 names a node that is not an EC2 instance (Machine says
// how), sets its IP from the host's facts, and derives its machine ID.
func (b *builder) nodeOffEC2() error {
	m, off := b.in.Machine, b.p.OffEC2
	override := userFlagValue(b.spec.Kubelet.Flags, "--hostname-override")
	switch {
	case b.spec.FeatureEnabled(nodeconfig.InstanceIdNodeName):
		if m.InstanceID == "" {
			return fmt.Errorf("feature gate %s names the node by its instance ID, and %s gives none (a NoCloud seed's meta-data instance-id)", nodeconfig.InstanceIdNodeName, m.Source)
		}
		b.p.NodeName, off.NodeNameFrom = m.InstanceID, "instance-id, feature gate "+string(nodeconfig.InstanceIdNodeName)
	case override != "":
		b.p.NodeName, off.NodeNameFrom = override, "spec.kubelet.flags --hostname-override"
	case m.Hostname != "":
		b.p.NodeName, off.NodeNameFrom = m.Hostname, m.Source+" meta-data local-hostname"
	default:
		return fmt.Errorf("no node name: this is not an EC2 instance, so no instance metadata names it; give local-hostname in the NoCloud seed's meta-data, or --hostname-override in spec.kubelet.flags (user data from %s)", m.Source)
	}
	if err := syntax.NodeName(b.p.NodeName); err != nil {
		return fmt.Errorf("node name from %s: %w", off.NodeNameFrom, err)
	}
	if b.p.NodeIP = b.in.Host.NodeIP; b.p.NodeIP == "" {
		b.p.Warnings = append(b.p.Warnings, "no node IP known (not an EC2 instance, and the network gave none); kubelet picks the node IP itself")
	}
	// kubelet reports /etc/machine-id as the node's system UUID: stable
	// across reboots as long as the seed's instance-id, or else the
	// node's name, is.
	b.add(MachineIDPath, ModeFor(MachineIDPath), machineID(cmp.Or(m.InstanceID, "node-name:"+b.p.NodeName)))
	return nil
}

// userFlagValue is the value of the last occurrence of a kubelet flag in
// the user's kubelet.flags ("" when absent), as kubelet would take it.
func userFlagValue(flags []string, name string) string {
	words := kubelet.SplitUserFlags(flags)
	v := ""
	for i := 0; i < len(words); i++ {
		n, inline, ok := flagwords.Name(words[i])
		if !ok || n != name {
			continue
		}
		switch {
		case inline:
			_, v, _ = strings.Cut(words[i], "=")
		case i+1 < len(words):
			i++
			v = words[i]
		}
	}
	return v
}

// kubelet decides max pods, nodeadm's version toggles, the graceful
// shutdown, and writes config.json and the user's drop-in.
func (b *builder) kubelet() error {
	// Max pods: the user's kubelet.config maxPods wins (its drop-in
	// overrides config.json), else the table and maxPodsExpression.
	userMax, userSet, err := nodeconfig.UserMaxPods(b.spec.Kubelet.Config)
	if err != nil {
		return fmt.Errorf("spec.kubelet.config.maxPods: %w", err)
	}
	if userSet {
		b.p.MaxPods = userMax
		if b.spec.Kubelet.MaxPodsExpression != "" {
			b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("kubelet.maxPodsExpression ignored: kubelet.config.maxPods is %d", userMax))
		}
	} else if b.in.Instance == nil {
		// Off EC2 there is no instance type, so no ENI table to read.
		b.p.MaxPods = maxpods.DefaultMaxPods
		if b.spec.Kubelet.MaxPodsExpression != "" {
			b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("kubelet.maxPodsExpression %q not applied: not an EC2 instance, so no ENI facts; set kubelet.config.maxPods", b.spec.Kubelet.MaxPodsExpression))
		}
	} else {
		r := maxpods.Compute(b.in.Instance.InstanceType, b.spec.Kubelet.MaxPodsExpression)
		b.p.MaxPods = r.MaxPods
		b.p.Warnings = append(b.p.Warnings, r.Warnings...)
	}
	if off := b.p.OffEC2; off != nil {
		off.MaxPodsFrom = "kubelet's default; not an EC2 instance, so no instance type to size it by: set kubelet.config.maxPods"
		if userSet {
			off.MaxPodsFrom = "spec.kubelet.config.maxPods"
		}
	}
	cpus := b.in.Host.CPUs
	if cpus < 1 {
		return fmt.Errorf("host facts: %d CPUs; the caller must count online CPUs", cpus)
	}
	// nodeadm's version toggles, keyed on the image's kubelet; the
	// shutdown they and the user's kubelet.config add up to.
	var toggles kubelet.Toggles
	if kv := b.in.Manifest.Components["kubelet"]; kv == "" {
		b.p.Warnings = append(b.p.Warnings, "image manifest names no kubelet version; config.json gets none of nodeadm's version toggles (feature gates, graceful node shutdown)")
	} else if toggles, err = kubelet.VersionToggles(kv); err != nil {
		return err
	}
	b.p.Shutdown, toggles = decideShutdown(b.spec.Kubelet.Config, toggles, &b.p.Warnings)
	kc := kubelet.Config(kubelet.ConfigInputs{ClusterDNS: b.p.ClusterDNS, ProviderID: b.p.ProviderID, MaxPods: b.p.MaxPods, CPUs: cpus, Toggles: toggles})
	if b.in.Host.MemoryMiB > 0 {
		if reserved := kubelet.MemoryMebibytesToReserve(b.p.MaxPods) + 100; reserved >= b.in.Host.MemoryMiB {
			b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("kubeReserved memory plus eviction threshold (%d MiB for %d pods) leaves nothing of the machine's %d MiB for pods", reserved, b.p.MaxPods, b.in.Host.MemoryMiB))
		}
	}
	data, err := kubelet.MarshalConfig(kc)
	if err != nil {
		return err
	}
	b.add(kubelet.ConfigPath, ModeFor(kubelet.ConfigPath), data)
	if len(b.spec.Kubelet.Config) > 0 {
		data, err := kubelet.DropIn(b.spec.Kubelet.Config)
		if err != nil {
			return fmt.Errorf("spec.kubelet.config: %w", err)
		}
		b.add(kubelet.DropInPath, ModeFor(kubelet.DropInPath), data)
		b.configDir = kubelet.ConfigDir
	}
	return b.pulledRecords()
}

// pulledRecords decides the pull records of the images berth imports. An
// image left out (no ID in an older manifest) is a warning: the node works,
// and only a pull of the same image under another name would hide it.
func (b *builder) pulledRecords() error {
	ok, err := kubelet.RecordsPreloaded(b.spec.Kubelet.Config)
	if err != nil || !ok {
		return err
	}
	var images []kubelet.PreloadedImage
	for _, im := range b.in.Manifest.Images {
		images = append(images, kubelet.PreloadedImage{Name: im.Name, ID: im.ID})
	}
	recs, err := kubelet.PreloadedRecords(images)
	b.p.PulledRecords = recs
	if err != nil {
		b.p.Warnings = append(b.p.Warnings, "kubelet pull records of preloaded images: "+err.Error())
	}
	return nil
}

// kubeconfig writes the bootstrap kubeconfig (join by token) or the
// kubeconfig with the EKS token exec.
func (b *builder) kubeconfig() error {
	token, err := bootstrapToken(b.in.Config)
	if err != nil {
		return err
	}
	if token != "" {
		data, err := kubelet.Kubeconfig(kubelet.KubeconfigInputs{Server: b.spec.Cluster.APIServerEndpoint, BootstrapToken: token})
		if err != nil {
			return err
		}
		// It holds a secret.
		b.add(kubelet.BootstrapKubeconfig, ModeFor(kubelet.BootstrapKubeconfig), data)
		b.bootstrapKubeconfig = kubelet.BootstrapKubeconfig
		b.p.BootstrapToken = true
	} else if b.in.Instance == nil {
		return fmt.Errorf("kubeconfig: not an EC2 instance (user data from %s), so there is no region or instance role for an EKS token; join with a bootstrap token (the berth.dev/bootstrap-token annotation)", b.in.Machine.Source)
	} else {
		cluster := b.spec.Cluster.Name
		if b.spec.Cluster.EnableOutpost != nil && *b.spec.Cluster.EnableOutpost {
			cluster = b.spec.Cluster.ID
		}
		if cluster == "" || b.in.Instance.Region == "" {
			return fmt.Errorf("kubeconfig: the EKS token needs the cluster name (spec.cluster.name, or spec.cluster.id on Outposts) %q and the region from instance metadata %q", cluster, b.in.Instance.Region)
		}
		data, err := kubelet.Kubeconfig(kubelet.KubeconfigInputs{Server: b.spec.Cluster.APIServerEndpoint, Exec: b.in.TokenProvider.Exec(cluster, b.in.Instance.Region)})
		if err != nil {
			return err
		}
		b.add(kubelet.KubeconfigPath, ModeFor(kubelet.KubeconfigPath), data)
	}
	return nil
}

// credentialProvider writes the image credential provider config: ECR
// logins from the instance role, as nodeadm configures, whatever the join.
func (b *builder) credentialProvider() error {
	// Image credential provider: ECR logins from the instance role, as
	// nodeadm configures, whatever the join; kubelet runs it only for
	// images in ECR, and in ECR Public from kubelet 1.32, as nodeadm.
	if b.in.Instance == nil {
		// Off EC2 there is no region and no instance role to log in to
		// ECR with; kubelet gets no credential provider (FlagInputs.OffEC2).
		return nil
	}
	ecrPublic := false
	var err error
	if kv := b.in.Manifest.Components["kubelet"]; kv == "" {
		b.p.Warnings = append(b.p.Warnings, "image manifest names no kubelet version; the image credential provider config leaves out ECR Public (public.ecr.aws, ecr-public.aws.com), which nodeadm matches from kubelet 1.32")
	} else if ecrPublic, err = kubelet.ServesECRPublic(kv); err != nil {
		return err
	}
	data, err := kubelet.CredentialProviderConfig(ecrPublic)
	if err != nil {
		return err
	}
	b.add(kubelet.CredentialProviderConfigPath, ModeFor(kubelet.CredentialProviderConfigPath), data)
	return nil
}

// containerd writes config.toml and the base runtime spec.
func (b *builder) containerd() error {
	var err error
	cv := b.in.Manifest.Components["containerd"]
	if cv == "" {
		b.p.ContainerdSchema = 3
		b.p.Warnings = append(b.p.Warnings, "image manifest names no containerd version; writing config.toml for containerd 2.x (schema 3)")
	} else if b.p.ContainerdSchema, err = containerd.SchemaVersion(cv); err != nil {
		return err
	}
	if b.in.Manifest.SandboxImage == "" {
		b.p.Warnings = append(b.p.Warnings, "image manifest names no sandbox image; containerd uses its built-in pause image, which needs a registry")
	}
	data, err := containerd.Config(containerd.ConfigInputs{
		Schema:       b.p.ContainerdSchema,
		SandboxImage: b.in.Manifest.SandboxImage,
		User:         b.spec.Containerd.Config,
	})
	if err != nil {
		return fmt.Errorf("spec.%w", err)
	}
	b.add(containerd.ConfigPath, ModeFor(containerd.ConfigPath), data)
	// The base runtime spec on every node, as nodeadm writes it: the
	// default carries pods' RLIMIT_NOFILE 65536/1048576.
	data, err = containerd.BaseRuntimeSpec(b.spec.Containerd.BaseRuntimeSpec)
	if err != nil {
		return fmt.Errorf("spec.containerd.baseRuntimeSpec: %w", err)
	}
	b.add(containerd.BaseRuntimeSpecPath, ModeFor(containerd.BaseRuntimeSpecPath), data)
	return nil
}

// mirrors writes a hosts.toml per registry mirror.
func (b *builder) mirrors() error {
	// Registry mirrors: a hosts.toml per registry, which containerd reads
	// at each pull (config_path); the apply phase writes them before
	// containerd starts.
	mirrors, err := nodeconfig.RegistryMirrorsOf(b.in.Config)
	if err != nil {
		return err
	}
	b.files = append(b.files, registryHostsFiles(mirrors)...)
	b.p.RegistryMirrors = mirrors
	return nil
}

// dns writes resolv.conf when the user set nameservers or domains.
func (b *builder) dns() error {
	// Name resolution: only when the user asked; otherwise the network
	// phase's DHCP resolv.conf stands.
	if net := b.spec.Instance.Network; len(net.Nameservers) > 0 || len(net.Domains) > 0 {
		rc, err := resolvConf(net, b.in.Host, &b.p.Warnings)
		if err != nil {
			return err
		}
		b.p.DNS = &DNS{Search: rc.Search}
		for _, a := range rc.Nameservers {
			b.p.DNS.Nameservers = append(b.p.DNS.Nameservers, a.String())
		}
		b.add(ResolvConfPath, ModeFor(ResolvConfPath), resolvconf.Render(rc))
	}
	return nil
}

// storage decides the instance-store request and its modules.
func (b *builder) storage() error {
	if b.spec.Instance.LocalStorage.Strategy != "" {
		ls := b.spec.Instance.LocalStorage
		ls.DisabledMounts = slices.Clone(ls.DisabledMounts)
		if ls.MountPath == "" {
			ls.MountPath = nodeconfig.DefaultLocalStorageMountPath
		}
		b.p.Storage = &ls
	}
	b.p.StorageModules = storageModules(b.p.Storage)
	return nil
}

// services decides containerd's and kubelet's specs.
func (b *builder) services() error {
	env := serviceEnv(b.spec.Instance.Environment)
	labels := map[string]string{}
	if v := kubelet.LabelValue(b.in.Manifest.BerthVersion); v != "" {
		labels[LabelVersion] = v
	}
	b.p.Services = []supervise.Spec{
		{
			Name:        "containerd",
			Argv:        []string{ContainerdBinary, "--config", containerd.ConfigPath},
			Env:         env,
			Dir:         "/",
			Cgroup:      kubelet.ContainerdCgroup,
			OOMScoreAdj: -999,
			Ready:       supervise.Probe{Kind: supervise.ProbeContainerdVersion, Target: containerd.Socket},
			StopTimeout: 30 * time.Second,
			Rlimits:     containerd.Rlimits(),
		},
		{
			Name: "kubelet",
			Argv: append([]string{KubeletBinary}, kubelet.Flags(kubelet.FlagInputs{
				ConfigDir:           b.configDir,
				BootstrapKubeconfig: b.bootstrapKubeconfig,
				NodeIP:              b.p.NodeIP,
				HostnameOverride:    b.p.NodeName,
				OffEC2:              b.in.Instance == nil,
				Labels:              labels,
				User:                b.spec.Kubelet.Flags,
			})...),
			Env:         env,
			Dir:         "/",
			Cgroup:      kubelet.KubeletCgroup,
			OOMScoreAdj: -999,
			DependsOn:   []string{"containerd"},
			Ready:       supervise.Probe{Kind: supervise.ProbeHTTP, Target: kubelet.HealthzURL},
			StopTimeout: 30 * time.Second,
			Rlimits:     kubelet.Rlimits(),
		},
	}
	return nil
}

// bootstrapToken reads the bootstrap-token annotation, if any.
func bootstrapToken(cfg *nodeconfig.NodeConfig) (string, error) {
	raw, ok := cfg.Metadata["annotations"]
	if !ok {
		return "", nil
	}
	var ann map[string]string
	if err := json.Unmarshal(raw, &ann); err != nil {
		return "", fmt.Errorf("metadata.annotations: want a map of strings: %w", err)
	}
	tok, ok := ann[BootstrapTokenAnnotation]
	if !ok {
		return "", nil
	}
	if !bootstrapTokenRE.MatchString(tok) {
		// Never echo the token: it is a secret even when malformed.
		return "", fmt.Errorf("metadata.annotations[%q]: not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}", BootstrapTokenAnnotation)
	}
	return tok, nil
}

// serviceEnv is PATH plus the user's instance.environment, sorted by key.
func serviceEnv(user map[string]string) []string {
	env := map[string]string{"PATH": DefaultPath}
	for k, v := range user {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

// resolvConf decides resolv.conf: the NodeConfig's nameservers and
// domains, field by field; a field the user left empty keeps what DHCP
// gave (host). network/resolvconf renders it, as it does at every DHCP
// renewal. The host's values were checked by the network phase already;
// one that fails here is left out with a warning rather than failing the
// boot, as the network phase does.
func resolvConf(net nodeconfig.NetworkOptions, host Host, warnings *[]string) (resolvconf.File, error) {
	var hostNS []netip.Addr
	for _, s := range host.Nameservers {
		if err := syntax.IP(s, true); err != nil {
			*warnings = append(*warnings, fmt.Sprintf("host nameserver left out of /etc/resolv.conf: %v", err))
			continue
		}
		a, _ := netip.ParseAddr(s) // syntax.IP parsed it already
		hostNS = append(hostNS, a)
	}
	var hostSearch []string
	for _, s := range host.SearchDomains {
		if err := syntax.DNSName(s); err != nil {
			*warnings = append(*warnings, fmt.Sprintf("host search domain left out of /etc/resolv.conf: %v", err))
			continue
		}
		hostSearch = append(hostSearch, s)
	}
	rc, err := resolvconf.Merge(hostNS, "", hostSearch, net.Nameservers, net.Domains)
	if err != nil {
		return resolvconf.File{}, err
	}
	if len(rc.Nameservers) > resolvconf.MaxNameservers {
		*warnings = append(*warnings, fmt.Sprintf("instance.network.nameservers has %d entries; resolvers use only the first %d", len(rc.Nameservers), resolvconf.MaxNameservers))
	}
	return rc, nil
}

// SHA256 is the file's digest in hex, as the plan description shows it.
// MachineIDPath is systemd's machine ID file, which kubelet reads.
const MachineIDPath = "/etc/machine-id"

// machineID is the 32 hex digits machine-id(5) wants, from the instance ID.
func machineID(instanceID string) []byte {
	sum := sha256.Sum256([]byte("berth machine-id\x00" + instanceID))
	return fmt.Appendf(nil, "%x\n", sum[:16])
}

func (f File) SHA256() string {
	sum := sha256.Sum256(f.Data)
	return fmt.Sprintf("%x", sum)
}
