package kubelet

import (
	"slices"
	"strings"
)

// FlagInputs are the values of berth's kubelet flags.
type FlagInputs struct {
	// BootstrapKubeconfig is set when kubelet joins by TLS bootstrapping.
	BootstrapKubeconfig string
	// ConfigDir is set when there is a user drop-in.
	ConfigDir string
	NodeIP    string
	// HostnameOverride is the node name.
	HostnameOverride string
	// OffEC2 is a node that is not an EC2 instance: no
	// --image-credential-provider-* (there is no region or instance role
	// to log in to ECR with) and no --cloud-provider=external (no cloud
	// controller would lift the uninitialized taint it puts on the node).
	OffEC2 bool
	// Labels are berth's node labels.
	Labels map[string]string
	// User are the user's kubelet.flags as written; they are split and
	// unquoted as systemd does for nodeadm (see SplitUserFlags).
	User []string
}

// Flags is kubelet's argument list (without argv[0]) in a fixed order, so
// the same inputs always give the same command line:
//
//  1. --config (always)
//  2. --config-dir (when the user gave kubelet.config)
//  3. --bootstrap-kubeconfig (when joining by bootstrap token)
//  4. --kubeconfig (always)
//  5. --container-runtime-endpoint (always; also in config.json)
//  6. --runtime-cgroups (always: containerd's cgroup; there is no config field)
//  7. --image-credential-provider-config (always on EC2, as nodeadm)
//  8. --image-credential-provider-bin-dir (always on EC2)
//  9. --node-ip (when known)
//  10. --hostname-override (when known)
//  11. --cloud-provider=external (always on EC2)
//  12. --node-labels (berth's labels, sorted by key; when any)
//  13. the user's kubelet.flags, in their order, split into words
//
// The user's flags come last so that, for flags kubelet lets repeat (as
// --node-labels, which merges), they add to berth's; validation rejects user
// flags that would override berth-owned ones.
func Flags(in FlagInputs) []string {
	args := []string{"--config=" + ConfigPath}
	if in.ConfigDir != "" {
		args = append(args, "--config-dir="+in.ConfigDir)
	}
	if in.BootstrapKubeconfig != "" {
		args = append(args, "--bootstrap-kubeconfig="+in.BootstrapKubeconfig)
	}
	args = append(args,
		"--kubeconfig="+KubeconfigPath,
		"--container-runtime-endpoint="+ContainerRuntimeURL,
		"--runtime-cgroups="+ContainerdCgroup,
	)
	if !in.OffEC2 {
		args = append(args,
			"--image-credential-provider-config="+CredentialProviderConfigPath,
			"--image-credential-provider-bin-dir="+CredentialProviderBinDir,
		)
	}
	if in.NodeIP != "" {
		args = append(args, "--node-ip="+in.NodeIP)
	}
	if in.HostnameOverride != "" {
		args = append(args, "--hostname-override="+in.HostnameOverride)
	}
	if !in.OffEC2 {
		args = append(args, "--cloud-provider=external")
	}
	if len(in.Labels) > 0 {
		keys := make([]string, 0, len(in.Labels))
		for k := range in.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + in.Labels[k]
		}
		args = append(args, "--node-labels="+strings.Join(pairs, ","))
	}
	return append(args, SplitUserFlags(in.User)...)
}

// LabelValue makes s a valid label value: at most 63 characters of
// [A-Za-z0-9._-], starting and ending alphanumeric; other characters become
// "_". It gives "" when nothing is left.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	isAlnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for len(b) > 0 && !isAlnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !isAlnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return string(b)
}
