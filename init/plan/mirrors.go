package plan

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/berth-node/berth/config/nodeconfig"
)

// RegistryHostsDir is containerd's registry host directory: the first
// entry of config_path in the config.toml berth writes, so a hosts.toml
// here wins over one under /etc/docker/certs.d.
const RegistryHostsDir = "/etc/containerd/certs.d"

// registryHostsPattern matches the hosts.toml files Build plans (for
// ModeFor and IsRegistryHostsFile).
const registryHostsPattern = RegistryHostsDir + "/*/hosts.toml"

// IsRegistryHostsFile says whether path is a registry's hosts.toml under
// RegistryHostsDir, as Build plans them from berth.dev/registry-mirrors.
func IsRegistryHostsFile(p string) bool {
	ok, _ := path.Match(registryHostsPattern, p)
	return ok
}

// registryHostsFiles are the hosts.toml files for the registry-mirrors
// annotation, one per registry, in the annotation's registry order.
func registryHostsFiles(ms []nodeconfig.RegistryMirrors) []File {
	var out []File
	for _, m := range ms {
		p := path.Join(RegistryHostsDir, hostsDirName(m.Registry), "hosts.toml")
		out = append(out, File{Path: p, Mode: ModeFor(p), Data: hostsTOML(m)})
	}
	return out
}

// hostsDirName is the directory containerd looks up first for a registry
// (core/remotes/docker/config.hostPaths): _default for every registry
// without its own, host_port_ for host:port (containerd's form without a
// colon, which Go module paths and some filesystems refuse), else the host
// as image references name it.
func hostsDirName(registry string) string {
	if registry == nodeconfig.AllRegistries {
		return "_default"
	}
	if host, port, ok := splitPort(registry); ok {
		return host + "_" + port + "_"
	}
	return registry
}

// splitPort splits host:port; a bracketed IPv6 address alone has no port.
func splitPort(registry string) (host, port string, ok bool) {
	i := strings.LastIndexByte(registry, ':')
	if i < 0 || strings.HasSuffix(registry, "]") {
		return "", "", false
	}
	return registry[:i], registry[i+1:], true
}

// upstream is the registry's own endpoint, the hosts.toml server that
// containerd tries after the mirrors. docker.io is served from
// registry-1.docker.io, which containerd substitutes only when a hosts.toml
// names no server; everything else is https, as containerd assumes for a
// host without a hosts.toml.
func upstream(registry string) string {
	if registry == "docker.io" {
		return "https://registry-1.docker.io"
	}
	return "https://" + registry
}

// hostsTOML renders containerd's hosts.toml for one registry: the
// upstream server (none for _default, where containerd fills in whichever
// registry is pulled from) and one [host."<mirror>"] table per mirror, in
// the annotation's order, which is the order containerd tries them. The
// mirrors may pull and resolve tags but not push: a pull-through cache
// takes no pushes. nodeconfig.MirrorURL admits only RFC 3986 characters,
// so the URLs need no TOML escaping.
func hostsTOML(m nodeconfig.RegistryMirrors) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by berth from metadata.annotations[%q].\n", nodeconfig.RegistryMirrorsAnnotation)
	if m.Registry != nodeconfig.AllRegistries {
		fmt.Fprintf(&b, "server = %q\n", upstream(m.Registry))
	}
	for _, e := range m.Endpoints {
		fmt.Fprintf(&b, "\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", e)
	}
	return b.Bytes()
}

// Overridden lists the files already on the machine that the registry
// mirrors replace: the image may bake a hosts.toml for the same registry,
// and the user data's mirrors win (later sources win, as for every
// NodeConfig setting: refusing would let an image stop a fleet's
// mirrors), but the operator should see that the image's went. That is a
// different file at the planned path, or for host:port any file in the
// host:port directory, which containerd reads only when host_port_ is
// missing. read returns a file's bytes or an error (a missing file is no
// override).
func (p *Plan) Overridden(read func(path string) ([]byte, error)) []string {
	var out []string
	for _, f := range p.Files {
		if !IsRegistryHostsFile(f.Path) {
			continue
		}
		if old, err := read(f.Path); err == nil && !bytes.Equal(old, f.Data) {
			out = append(out, f.Path)
		}
	}
	for _, r := range p.RegistryMirrors {
		if _, _, ok := splitPort(r.Registry); !ok {
			continue
		}
		shadowed := path.Join(RegistryHostsDir, r.Registry, "hosts.toml")
		if _, err := read(shadowed); err == nil {
			out = append(out, shadowed)
		}
	}
	return out
}
