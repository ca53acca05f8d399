// Package nodeconfig is berth's copy of nodeadm's node.eks.aws/v1alpha1
// NodeConfig API: the types, parsing with unknown-field warnings, nodeadm's
// merge rules, validation that names the source and field path of every
// problem, and loading from the image directory, user data and the kernel
// command line. It decides only; it never touches the machine.
package nodeconfig

import "encoding/json"

// APIVersion and Kind are the only type identifiers accepted; nodeadm
// rejects anything else too, so a typo cannot silently produce an empty node.
const (
	APIVersion = "node.eks.aws/v1alpha1"
	Kind       = "NodeConfig"
)

// NodeConfig mirrors nodeadm's api/v1alpha1.NodeConfig. nodeadm embeds
// metav1.TypeMeta and metav1.ObjectMeta; berth uses plain fields with the
// same JSON names so that marshalled output carries no apimachinery noise
// (metav1.Time writes "creationTimestamp": null).
type NodeConfig struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Metadata is accepted and ignored, as nodeadm ignores ObjectMeta.
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
	Spec     NodeConfigSpec             `json:"spec,omitempty,omitzero"`
}

// NodeConfigSpec mirrors nodeadm's NodeConfigSpec. Struct fields carry
// omitzero as well as nodeadm's omitempty so that rendered output shows
// only what is set.
type NodeConfigSpec struct {
	Cluster    ClusterDetails    `json:"cluster,omitempty,omitzero"`
	Containerd ContainerdOptions `json:"containerd,omitempty,omitzero"`
	Instance   InstanceOptions   `json:"instance,omitempty,omitzero"`
	Kubelet    KubeletOptions    `json:"kubelet,omitempty,omitzero"`
	// FeatureGates holds key-value pairs to enable or disable features.
	FeatureGates map[Feature]bool `json:"featureGates,omitempty"`
}

// ClusterDetails are the coordinates of the cluster (EKS DescribeCluster).
type ClusterDetails struct {
	// Name is the name of the EKS cluster.
	Name string `json:"name,omitempty"`
	// APIServerEndpoint is the https URL of the cluster's kube-apiserver.
	APIServerEndpoint string `json:"apiServerEndpoint,omitempty"`
	// CertificateAuthority is the cluster CA chain in PEM; in JSON/YAML it
	// is base64 of that PEM (encoding/json's []byte rule, as in nodeadm).
	CertificateAuthority []byte `json:"certificateAuthority,omitempty"`
	// CIDR is the cluster's service CIDR, used to infer the cluster DNS IP.
	CIDR string `json:"cidr,omitempty"`
	// EnableOutpost configures the node for an AWS Outpost.
	EnableOutpost *bool `json:"enableOutpost,omitempty"`
	// ID identifies the cluster; only used on Outposts.
	ID string `json:"id,omitempty"`
}

// InlineDocument is a free-form JSON object (nodeadm's
// map[string]runtime.RawExtension). Values are kept raw so that merging and
// rendering never reinterpret fields berth does not know.
type InlineDocument map[string]json.RawMessage

// ContainerdOptions are additional parameters for containerd.
type ContainerdOptions struct {
	// Config is inline containerd TOML, deep-merged over berth's defaults.
	Config string `json:"config,omitempty"`
	// BaseRuntimeSpec is a (partial) OCI runtime spec merged over the
	// default spec all containers are based on.
	BaseRuntimeSpec InlineDocument `json:"baseRuntimeSpec,omitempty"`
}

// InstanceOptions determine how the node's OS and devices are configured.
type InstanceOptions struct {
	LocalStorage LocalStorageOptions `json:"localStorage,omitempty,omitzero"`
	// Environment holds variables set for the node's services. nodeadm's
	// newer API has this; the issue asks for a flat map, so berth sets the
	// same variables for every service it supervises.
	Environment map[string]string `json:"environment,omitempty"`
	// Network configures name resolution; berth writes /etc/resolv.conf
	// from it directly (no systemd-resolved).
	Network NetworkOptions `json:"network,omitempty,omitzero"`
}

