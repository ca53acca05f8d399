package plan

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/berth-node/berth/internal/fsutil"
)

// WriteTo writes every file under root at its node path (root "/" on a
// node, the output directory for `berth render`), each atomically.
func (p *Plan) WriteTo(root string) error {
	for _, f := range p.Files {
		if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path {
			return fmt.Errorf("writing plan: file path %q is not absolute and clean", f.Path)
		}
		if err := fsutil.WriteFileAtomic(filepath.Join(root, f.Path), f.Data, f.Mode); err != nil {
			return fmt.Errorf("writing plan: %w", err)
		}
	}
	return nil
}

// DescribeOptions tune Describe.
type DescribeOptions struct {
	// ShowSecrets prints secret values as they are (see package redact);
	// by default they read <redacted>, because plan.txt is what `berth
	// render` shows and what an operator pastes into a ticket.
	ShowSecrets bool
}

// Describe is the readable plan with secrets redacted: DescribeWith's
// default, and what a node writes to DescribePath.
func (p *Plan) Describe() []byte { return p.DescribeWith(DescribeOptions{}) }

// DescribeWith is the readable plan: node facts, warnings, services (argv
// one per line, env, cgroup, probe) and files (mode, size, sha256; contents
// are in the files themselves, and the bootstrap kubeconfig is secret).
// Deterministic: the same plan and options give the same bytes.
func (p *Plan) DescribeWith(o DescribeOptions) []byte {
	var b bytes.Buffer
	b.WriteString("# berth plan\n")
	if off := p.OffEC2; off != nil {
		// What instance metadata decides on EC2, and where it came from
		// here instead.
		fmt.Fprintf(&b, "platform: not EC2 (user data from %s)\n", off.Source)
		fmt.Fprintf(&b, "node-name: %s (%s)\n", p.NodeName, off.NodeNameFrom)
		fmt.Fprintf(&b, "node-ip: %s\n", orNone(p.NodeIP))
		b.WriteString("provider-id: none (not EC2: kubelet runs without --cloud-provider=external)\n")
		b.WriteString("region: none (no ECR credential provider, no EKS token)\n")
		fmt.Fprintf(&b, "cluster-dns: %s\n", p.ClusterDNS)
		fmt.Fprintf(&b, "max-pods: %d (%s)\n", p.MaxPods, off.MaxPodsFrom)
	} else {
		fmt.Fprintf(&b, "node-name: %s\n", p.NodeName)
		fmt.Fprintf(&b, "node-ip: %s\n", orNone(p.NodeIP))
		fmt.Fprintf(&b, "provider-id: %s\n", p.ProviderID)
		fmt.Fprintf(&b, "cluster-dns: %s\n", p.ClusterDNS)
		fmt.Fprintf(&b, "max-pods: %d\n", p.MaxPods)
	}
	fmt.Fprintf(&b, "containerd-config-schema: %d\n", p.ContainerdSchema)
	auth := "exec credential plugin"
	if p.BootstrapToken {
		auth = "bootstrap token"
	}
	fmt.Fprintf(&b, "kubelet-auth: %s\n", auth)
	if p.Storage == nil {
		b.WriteString("local-storage: none\n")
	} else {
		fmt.Fprintf(&b, "local-storage: %s at %s", p.Storage.Strategy, p.Storage.MountPath)
		if len(p.Storage.DisabledMounts) > 0 {
			parts := make([]string, len(p.Storage.DisabledMounts))
			for i, d := range p.Storage.DisabledMounts {
				parts[i] = string(d)
			}
			fmt.Fprintf(&b, " (disabled mounts: %s)", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "storage-modules: %s\n", strings.Join(p.StorageModules, ", "))
	}
	if sd := p.Shutdown; sd.KubeletGrace > 0 {
		fmt.Fprintf(&b, "shutdown: kubelet's graceful node shutdown %s (critical pods %s); then pods left get %s after SIGTERM, each stop step up to %s\n", sd.KubeletGrace, sd.KubeletCriticalGrace, sd.PodGrace, sd.StepTimeout)
	} else {
		fmt.Fprintf(&b, "shutdown: kubelet's graceful node shutdown off; pods get %s after SIGTERM, each stop step up to %s\n", sd.PodGrace, sd.StepTimeout)
	}
	b.WriteString("\nsysctls:\n")
	for _, s := range p.Sysctls {
		fmt.Fprintf(&b, "  %s = %s", s.Key, s.Value)
		// What happens when the write fails: fatal, or a warning.
		if s.Required {
			b.WriteString(" (required)")
		}
		if s.Module != "" {
			fmt.Fprintf(&b, " (module %s)", s.Module)
		}
		if s.User {
			b.WriteString(" (user data)")
		}
		b.WriteString("\n")
	}
	// The other machine settings, only when user data sets them.
	if len(p.KernelModules) > 0 {
		fmt.Fprintf(&b, "\nkernel-modules: %s\n", strings.Join(p.KernelModules, ", "))
	}
	if len(p.BlockedModules) > 0 {
		fmt.Fprintf(&b, "\nblocked-kernel-modules: %s\n", strings.Join(p.BlockedModules, ", "))
	}
	if p.Hostname != "" {
		fmt.Fprintf(&b, "\nhostname: %s\n", p.Hostname)
	}
	if len(p.NTPServers) > 0 {
		fmt.Fprintf(&b, "\nntp-servers: %s (then the boot's own)\n", strings.Join(p.NTPServers, ", "))
	}
	if len(p.PulledRecords) > 0 {
		b.WriteString("\npreloaded images, node-accessible in kubelet's pull records:\n")
		for _, r := range p.PulledRecords {
			fmt.Fprintf(&b, "  %s: %s\n", r.ImageRef, strings.Join(r.Repos, ", "))
		}
	}
	b.WriteString("\nwarnings:\n")
	if len(p.Warnings) == 0 {
		b.WriteString("  none\n")
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "  - %s\n", o.text(w))
	}
	b.WriteString("\nservices:\n")
	for _, s := range p.Services {
		fmt.Fprintf(&b, "  %s:\n", s.Name)
		fmt.Fprintf(&b, "    cgroup: %s\n", s.Cgroup)
		fmt.Fprintf(&b, "    dir: %s\n", s.Dir)
		fmt.Fprintf(&b, "    oom-score-adj: %d\n", s.OOMScoreAdj)
		fmt.Fprintf(&b, "    depends-on: %s\n", orNone(strings.Join(s.DependsOn, ", ")))
		fmt.Fprintf(&b, "    ready: %s %s\n", s.Ready.Kind, s.Ready.Target)
		fmt.Fprintf(&b, "    stop-timeout: %s\n", s.StopTimeout)
		limits := make([]string, len(s.Rlimits))
		for i, l := range s.Rlimits {
			limits[i] = l.String()
		}
		fmt.Fprintf(&b, "    rlimits: %s\n", orNone(strings.Join(limits, " ")))
		b.WriteString("    argv:\n")
		for _, a := range s.Argv {
			fmt.Fprintf(&b, "      %s\n", o.arg(a))
		}
		b.WriteString("    env:\n")
		for _, e := range s.Env {
			fmt.Fprintf(&b, "      %s\n", o.env(e))
		}
	}
	b.WriteString("\nfiles:\n")
	for _, f := range p.Files {
		fmt.Fprintf(&b, "  %s %04o %6d sha256:%s\n", f.Path, f.Mode.Perm(), len(f.Data), f.SHA256())
	}
	return b.Bytes()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
