package nocloud

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/network"
)

// Inspection is a seed as `berth check --seed` and `berth render --seed`
// judge it: every file read whatever the others hold, so that one run
// names every problem, and what the seed decides (the node's network and
// name) beside what its user-data holds.
type Inspection struct {
	// Dir names the seed in problems, sources and Describe: the
	// directory given to --seed.
	Dir string
	// Seed is what was read. A file with errors leaves its part zero:
	// UserData nil, MetaData empty, Network nil. Its Warnings are
	// unused: Inspection's own hold every file's.
	Seed Seed
	// Network is what berth's network setup would apply (NetworkConfig's
	// result); nil when the seed leaves the network to berth's own
	// configuration (no network-config, an empty one, config: disabled)
	// and when network-config has errors.
	Network *network.Config
	// Errors and Warnings, file by file: user-data, meta-data,
	// network-config, vendor-data.
	Errors   []Problem
	Warnings []Problem
}

// InspectDir inspects the seed in the directory dir (Inspect of
// os.DirFS). The error is for dir itself, missing or not a directory:
// what is wrong inside it is in the Inspection.
func InspectDir(dir string) (*Inspection, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("seed %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("seed %s: not a directory; give the directory holding user-data, meta-data and network-config (a mounted cidata volume, or a copy of its files)", dir)
	}
	return Inspect(os.DirFS(dir), dir), nil
}

// Inspect reads the seed at the root of fsys as Read does, but reads
// every file whatever the others hold, and refuses more than Read:
//
//   - no user-data, or one with nothing in it: a node booted from the
//     seed has no NodeConfig, and stops as it stops on a bad one. (Read
//     takes an empty user-data, as cloud-init does.)
//   - no meta-data, as Read: cloud-init does not take a seed without
//     one; an empty meta-data is fine.
//   - a network-config berth's network setup cannot apply
//     (NetworkConfig's refusals). No network-config is fine: the node
//     takes DHCP on its first Ethernet interface, as without a seed.
//
// dir names the seed (Inspection.Dir). User-data is not parsed here:
// Sources hands it to nodeconfig, which names its own problems.
func Inspect(fsys fs.FS, dir string) *Inspection {
	in := &Inspection{Dir: dir}
	fail := func(file string, err error) {
		var ps Problems
		if errors.As(err, &ps) {
			in.Errors = append(in.Errors, ps...)
			return
		}
		in.Errors = append(in.Errors, Problem{File: file, Message: cut(err.Error(), maxMessage)})
	}

	ud, err := readFile(fsys, FileUserData, MaxUserDataSize)
	switch {
	case err != nil:
		fail(FileUserData, err)
	case len(bytes.TrimSpace(ud)) == 0:
		in.Errors = append(in.Errors, Problem{File: FileUserData, Message: "empty: a node booted from this seed has no NodeConfig; " +
			"put one there (NodeConfig YAML or JSON, MIME multipart, Bottlerocket TOML settings, an Amazon Linux 2 bootstrap.sh script, or gzip of one)"})
	default:
		in.Seed.UserData = ud
	}

	if md, err := readFile(fsys, FileMetaData, MaxFileSize); err != nil {
		fail(FileMetaData, err)
	} else {
		m, warns, err := ParseMetaData(md)
		in.Warnings = append(in.Warnings, warns...)
		if err != nil {
			fail(FileMetaData, err)
		} else {
			in.Seed.MetaData = m
		}
	}

	nc, err := readFile(fsys, FileNetworkConfig, MaxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		fail(FileNetworkConfig, err)
	default:
		n, warns, err := ParseNetworkConfig(nc)
		in.Warnings = append(in.Warnings, warns...)
		if err != nil {
			fail(FileNetworkConfig, err)
			break
		}
		in.Seed.Network = n
		if n == nil {
			break
		}
		c, warns, err := NetworkConfig(n)
		in.Warnings = append(in.Warnings, warns...)
		if err != nil {
			fail(FileNetworkConfig, err)
			break
		}
		in.Network = &c
	}

	if _, err := fs.Stat(fsys, FileVendorData); err == nil {
		in.Warnings = append(in.Warnings, Problem{File: FileVendorData, Message: "ignored: berth reads user-data only"})
	}
	return in
}

// Path is where file is in the seed, for messages and sources.
func (in *Inspection) Path(file string) string {
	if in.Dir == "" {
		return file
	}
	return filepath.Join(in.Dir, file)
}

// NodeConfigProblems returns the seed's errors, then its warnings, as
// nodeconfig's problems, so that `berth check` prints and counts them as
// it prints and counts a NodeConfig's: the source is the seed file's path
// and the line and key path are kept.
func (in *Inspection) NodeConfigProblems() []nodeconfig.Problem {
	out := make([]nodeconfig.Problem, 0, len(in.Errors)+len(in.Warnings))
	add := func(sev nodeconfig.Severity, ps []Problem) {
		for _, p := range ps {
			out = append(out, nodeconfig.Problem{Severity: sev, Source: in.Path(p.File), Line: p.Line, Path: p.Path, Message: p.Message})
		}
	}
	add(nodeconfig.SeverityError, in.Errors)
	add(nodeconfig.SeverityWarning, in.Warnings)
	return out
}