// NetworkOptions configure the node's resolver.
type NetworkOptions struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domains     []string `json:"domains,omitempty"`
}

// LocalStorageOptions control how EC2 instance stores are used.
type LocalStorageOptions struct {
	Strategy LocalStorageStrategy `json:"strategy,omitempty"`
	// MountPath is where the filesystem is mounted; nodeadm's default is
	// /mnt/k8s-disks (DefaultLocalStorageMountPath).
	MountPath string `json:"mountPath,omitempty"`
	// DisabledMounts are directories that stay off local storage.
	DisabledMounts []DisabledMount `json:"disabledMounts,omitempty"`
}

// DefaultLocalStorageMountPath is nodeadm's default for MountPath.
const DefaultLocalStorageMountPath = "/mnt/k8s-disks"

// LocalStorageStrategy says how instance-store disks are combined.
type LocalStorageStrategy string

const (
	// LocalStorageRAID0 makes one raid0 volume from all local disks.
	LocalStorageRAID0 LocalStorageStrategy = "RAID0"
	// LocalStorageRAID10 makes one raid10 volume; needs at least 4 disks.
	LocalStorageRAID10 LocalStorageStrategy = "RAID10"
	// LocalStorageMount mounts each local disk on its own.
	LocalStorageMount LocalStorageStrategy = "Mount"
)

// LocalStorageStrategies lists the known strategies, for validation.
func LocalStorageStrategies() []LocalStorageStrategy {
	return []LocalStorageStrategy{LocalStorageRAID0, LocalStorageRAID10, LocalStorageMount}
}

// DisabledMount names a directory that is not moved onto local storage.
type DisabledMount string

const (
	// DisabledMountContainerd is /var/lib/containerd.
	DisabledMountContainerd DisabledMount = "Containerd"
	// DisabledMountPodLogs is /var/log/pods.
	DisabledMountPodLogs DisabledMount = "PodLogs"
)

// DisabledMounts lists the known disabled-mount names, for validation.
func DisabledMounts() []DisabledMount {
	return []DisabledMount{DisabledMountContainerd, DisabledMountPodLogs}
}

// KubeletOptions are additional parameters for kubelet.
type KubeletOptions struct {
	// Config holds KubeletConfiguration fields merged over the defaults;
	// free-form, so newer kubelet fields pass through.
	Config InlineDocument `json:"config,omitempty"`
	// Flags are kubelet command-line arguments appended after berth's.
	Flags []string `json:"flags,omitempty"`
	// MaxPodsExpression is a CEL expression over default_enis, ips_per_eni
	// and max_pods giving the node's maxPods (see MaxPodsEnv).
	MaxPodsExpression string `json:"maxPodsExpression,omitempty"`
}

// Feature names a feature gate.
type Feature string

const (
	// InstanceIdNodeName names the node after its EC2 instance ID instead
	// of its private DNS name. Default off.
	InstanceIdNodeName Feature = "InstanceIdNodeName"
	// FastImagePull enables parallel image pulls. Default off.
	FastImagePull Feature = "FastImagePull"
	// OSManagedNoManageENIs is nodeadm's gate for OS-configured secondary
	// ENIs; accepted so nodeadm user data validates. Default off.
	OSManagedNoManageENIs Feature = "OSManagedNoManageENIs"
)

// Features lists the feature gates berth knows, for validation.
func Features() []Feature {
	return []Feature{InstanceIdNodeName, FastImagePull, OSManagedNoManageENIs}
}

// FeatureEnabled reports whether a gate is on; every known gate defaults
// to off, as in nodeadm.
func (s *NodeConfigSpec) FeatureEnabled(f Feature) bool {
	return s.FeatureGates[f]
}
