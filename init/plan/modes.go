package plan

import (
	"io/fs"

	"github.com/berth-node/berth/runtime/containerd"
	"github.com/berth-node/berth/runtime/kubelet"
)

// DescribeMode is plan.txt's mode: it lists the services' environments,
// which may hold secrets (redacted by default, but --show-secrets and
// names that do not look secret exist), so only root reads it.
const DescribeMode fs.FileMode = 0o600

// fileMode is one row of the mode table.
type fileMode struct {
	mode fs.FileMode
	why  string
}

// fileModes is the one place a file's mode is decided: every path the plan
// writes (and plan.txt), with why. Build takes modes from here, WriteTo and
// Render write them, and TestFileModes fails on any planned file missing
// from it. Read-only.
var fileModes = map[string]fileMode{
	kubelet.CACertPath:                   {0o644, "the cluster CA certificate is public; any process may verify the API server with it"},
	MachineIDPath:                        {0o444, "machine-id(5) is world-readable and never changes while the instance lives"},
	kubelet.ConfigPath:                   {0o644, "berth's KubeletConfiguration holds node facts and no credentials"},
	kubelet.DropInPath:                   {0o600, "the user's kubelet.config verbatim: staticPodURLHeader can carry Authorization headers"},
	kubelet.KubeconfigPath:               {0o600, "kubeconfigs are private by convention (kubeadm, kubelet's own rotation write 0600)"},
	kubelet.BootstrapKubeconfig:          {0o600, "it holds the bootstrap token"},
	kubelet.CredentialProviderConfigPath: {0o644, "it names the ECR plugin and image patterns; credentials are fetched at run time, never stored"},
	containerd.ConfigPath:                {0o600, "the user's containerd.config is merged in and may carry registry auth, password or identitytoken"},
	containerd.BaseRuntimeSpecPath:       {0o644, "OCI defaults every container gets; what is in it is visible inside every container anyway"},
	ResolvConfPath:                       {0o644, "every process resolves names"},
	DescribePath:                         {DescribeMode, "service environments, which may hold secrets"},
	BlockedModulesPath:                   {0o644, "module names, which berth modprobe reads whatever its caller"},
}

// hostsTOMLMode is every registry's hosts.toml (IsRegistryHostsFile),
// whose paths depend on the user data, so they have no row of their own.
var hostsTOMLMode = fileMode{0o644, "mirror URLs, which nodeconfig admits without credentials; containerd's own examples are world-readable"}

// modeRow is path's row of the mode table.
func modeRow(path string) (fileMode, bool) {
	if m, ok := fileModes[path]; ok {
		return m, true
	}
	if IsRegistryHostsFile(path) {
		return hostsTOMLMode, true
	}
	return fileMode{}, false
}

// ModeFor is the mode of the file the plan writes at path. A path missing
// from the table gets 0600: a new file is private until someone decides
// otherwise (and TestFileModes fails until they do).
func ModeFor(path string) fs.FileMode {
	if m, ok := modeRow(path); ok {
		return m.mode
	}
	return 0o600
}