// Sources is the seed's user-data as nodeconfig's one source, named by
// its path and decoded as a file is (any format berth reads, to
// userdata.MaxDecodedSize: EC2's 16 KiB limit is not a seed's); nil when
// user-data is missing or empty (an error in Errors).
func (in *Inspection) Sources() []nodeconfig.Source {
	if in.Seed.UserData == nil {
		return nil
	}
	return []nodeconfig.Source{{Name: in.Path(FileUserData), Data: in.Seed.UserData}}
}

// NodeIP is the node's address when network-config gives a static IPv4
// one; "" with DHCP or no network-config, where the node learns it at
// boot.
func (in *Inspection) NodeIP() string {
	if in.Network == nil || in.Network.Mode != network.ModeStatic || !in.Network.Address.IsValid() {
		return ""
	}
	return in.Network.Address.Addr().String()
}

// Nameservers are network-config's DNS servers, which the node's
// resolv.conf lists: the plan's host nameservers, as DHCP's are on EC2.
func (in *Inspection) Nameservers() []string {
	if in.Network == nil {
		return nil
	}
	out := make([]string, len(in.Network.DNS))
	for i, a := range in.Network.DNS {
		out[i] = a.String()
	}
	return out
}

// Describe is what the seed decides, for `berth render --seed`: a
// section in plan.txt's form (a heading line, then "key: value" lines
// indented two spaces), values as berth would apply them.
func (in *Inspection) Describe() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "seed %s:\n", in.Dir)
	md := in.Seed.MetaData
	switch {
	case in.failed(FileMetaData):
		b.WriteString("  meta-data: not read: see its errors\n")
	default:
		fmt.Fprintf(&b, "  instance-id: %s\n", orNone(md.InstanceID, "none in meta-data"))
		if md.LocalHostname != "" {
			fmt.Fprintf(&b, "  node-name: %s (meta-data local-hostname)\n", md.LocalHostname)
		} else {
			b.WriteString("  node-name: none in meta-data (no local-hostname)\n")
		}
	}
	c, n := in.Network, in.Seed.Network
	switch {
	case in.failed(FileNetworkConfig):
		b.WriteString("  network: network-config not applied: see its errors\n")
		return b.Bytes()
	case c == nil || n == nil || len(n.Ethernets) == 0:
		b.WriteString("  network: none in the seed: DHCP on the first Ethernet interface, as without a seed\n")
		return b.Bytes()
	}
	e := n.Ethernets[0]
	fmt.Fprintf(&b, "  network: %s, from network-config version %d (%s, line %d)\n", c.Mode, n.Version, e.Path, e.Line)
	how := "by name"
	if e.MatchMAC != "" {
		how = "by MAC address"
	}
	fmt.Fprintf(&b, "  interface: %s (%s)\n", c.Interface, how)
	if c.Mode == network.ModeStatic {
		fmt.Fprintf(&b, "  address: %s\n", c.Address)
		if c.Gateway.IsValid() {
			fmt.Fprintf(&b, "  default-route: via %s\n", c.Gateway)
		} else {
			b.WriteString("  default-route: none (only the address's own network is reached)\n")
		}
		for _, r := range c.Routes {
			fmt.Fprintf(&b, "  route: %s via %s\n", r.Dst, r.Gateway)
		}
	}
	if len(c.DNS) > 0 {
		dns := strings.Join(in.Nameservers(), ", ")
		if c.Mode == network.ModeDHCP {
			dns += " (after DHCP's)"
		}
		fmt.Fprintf(&b, "  dns: %s\n", dns)
	} else if c.Mode == network.ModeStatic {
		b.WriteString("  dns: none\n")
	}
	if len(c.Search) > 0 {
		search := strings.Join(c.Search, " ")
		if c.Mode == network.ModeDHCP {
			search += " (after DHCP's)"
		}
		fmt.Fprintf(&b, "  search: %s\n", search)
	}
	switch {
	case c.MTU > 0:
		fmt.Fprintf(&b, "  mtu: %d\n", c.MTU)
	case c.Mode == network.ModeDHCP:
		b.WriteString("  mtu: DHCP's (option 26), else the driver's default\n")
	default:
		b.WriteString("  mtu: the driver's default\n")
	}
	switch {
	case c.DHCPv6:
		fmt.Fprintf(&b, "  ipv6: DHCPv6 (waited for up to %s)\n", network.DefaultIPv6Timeout)
	case c.IPv6:
		fmt.Fprintf(&b, "  ipv6: SLAAC (waited for up to %s)\n", network.DefaultIPv6Timeout)
	default:
		b.WriteString("  ipv6: not waited for (router advertisements are still accepted)\n")
	}
	return b.Bytes()
}

// failed reports whether file has errors.
func (in *Inspection) failed(file string) bool {
	for _, p := range in.Errors {
		if p.File == file {
			return true
		}
	}
	return false
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
