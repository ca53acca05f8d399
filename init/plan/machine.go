package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/runtime/kubelet"
)

// machine decides the machine settings of berth's annotations
// (nodeconfig.MachineOf; Bottlerocket's settings.kernel.sysctl,
// settings.kernel.modules, settings.network.hostname and
// settings.ntp.time-servers arrive as these): the sysctls, the modules to
// load, the hostname and the NTP servers.
func (b *builder) machine() error {
	m, err := nodeconfig.MachineOf(b.in.Config)
	if err != nil {
		return err
	}
	if b.p.Sysctls, err = mergeSysctls(kubelet.Sysctls(b.ipv6), m.Sysctls); err != nil {
		return err
	}
	b.p.KernelModules = m.KernelModules
	b.p.Hostname = m.Hostname
	b.p.NTPServers = m.NTPServers
	return nil
}

// mergeSysctls puts the user's sysctls over berth's. The user's value
// wins over one of berth's defaults (AL2023's and Bottlerocket's), as a
// Bottlerocket setting or an AL2023 sysctl.d file does over the image's
// own; a key berth marks Required (kubelet's protectKernelDefaults keys,
// forwarding) with another value is an error at the annotation's path,
// since the node would then not work: kubelet refuses to start, or pods
// reach nothing. A user key keeps the module berth knows it needs, and a
// failed write of any user key is a warning, as Bottlerocket's are.
func mergeSysctls(berth []kubelet.Sysctl, user []nodeconfig.Sysctl) ([]kubelet.Sysctl, error) {
	out := slices.Clone(berth)
	var errs []string
	for _, u := range user {
		i := slices.IndexFunc(out, func(s kubelet.Sysctl) bool { return s.Key == u.Key })
		switch {
		case i < 0:
			out = append(out, kubelet.Sysctl{Key: u.Key, Value: u.Value, User: true})
		case out[i].Required && out[i].Value != u.Value:
			why := "kubelet (protectKernelDefaults) does not start without it"
			if strings.HasPrefix(u.Key, "net.") {
				why = "pods' traffic is forwarded through it"
			}
			errs = append(errs, fmt.Sprintf("metadata.annotations[%q][%q]: %q: berth needs %s = %s: %s; leave the key out",
				nodeconfig.SysctlsAnnotation, u.Key, u.Value, u.Key, out[i].Value, why))
		default:
			out[i].Value, out[i].User = u.Value, true
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	slices.SortFunc(out, func(a, b kubelet.Sysctl) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}
