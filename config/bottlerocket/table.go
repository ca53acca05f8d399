package bottlerocket

import "slices"

// Setting names one Bottlerocket setting, or a family of them, with how
// berth takes it.
type Setting struct {
	// Key is the setting's path as Bottlerocket's settings reference
	// writes it (settings.kubernetes.max-pods); <name> stands for a key
	// the user chooses (settings.host-containers.<name>), and a key that
	// ends at a namespace covers every setting under it.
	Key string
	// Fate is one of Honoured, Ignored or Refused. A honoured setting may
	// still refuse some values, or warn on some; Why says which.
	Fate Fate
	// Why says what berth does with it, for the README's table and for
	// the warning or error that names it.
	Why string
}

// Fate is what becomes of a setting.
type Fate string

// The fates, as config/al2 words them, so that the README's tables read
// alike.
const (
	Honoured Fate = "honoured"
	Ignored  Fate = "ignored, with a warning"
	Refused  Fate = "refused"
)

// Table is every setting this package knows: settings.kubernetes first,
// grouped by what each sets, then Bottlerocket's other namespaces in
// alphabetical order. A key under settings that no row covers is
// unknown: a warning naming its path, because a setting added by a newer
// Bottlerocket must not stop a node that berth could configure anyway.
var Table = []Setting{
	{"settings.kubernetes.api-server", Honoured, "spec.cluster.apiServerEndpoint (an https URL)"},
	{"settings.kubernetes.cluster-certificate", Honoured, "spec.cluster.certificateAuthority (base64 of the PEM bundle, as in a NodeConfig)"},
	{"settings.kubernetes.cluster-name", Honoured, "spec.cluster.name"},
	{"settings.kubernetes.cluster-dns-ip", Honoured, "kubelet's clusterDNS (one address or a list); when it is missing, Bottlerocket asks the EKS API for the service CIDR and berth does not, so a warning says to give it (or spec.cluster.cidr)"},
	{"settings.kubernetes.cluster-domain", Honoured, "kubelet's clusterDomain"},
	{"settings.kubernetes.max-pods", Honoured, "kubelet's maxPods (without it berth computes maxPods from the instance type, as Bottlerocket does)"},
	{"settings.kubernetes.node-labels", Honoured, "kubelet's --node-labels (KubeletConfiguration has no labels field), after berth's own labels"},
	{"settings.kubernetes.node-taints", Honoured, "kubelet's --register-with-taints: KEY=VALUE:EFFECT, or KEY:EFFECT for an empty value"},
	{"settings.kubernetes.node-ip", Honoured, "kubelet's --node-ip"},
	{"settings.kubernetes.hostname-override", Honoured, "kubelet's --hostname-override: the node's name"},
	{"settings.kubernetes.hostname-override-source", Honoured, "instance-id: spec.featureGates.InstanceIdNodeName; private-dns-name: berth's default"},
	{"settings.kubernetes.provider-id", Honoured, "kubelet's providerID"},
	{"settings.kubernetes.authentication-mode", Honoured, "aws: berth's EKS exec credential plugin (the default); tls: a bootstrap-token join, which needs bootstrap-token"},
	{"settings.kubernetes.bootstrap-token", Honoured, "annotation berth.dev/bootstrap-token when authentication-mode is tls; otherwise ignored with a warning, as Bottlerocket ignores it"},
	{"settings.kubernetes.standalone-mode", Refused, "berth always joins a cluster; false is accepted"},
	{"settings.kubernetes.cloud-provider", Honoured, "berth always runs kubelet with --cloud-provider=external; \"aws\" or \"\" is accepted with a warning"},
	{"settings.kubernetes.server-tls-bootstrap", Honoured, "kubelet's serverTLSBootstrap"},
	{"settings.kubernetes.server-certificate", Ignored, "berth writes no kubelet serving certificate from user data: use server-tls-bootstrap"},
	{"settings.kubernetes.server-key", Ignored, "berth writes no kubelet serving key from user data: use server-tls-bootstrap"},
	{"settings.kubernetes.credential-providers", Ignored, "berth is kubelet's image credential provider for ECR's registries, as nodeadm configures it; other providers and image patterns cannot be set"},
	{"settings.kubernetes.static-pods.<name>", Refused, "berth runs no static pods from user data: run the pod as a DaemonSet; an entry with enabled = false is ignored with a warning"},
	{"settings.kubernetes.static-pods-enabled", Ignored, "berth runs no static pods from user data"},
	{"settings.kubernetes.eviction-hard", Honoured, "kubelet's evictionHard"},
	{"settings.kubernetes.eviction-soft", Honoured, "kubelet's evictionSoft"},
	{"settings.kubernetes.eviction-soft-grace-period", Honoured, "kubelet's evictionSoftGracePeriod"},
	{"settings.kubernetes.eviction-max-pod-grace-period", Honoured, "kubelet's evictionMaxPodGracePeriod"},
	{"settings.kubernetes.kube-reserved", Honoured, "kubelet's kubeReserved (cpu, memory, ephemeral-storage, pid)"},
	{"settings.kubernetes.system-reserved", Honoured, "kubelet's systemReserved (cpu, memory, ephemeral-storage, pid)"},
	{"settings.kubernetes.reserved-cpus", Honoured, "kubelet's reservedSystemCPUs"},
	{"settings.kubernetes.allowed-unsafe-sysctls", Honoured, "kubelet's allowedUnsafeSysctls"},
	{"settings.kubernetes.registry-qps", Honoured, "kubelet's registryPullQPS"},
	{"settings.kubernetes.registry-burst", Honoured, "kubelet's registryBurst"},
	{"settings.kubernetes.event-qps", Honoured, "kubelet's eventRecordQPS"},
	{"settings.kubernetes.event-burst", Honoured, "kubelet's eventBurst"},
	{"settings.kubernetes.kube-api-qps", Honoured, "kubelet's kubeAPIQPS"},
	{"settings.kubernetes.kube-api-burst", Honoured, "kubelet's kubeAPIBurst"},
	{"settings.kubernetes.container-log-max-size", Honoured, "kubelet's containerLogMaxSize"},
	{"settings.kubernetes.container-log-max-files", Honoured, "kubelet's containerLogMaxFiles"},
	{"settings.kubernetes.container-log-max-workers", Honoured, "kubelet's containerLogMaxWorkers"},
	{"settings.kubernetes.container-log-monitor-interval", Honoured, "kubelet's containerLogMonitorInterval"},
	{"settings.kubernetes.cpu-cfs-quota-enforced", Honoured, "kubelet's cpuCFSQuota"},
	{"settings.kubernetes.cpu-manager-policy", Honoured, "kubelet's cpuManagerPolicy (static or none; Bottlerocket's Static and None are lower-cased)"},
	{"settings.kubernetes.cpu-manager-policy-options", Honoured, "kubelet's cpuManagerPolicyOptions, each option set to \"true\""},
	{"settings.kubernetes.cpu-manager-reconcile-period", Honoured, "kubelet's cpuManagerReconcilePeriod"},
	{"settings.kubernetes.topology-manager-policy", Honoured, "kubelet's topologyManagerPolicy"},
	{"settings.kubernetes.topology-manager-scope", Honoured, "kubelet's topologyManagerScope"},
	{"settings.kubernetes.memory-manager-policy", Honoured, "kubelet's memoryManagerPolicy (Static or None)"},
	{"settings.kubernetes.memory-manager-reserved-memory.<numa-node>", Honoured, "kubelet's reservedMemory, one entry per enabled NUMA node"},
	{"settings.kubernetes.pod-pids-limit", Honoured, "kubelet's podPidsLimit"},
	{"settings.kubernetes.image-gc-high-threshold-percent", Honoured, "kubelet's imageGCHighThresholdPercent (an integer, or a string holding one)"},
	{"settings.kubernetes.image-gc-low-threshold-percent", Honoured, "kubelet's imageGCLowThresholdPercent (an integer, or a string holding one)"},
	{"settings.kubernetes.image-minimum-gc-age", Honoured, "kubelet's imageMinimumGCAge"},
	{"settings.kubernetes.image-maximum-gc-age", Honoured, "kubelet's imageMaximumGCAge"},
	{"settings.kubernetes.max-parallel-image-pulls", Honoured, "kubelet's maxParallelImagePulls, with serializeImagePulls false (which Bottlerocket always sets)"},
	{"settings.kubernetes.ids-per-pod", Honoured, "kubelet's userNamespaces.idsPerPod"},
	{"settings.kubernetes.shutdown-grace-period", Honoured, "kubelet's shutdownGracePeriod"},
	{"settings.kubernetes.shutdown-grace-period-for-critical-pods", Honoured, "kubelet's shutdownGracePeriodCriticalPods"},
	{"settings.kubernetes.seccomp-default", Honoured, "kubelet's seccompDefault"},
	{"settings.kubernetes.single-process-oom-kill", Honoured, "kubelet's singleProcessOOMKill"},
	{"settings.kubernetes.memory-swap-behavior", Honoured, "kubelet's memorySwap.swapBehavior (NoSwap or LimitedSwap)"},
	{"settings.kubernetes.log-level", Honoured, "kubelet's --v"},
	{"settings.kubernetes.device-ownership-from-security-context", Ignored, "a containerd CRI setting: set device_ownership_from_security_context in spec.containerd.config"},
	{"settings.kubernetes.pod-infra-container-image", Ignored, "the image carries its pause image (Bottlerocket has ignored this setting since 1.21)"},

	{"settings.autoscaling", Ignored, "berth does not wait on an Auto Scaling lifecycle hook before joining"},
	{"settings.aws.region", Ignored, "berth takes the region from instance metadata"},
	{"settings.aws.config", Refused, "berth authenticates with the instance's role only; an AWS config file in user data cannot be used"},
	{"settings.aws.credentials", Refused, "berth authenticates with the instance's role only; an AWS credentials file in user data cannot be used"},
	{"settings.aws.profile", Refused, "berth authenticates with the instance's role only; a profile of an AWS config file cannot be used"},
	{"settings.boot", Ignored, "the kernel command line comes from the berth image: build the parameters into it"},
	{"settings.bootstrap-commands.<name>", Refused, "berth runs no commands from user data: put what they set in a NodeConfig part; an entry with mode = \"off\" is ignored with a warning"},
	{"settings.bootstrap-containers.<name>", Refused, "berth runs no bootstrap containers: put what the container does in a NodeConfig part or the image; an entry with mode = \"off\" is ignored with a warning"},
	{"settings.cloudformation", Ignored, "berth sends no CloudFormation signal: a stack that waits for one times out"},
	{"settings.container-registry.mirrors", Honoured, "annotation berth.dev/registry-mirrors: registry host to endpoint URLs, from either the list of tables or the older table of lists"},
	{"settings.container-registry.credentials", Ignored, "berth writes no registry credentials from user data: use imagePullSecrets (ECR needs none: berth is kubelet's ECR credential provider)"},
	{"settings.container-runtime", Ignored, "containerd's settings come from spec.containerd.config"},
	{"settings.container-runtime-plugins", Ignored, "the image has no SOCI snapshotter"},
	{"settings.dns.name-servers", Honoured, "spec.instance.network.nameservers"},
	{"settings.dns.search-list", Honoured, "spec.instance.network.domains"},
	{"settings.ecs", Refused, "berth is a Kubernetes node: ECS settings are for Bottlerocket's ECS variants"},
	{"settings.host-containers.admin", Ignored, "berth has no admin container and no shell: use the EC2 serial console or kubectl debug"},
	{"settings.host-containers.control", Ignored, "berth has no control container (no SSM agent)"},
	{"settings.host-containers.<name>", Refused, "berth runs no host containers: run it as a DaemonSet or build it into the image; an entry that is not enabled is ignored with a warning"},
	{"settings.image-verifier-plugins", Ignored, "berth verifies no image signatures"},
	{"settings.kernel.sysctl", Honoured, "annotation berth.dev/sysctls: written before kubelet starts, over berth's own defaults (AL2023's and Bottlerocket's), as Bottlerocket's settings override its defaults; a key kubelet or pod networking needs (kernel.panic, net.ipv4.ip_forward, ...) with another value is refused; a failed write is a warning"},
	{"settings.kernel.modules", Honoured, "annotation berth.dev/kernel-modules: a module with autoload = true is loaded from the image's set before kubelet starts (one the image lacks is a warning); allowed = false is ignored with a warning, since berth cannot block a module the kernel or a device asks for: build the image without it"},
	{"settings.kernel.lockdown", Ignored, "kernel lockdown is set by the berth image"},
	{"settings.kernel.hugepages", Ignored, "berth reserves no huge pages from user data"},
	{"settings.kernel.drivers", Ignored, "the image carries no NVIDIA drivers"},
	{"settings.kubelet-device-plugins", Ignored, "the image carries no NVIDIA device plugin"},
	{"settings.kubelet-dra-drivers", Ignored, "the image carries no DRA drivers"},
	{"settings.metrics", Ignored, "berth sends no metrics to Bottlerocket"},
	{"settings.motd", Ignored, "berth has no login to show a message at"},
	{"settings.network.hostname", Honoured, "annotation berth.dev/hostname: the machine's hostname, over instance metadata's local-hostname; the node's name stays the private DNS name (or hostname-override), as on Bottlerocket"},
	{"settings.network.https-proxy", Honoured, "HTTPS_PROXY and https_proxy in spec.instance.environment"},
	{"settings.network.no-proxy", Honoured, "NO_PROXY and no_proxy in spec.instance.environment, with localhost, 127.0.0.1, the API server's host and .CLUSTER-DOMAIN added, as Bottlerocket adds them"},
	{"settings.network.hosts", Ignored, "berth writes no /etc/hosts entries from user data: use DNS"},
	{"settings.network.disable-ipv6", Ignored, "berth leaves IPv6 as the network gives it"},
	{"settings.ntp.time-servers", Honoured, "annotation berth.dev/ntp-servers: asked first, on port 123, from the apply phase on; berth.ntp=, DHCP's servers and the Amazon Time Sync Service stay as fallbacks; a table's directive and options (chrony's) are ignored with a warning"},
	{"settings.ntp.options", Ignored, "berth's NTP client takes no chrony options"},
	{"settings.ntp.logging", Ignored, "berth's NTP client takes no chrony options"},
	{"settings.nvidia-container-runtime", Ignored, "the image carries no NVIDIA container runtime"},
	{"settings.oci-defaults", Ignored, "set the containers' default capabilities and limits in spec.containerd.baseRuntimeSpec"},
	{"settings.oci-hooks", Ignored, "the image carries no OCI hooks"},
	{"settings.pki", Ignored, "berth adds no CA certificates from user data: a registry with a private CA must be trusted by the image"},
	{"settings.updates", Ignored, "berth nodes are replaced, not updated in place"},
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
