package al2

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berth-node/berth/config/fate"
)

// Options are bootstrap.sh's arguments, read as AL2's last bootstrap.sh
// (awslabs/amazon-eks-ami, templates/al2/runtime/bootstrap.sh) read them:
// every option takes the next word as its value, and the first word that
// is not an option is the cluster name. Values are as given; what they
// mean is nodeconfig's to decide.
type Options struct {
	ClusterName string `json:"clusterName"`
	// Set holds each option given, by name (--b64-cluster-ca), with its
	// value; a repeated option keeps its last value, as bootstrap.sh's
	// loop did.
	Set map[string]string `json:"set"`
	// Order lists the options in the order given, once each.
	Order []string `json:"order"`
	// Extra lists positional words after the cluster name, which
	// bootstrap.sh ignored.
	Extra []string `json:"extra"`
	// FromEnv names, for each option in Set that the script gave through
	// bootstrap.sh's environment rather than its arguments (EnvVars), the
	// variable that gave it.
	FromEnv map[string]string `json:"fromEnv,omitempty"`
	// Env holds the variables bootstrap.sh read that no option sets
	// (SERVICE_IPV4_CIDR, PAUSE_CONTAINER_IMAGE), as the script exported
	// them.
	Env map[string]string `json:"env,omitempty"`
}

// OptionsOf reads inv's arguments (ReadOptions) and then, as AL2's
// bootstrap.sh did after its option loop, takes each option no argument
// set from the variable of its environment that stands for it.
func OptionsOf(inv *Invocation) (Options, error) {
	o, err := ReadOptions(inv.Args)
	if err != nil {
		return o, err
	}
	for _, name := range slices.Sorted(maps.Keys(inv.Env)) {
		v := inv.Env[name]
		if v == "" {
			continue // "${VAR:-default}": empty is unset
		}
		opt := EnvVars[name]
		if opt == "" {
			if o.Env == nil {
				o.Env = map[string]string{}
			}
			o.Env[name] = v
			continue
		}
		if _, set := o.Set[opt]; set {
			continue // the argument wins, as in bootstrap.sh
		}
		o.Set[opt] = v
		o.Order = append(o.Order, opt)
		if o.FromEnv == nil {
			o.FromEnv = map[string]string{}
		}
		o.FromEnv[opt] = name
	}
	return o, nil
}

// Option names bootstrap.sh's options, each with how berth takes it.
type Option struct {
	Name string
	// Fate is honoured, ignored (AL2 itself ignored it on a containerd
	// node, or it is the default berth has anyway) or refused.
	Fate fate.Fate
	// Why says what berth does with it, for the README's table and for
	// the warning or error that names it.
	Why string
}

// Table is every option of AL2's last bootstrap.sh, in its help's order.
var Table = []Option{
	{"--apiserver-endpoint", fate.Honoured, "spec.cluster.apiServerEndpoint"},
	{"--aws-api-retry-attempts", fate.Ignored, "berth bounds its own retries"},
	{"--b64-cluster-ca", fate.Honoured, "spec.cluster.certificateAuthority"},
	{"--cluster-id", fate.Honoured, "spec.cluster.id"},
	{"--container-runtime", fate.Honoured, "containerd is the only runtime (as AL2 for Kubernetes 1.24 and later); any other value is refused"},
	{"--containerd-config-file", fate.Refused, "names a file on the AMI, which a berth image does not have: put the TOML in spec.containerd.config"},
	{"--dns-cluster-ip", fate.Honoured, "kubelet's clusterDNS (comma-separated)"},
	{"--docker-config-json", fate.Ignored, "no dockerd (AL2 ignored it with containerd too)"},
	{"--enable-docker-bridge", fate.Ignored, "no dockerd (AL2 ignored it with containerd too)"},
	{"--enable-local-outpost", fate.Refused, "local Outpost clusters are not supported; \"false\" is accepted"},
	{"--ip-family", fate.Honoured, "ipv4 or ipv6; must agree with the service CIDR"},
	{"--kubelet-extra-args", fate.Honoured, "spec.kubelet.flags, split and checked as NodeConfig's flags"},
	{"--local-disks", fate.Honoured, "spec.instance.localStorage.strategy: raid0 → RAID0, mount → Mount (and raid10 → RAID10)"},
	{"--mount-bpf-fs", fate.Honoured, "berth always mounts bpffs; \"false\" is refused"},
	{"--pause-container-account", fate.Ignored, "the image carries its pause image, imported at boot"},
	{"--pause-container-version", fate.Ignored, "the image carries its pause image, imported at boot"},
	{"--service-ipv6-cidr", fate.Honoured, "spec.cluster.cidr (implies --ip-family ipv6)"},
	{"--use-max-pods", fate.Honoured, "\"true\" (the default): maxPods from the instance type, as AL2; \"false\": kubelet's default, 110, which AL2 left in place (a --max-pods in --kubelet-extra-args wins over either, as on AL2)"},
}

// Lookup returns the table's entry for name.
func Lookup(name string) (Option, bool) {
	i := slices.IndexFunc(Table, func(o Option) bool { return o.Name == name })
	if i < 0 {
		return Option{}, false
	}
	return Table[i], true
}

// ReadOptions reads args as bootstrap.sh's option loop did. An option
// bootstrap.sh did not know is an error here (bootstrap.sh took it for the
// cluster name, or silently past it, which is never what was meant).
func ReadOptions(args []string) (Options, error) {
	o := Options{Set: map[string]string{}}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" {
			return o, fmt.Errorf("bootstrap.sh %s prints its help and exits: no node would join", a)
		}
		if !strings.HasPrefix(a, "--") {
			positional = append(positional, a)
			continue
		}
		name, _, inline := strings.Cut(a, "=")
		if _, ok := Lookup(name); !ok {
			return o, fmt.Errorf("bootstrap.sh option %s: AL2's bootstrap.sh has no such option", quoteClipped(name))
		}
		if inline {
			// bootstrap.sh's case matched whole words: "--opt=value"
			// fell to its unknown-option branch and became the cluster
			// name. Say so rather than guess.
			return o, fmt.Errorf("bootstrap.sh option %s: AL2's bootstrap.sh takes the value as the next word (%s VALUE), not after '='", quoteClipped(name), name)
		}
		if i+1 >= len(args) {
			return o, fmt.Errorf("bootstrap.sh option %s has no value", name)
		}
		i++
		if _, seen := o.Set[name]; !seen {
			o.Order = append(o.Order, name)
		}
		o.Set[name] = args[i]
	}
	if len(positional) == 0 || positional[0] == "" {
		return o, fmt.Errorf("bootstrap.sh has no cluster name (its first argument that is not an option)")
	}
	o.ClusterName, o.Extra = positional[0], positional[1:]
	return o, nil
}
