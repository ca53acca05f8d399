package bottlerocket

import (
	"slices"

	"github.com/berth-node/berth/config/fate"
)

// Setting names one Bottlerocket setting, or a family of them, with how
// berth takes it.
type Setting struct {
	// Key is the setting's path as Bottlerocket's settings reference
	// writes it (settings.kubernetes.max-pods); <name> stands for a key
	// the user chooses (settings.host-containers.<name>), and a key that
	// ends at a namespace covers every setting under it.
	Key string
	// Fate is honoured, ignored or refused. A honoured setting may
	// still refuse some values, or warn on some; Why says which.
	Fate fate.Fate
	// Why says what berth does with it, for the README's table and for
	// the warning or error that names it.
	Why string
}

// Table is every setting this package knows: settings.kubernetes first,
// grouped by what each sets, then Bottlerocket's other namespaces in
// alphabetical order. A key under settings that no row covers is
// unknown: a warning naming its path, because a setting added by a newer
// Bottlerocket must not stop a node that berth could configure anyway.
var Table = []Setting{
	{"settings.kubernetes.api-server", fate.Honoured, "spec.cluster.apiServerEndpoint (an https URL)"},
	{"settings.kubernetes.cluster-certificate", fate.Honoured, "spec.cluster.certificateAuthority (base64 of the PEM bundle, as in a NodeConfig)"},
	{"settings.kubernetes.cluster-name", fate.Honoured, "spec.cluster.name"},
	{"settings.kubernetes.cluster-dns-ip", fate.Honoured, "kubelet's clusterDNS (one address or a list); when it is missing, Bottlerocket asks the EKS API for the service CIDR and berth does not, so a warning says to give it (or spec.cluster.cidr)"},
	{"settings.kubernetes.cluster-domain", fate.Honoured, "kubelet's clusterDomain"},
	{"settings.kubernetes.max-pods", fate.Honoured, "kubelet's maxPods (without it berth computes maxPods from the instance type, as Bottlerocket does)"},
	{"settings.kubernetes.node-labels", fate.Honoured, "kubelet's --node-labels (KubeletConfiguration has no labels field), after berth's own labels"},
	{"settings.kubernetes.node-taints", fate.Honoured, "kubelet's --register-with-taints: KEY=VALUE:EFFECT, or KEY:EFFECT for an empty value"},
	{"settings.kubernetes.node-ip", fate.Honoured, "kubelet's --node-ip"},
	{"settings.kubernetes.hostname-override", fate.Honoured, "kubelet's --hostname-override: the node's name"},
	{"settings.kubernetes.hostname-override-source", fate.Honoured, "instance-id: spec.featureGates.InstanceIdNodeName; private-dns-name: berth's default"},
	{"settings.kubernetes.provider-id", fate.Honoured, "kubelet's providerID"},
	{"settings.kubernetes.authentication-mode", fate.Honoured, "aws: berth's EKS exec credential plugin (the default); tls: a bootstrap-token join, which needs bootstrap-token"},
	{"settings.kubernetes.bootstrap-token", fate.Honoured, "annotation berth.dev/bootstrap-token when authentication-mode is tls; otherwise ignored with a warning, as Bottlerocket ignores it"},
	{"settings.kubernetes.standalone-mode", fate.Refused, "berth always joins a cluster; false is accepted"},
	{"settings.kubernetes.cloud-provider", fate.Honoured, "berth always runs kubelet with --cloud-provider=external; \"aws\" or \"\" is accepted with a warning"},
	{"settings.kubernetes.server-tls-bootstrap", fate.Honoured, "kubelet's serverTLSBootstrap"},
	{"settings.kubernetes.server-certificate", fate.Ignored, "berth writes no kubelet serving certificate from user data: use server-tls-bootstrap"},
	{"settings.kubernetes.server-key", fate.Ignored, "berth writes no kubelet serving key from user data: use server-tls-bootstrap"},
	{"settings.kubernetes.credential-providers", fate.Ignored, "berth is kubelet's image credential provider for ECR's registries, as nodeadm configures it; other providers and image patterns cannot be set"},
	{"settings.kubernetes.static-pods.<name>", fate.Refused, "berth runs no static pods from user data: run the pod as a DaemonSet; an entry with enabled = false is ignored with a warning"},
	{"settings.kubernetes.static-pods-enabled", fate.Ignored, "berth runs no static pods from user data"},
	{"settings.kubernetes.eviction-hard", fate.Honoured, "kubelet's evictionHard"},
	{"settings.kubernetes.eviction-soft", fate.Honoured, "kubelet's evictionSoft"},
	{"settings.kubernetes.eviction-soft-grace-period", fate.Honoured, "kubelet's evictionSoftGracePeriod"},
	{"settings.kubernetes.eviction-max-pod-grace-period", fate.Honoured, "kubelet's evictionMaxPodGracePeriod"},
	{"settings.kubernetes.kube-reserved", fate.Honoured, "kubelet's kubeReserved (cpu, memory, ephemeral-storage, pid)"},
	{"settings.kubernetes.system-reserved", fate.Honoured, "kubelet's systemReserved (cpu, memory, ephemeral-storage, pid)"},
	{"settings.kubernetes.reserved-cpus", fate.Honoured, "kubelet's reservedSystemCPUs"},
	{"settings.kubernetes.allowed-unsafe-sysctls", fate.Honoured, "kubelet's allowedUnsafeSysctls"},
	{"settings.kubernetes.registry-qps", fate.Honoured, "kubelet's registryPullQPS"},
	{"settings.kubernetes.registry-burst", fate.Honoured, "kubelet's registryBurst"},
	{"settings.kubernetes.event-qps", fate.Honoured, "kubelet's eventRecordQPS"},
	{"settings.kubernetes.event-burst", fate.Honoured, "kubelet's eventBurst"},
	{"settings.kubernetes.kube-api-qps", fate.Honoured, "kubelet's kubeAPIQPS"},
	{"settings.kubernetes.kube-api-burst", fate.Honoured, "kubelet's kubeAPIBurst"},
	{"settings.kubernetes.container-log-max-size", fate.Honoured, "kubelet's containerLogMaxSize"},
	{"settings.kubernetes.container-log-max-files", fate.Honoured, "kubelet's containerLogMaxFiles"},
	{"settings.kubernetes.container-log-max-workers", fate.Honoured, "kubelet's containerLogMaxWorkers"},
	{"settings.kubernetes.container-log-monitor-interval", fate.Honoured, "kubelet's containerLogMonitorInterval"},
	{"settings.kubernetes.cpu-cfs-quota-enforced", fate.Honoured, "kubelet's cpuCFSQuota"},
	{"settings.kubernetes.cpu-manager-policy", fate.Honoured, "kubelet's cpuManagerPolicy (static or none; Bottlerocket's Static and None are lower-cased)"},
	{"settings.kubernetes.cpu-manager-policy-options", fate.Honoured, "kubelet's cpuManagerPolicyOptions, each option set to \"true\""},
	{"settings.kubernetes.cpu-manager-reconcile-period", fate.Honoured, "kubelet's cpuManagerReconcilePeriod"},
	{"settings.kubernetes.topology-manager-policy", fate.Honoured, "kubelet's topologyManagerPolicy"},
	{"settings.kubernetes.topology-manager-scope", fate.Honoured, "kubelet's topologyManagerScope"},
	{"settings.kubernetes.memory-manager-policy", fate.Honoured, "kubelet's memoryManagerPolicy (Static or None)"},
	{"settings.kubernetes.memory-manager-reserved-memory.<numa-node>", fate.Honoured, "kubelet's reservedMemory, one entry per enabled NUMA node"},
	{"settings.kubernetes.pod-pids-limit", fate.Honoured, "kubelet's podPidsLimit"},
	{"settings.kubernetes.image-gc-high-threshold-percent", fate.Honoured, "kubelet's imageGCHighThresholdPercent (an integer, or a string holding one)"},
	{"settings.kubernetes.image-gc-low-threshold-percent", fate.Honoured, "kubelet's imageGCLowThresholdPercent (an integer, or a string holding one)"},
	{"settings.kubernetes.image-minimum-gc-age", fate.Honoured, "kubelet's imageMinimumGCAge"},
	{"settings.kubernetes.image-maximum-gc-age", fate.Honoured, "kubelet's imageMaximumGCAge"},
	{"settings.kubernetes.max-parallel-image-pulls", fate.Honoured, "kubelet's maxParallelImagePulls, with serializeImagePulls false (which Bottlerocket always sets)"},
	{"settings.kubernetes.ids-per-pod", fate.Honoured, "kubelet's userNamespaces.idsPerPod"},
	{"settings.kubernetes.shutdown-grace-period", fate.Honoured, "kubelet's shutdownGracePeriod"},
	{"settings.kubernetes.shutdown-grace-period-for-critical-pods", fate.Honoured, "kubelet's shutdownGracePeriodCriticalPods"},
	{"settings.kubernetes.seccomp-default", fate.Honoured, "kubelet's seccompDefault"},
	{"settings.kubernetes.single-process-oom-kill", fate.Honoured, "kubelet's singleProcessOOMKill"},
	{"settings.kubernetes.memory-swap-behavior", fate.Honoured, "kubelet's memorySwap.swapBehavior (NoSwap or LimitedSwap)"},
	{"settings.kubernetes.log-level", fate.Honoured, "kubelet's --v"},
	{"settings.kubernetes.device-ownership-from-security-context", fate.Ignored, "a containerd CRI setting: set device_ownership_from_security_context in spec.containerd.config"},
	{"settings.kubernetes.pod-infra-container-image", fate.Ignored, "the image carries its pause image (Bottlerocket has ignored this setting since 1.21)"},

	{"settings.autoscaling", fate.Ignored, "berth does not wait on an Auto Scaling lifecycle hook before joining"},
	{"settings.aws.region", fate.Ignored, "berth takes the region from instance metadata"},
	{"settings.aws.config", fate.Refused, "berth authenticates with the instance's role only; an AWS config file in user data cannot be used"},
	{"settings.aws.credentials", fate.Refused, "berth authenticates with the instance's role only; an AWS credentials file in user data cannot be used"},
	{"settings.aws.profile", fate.Refused, "berth authenticates with the instance's role only; a profile of an AWS config file cannot be used"},
	{"settings.boot", fate.Ignored, "the kernel command line comes from the berth image: build the parameters into it"},
	{"settings.bootstrap-commands.<name>", fate.Refused, "berth runs no commands from user data: put what they set in a NodeConfig part; an entry with mode = \"off\" is ignored with a warning"},
	{"settings.bootstrap-containers.<name>", fate.Refused, "berth runs no bootstrap containers: put what the container does in a NodeConfig part or the image; an entry with mode = \"off\" is ignored with a warning"},
	{"settings.cloudformation", fate.Ignored, "berth sends no CloudFormation signal: a stack that waits for one times out"},
	{"settings.container-registry.mirrors", fate.Honoured, "annotation berth.dev/registry-mirrors: registry host to endpoint URLs, from either the list of tables or the older table of lists"},
	{"settings.container-registry.credentials", fate.Ignored, "berth writes no registry credentials from user data: use imagePullSecrets (ECR needs none: berth is kubelet's ECR credential provider)"},
	{"settings.container-runtime", fate.Ignored, "containerd's settings come from spec.containerd.config"},
	{"settings.container-runtime-plugins", fate.Ignored, "the image has no SOCI snapshotter"},
	{"settings.dns.name-servers", fate.Honoured, "spec.instance.network.nameservers"},
	{"settings.dns.search-list", fate.Honoured, "spec.instance.network.domains"},
	{"settings.ecs", fate.Refused, "berth is a Kubernetes node: ECS settings are for Bottlerocket's ECS variants"},
	{"settings.host-containers.admin", fate.Ignored, "berth has no admin container and no shell: use the EC2 serial console or kubectl debug"},
	{"settings.host-containers.control", fate.Ignored, "berth has no control container (no SSM agent)"},
	{"settings.host-containers.<name>", fate.Refused, "berth runs no host containers: run it as a DaemonSet or build it into the image; an entry that is not enabled is ignored with a warning"},
	{"settings.image-verifier-plugins", fate.Ignored, "berth verifies no image signatures"},
	{"settings.kernel.sysctl", fate.Honoured, "annotation berth.dev/sysctls: written before kubelet starts, over berth's own defaults (AL2023's and Bottlerocket's), as Bottlerocket's settings override its defaults; a key kubelet or pod networking needs (kernel.panic, net.ipv4.ip_forward, ...) with another value is refused; a failed write is a warning"},
	{"settings.kernel.modules", fate.Honoured, "allowed = false: annotation berth.dev/blocked-kernel-modules, the kernel's requests for the module (or one that needs it) and devices' refused once user data is read (one loaded before, by the image's preload list or a device at boot, stays, with a warning); autoload = true: annotation berth.dev/kernel-modules, loaded from the image's set before kubelet starts (one the image lacks is a warning)"},
	{"settings.kernel.lockdown", fate.Ignored, "kernel lockdown is set by the berth image"},
	{"settings.kernel.hugepages", fate.Ignored, "berth reserves no huge pages from user data"},
	{"settings.kernel.drivers", fate.Ignored, "the image carries no NVIDIA drivers"},
	{"settings.kubelet-device-plugins", fate.Ignored, "the image carries no NVIDIA device plugin"},
	{"settings.kubelet-dra-drivers", fate.Ignored, "the image carries no DRA drivers"},
	{"settings.metrics", fate.Ignored, "berth sends no metrics to Bottlerocket"},
	{"settings.motd", fate.Ignored, "berth has no login to show a message at"},
	{"settings.network.hostname", fate.Honoured, "annotation berth.dev/hostname: the machine's hostname, over instance metadata's local-hostname; the node's name stays the private DNS name (or hostname-override), as on Bottlerocket"},
	{"settings.network.https-proxy", fate.Honoured, "HTTPS_PROXY and https_proxy in spec.instance.environment"},
	{"settings.network.no-proxy", fate.Honoured, "NO_PROXY and no_proxy in spec.instance.environment, with localhost, 127.0.0.1, the API server's host and .CLUSTER-DOMAIN added, as Bottlerocket adds them"},
	{"settings.network.hosts", fate.Ignored, "berth writes no /etc/hosts entries from user data: use DNS"},
	{"settings.network.disable-ipv6", fate.Ignored, "berth leaves IPv6 as the network gives it"},
	{"settings.ntp.time-servers", fate.Honoured, "annotation berth.dev/ntp-servers: asked first, on port 123, from the apply phase on; berth.ntp=, DHCP's servers and the Amazon Time Sync Service stay as fallbacks; a table's directive and options (chrony's) are ignored with a warning"},
	{"settings.ntp.options", fate.Ignored, "berth's NTP client takes no chrony options"},
	{"settings.ntp.logging", fate.Ignored, "berth's NTP client takes no chrony options"},
	{"settings.nvidia-container-runtime", fate.Ignored, "the image carries no NVIDIA container runtime"},
	{"settings.oci-defaults", fate.Ignored, "set the containers' default capabilities and limits in spec.containerd.baseRuntimeSpec"},
	{"settings.oci-hooks", fate.Ignored, "the image carries no OCI hooks"},
	{"settings.pki", fate.Ignored, "berth adds no CA certificates from user data: a registry with a private CA must be trusted by the image"},
	{"settings.updates.metadata-base-url", fate.Honoured, "annotation berth.dev/update-repository: the TUF repository the node updates from (http or https), over the image's default; its releases must be signed with the keys whose root.json the image carries, so a Bottlerocket repository is refused by the node"},
	{"settings.updates.targets-base-url", fate.Honoured, "annotation berth.dev/update-targets-url: where the repository's target files are, when not under targets/ of metadata-base-url"},
	{"settings.updates.seed", fate.Ignored, "berth has no update waves: when a node updates is decided by the update trigger on its Node object, not by a seed"},
	{"settings.updates.version-lock", fate.Ignored, "berth takes the version to update to from the update trigger on the node's Node object, not from user data"},
	{"settings.updates.ignore-waves", fate.Ignored, "berth has no update waves: when a node updates is decided by the update trigger on its Node object"},
}

// Lookup returns the table's entry for key, written as in Table
// (settings.host-containers.<name>, not a concrete name).
func Lookup(key string) (Setting, bool) {
	i := slices.IndexFunc(Table, func(s Setting) bool { return s.Key == key })
	if i < 0 {
		return Setting{}, false
	}
	return Table[i], true
}
