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
	if err := b.blockModules(m.BlockedModules); err != nil {
		return err
	}
	b.p.Hostname = m.Hostname
	b.p.NTPServers = m.NTPServers
	return nil
}

// BlockedModulesPath lists the modules user data blocks, one name a
// line, for berth modprobe, which the kernel runs as a process of its
// own; the apply phase writes it before it loads any module.
const BlockedModulesPath = "/run/berth/blocked-modules"

// blockModules decides the modules user data blocks. A module berth
// itself loads (the image's preload list, the instance-store strategy's,
// the one a sysctl's key lives in) cannot be blocked: the error names it
// at the annotation's path and says what needs it.
func (b *builder) blockModules(blocked []string) error {
	needs := map[string]string{}
	for _, m := range b.in.Manifest.Preload {
		needs[m] = "the image preloads it (its manifest's preload list)"
	}
	for _, m := range b.p.StorageModules {
		needs[m] = "the instance-store strategy needs it"
	}
	for _, s := range b.p.Sysctls {
		if s.Module != "" {
			needs[s.Module] = "sysctl " + s.Key + " lives in it"
		}
	}
	var errs []string
	for i, m := range blocked {
		if why, ok := needs[m]; ok {
			errs = append(errs, fmt.Sprintf("metadata.annotations[%q][%d]: %q cannot be blocked: %s", nodeconfig.BlockedKernelModulesAnnotation, i, m, why))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if len(blocked) > 0 {
		b.p.BlockedModules = blocked
		b.add(BlockedModulesPath, ModeFor(BlockedModulesPath), []byte(strings.Join(blocked, "\n")+"\n"))
	}
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
