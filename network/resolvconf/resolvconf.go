// Package resolvconf renders and writes /etc/resolv.conf. berth has no
// systemd-resolved (nodeadm writes a resolved drop-in instead), so the file
// the libc resolver and kubelet's --resolv-conf read is written directly.
//
// It is berth's only resolv.conf renderer: the network phase (DHCP at boot
// and at every renewal) and the plan (the NodeConfig's
// spec.instance.network) both go through Merge and Render, so the same
// settings always give the same bytes. Merge and Render are pure; only
// Write and WriteIfChanged touch the filesystem.
package resolvconf

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/internal/syntax"
)

// MaxNameservers is glibc's MAXNS: later nameserver lines are ignored by
// the resolver, so berth drops them and says so in a comment.
const MaxNameservers = 3

// The first line of the file says who chose its contents.
const (
	headerDHCP       = "# Written by berth at boot from DHCP and NodeConfig spec.instance.network; edits are lost on reboot.\n"
	headerNodeConfig = "# Written by berth from spec.instance.network.\n"
)

// File is the content of resolv.conf.
type File struct {
	Nameservers []netip.Addr
	Search      []string
	// FromNodeConfig says the NodeConfig's spec.instance.network set the
	// nameservers or the search list (Merge sets it); the header comment
	// says so.
	FromNodeConfig bool
}

// Merge picks what resolv.conf says: the NodeConfig overrides
// (spec.instance.network.nameservers and .domains) replace the DHCP values
// field by field when they are set; the search list is the DHCP domain
// (option 15) followed by the search list (option 119), without duplicates.
func Merge(dhcpServers []netip.Addr, dhcpDomain string, dhcpSearch []string, nameservers, domains []string) (File, error) {
	f := File{FromNodeConfig: len(nameservers) > 0 || len(domains) > 0}
	if len(nameservers) > 0 {
		for i, s := range nameservers {
			s = strings.TrimSpace(s)
			if err := syntax.IP(s, true); err != nil {
				return File{}, fmt.Errorf("spec.instance.network.nameservers[%d]: %w", i, err)
			}
			a, _ := netip.ParseAddr(s) // syntax.IP parsed it already
			f.Nameservers = append(f.Nameservers, a)
		}
	} else {
		f.Nameservers = append(f.Nameservers, dhcpServers...)
	}
	var search []string
	if len(domains) > 0 {
		for i, d := range domains {
			d = strings.TrimSpace(d)
			if err := syntax.DNSName(d); err != nil {
				return File{}, fmt.Errorf("spec.instance.network.domains[%d]: %w", i, err)
			}
			search = append(search, strings.TrimSuffix(d, "."))
		}
	} else {
		if dhcpDomain != "" {
			search = append(search, dhcpDomain)
		}
		search = append(search, dhcpSearch...)
	}
	f.Nameservers = dedupAddrs(f.Nameservers)
	f.Search = dedupStrings(search)
	return f, nil
}

// Render gives the bytes of resolv.conf. It is deterministic: the same
// File gives the same bytes.
func Render(f File) []byte {
	var b bytes.Buffer
	if f.FromNodeConfig {
		b.WriteString(headerNodeConfig)
	} else {
		b.WriteString(headerDHCP)
	}
	// Render is the last step before the file: whatever reached f without
	// Merge's checks (DHCP's values, a File built by hand) and is not an
	// address or a name is left out rather than written.
	n := 0
	for _, a := range f.Nameservers {
		if !a.IsValid() || syntax.IP(a.String(), true) != nil {
			continue
		}
		n++
		if n > MaxNameservers {
			fmt.Fprintf(&b, "# dropped (the resolver reads only %d): nameserver %s\n", MaxNameservers, a)
			continue
		}
		fmt.Fprintf(&b, "nameserver %s\n", a)
	}
	var search []string
	for _, s := range f.Search {
		s = strings.TrimSuffix(s, ".")
		if syntax.DNSName(s) == nil {
			search = append(search, s)
		}
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	return b.Bytes()
}

// Write renders f to path atomically (mode 0644).
func Write(path string, f File) error {
	if err := fsutil.WriteFileAtomic(path, Render(f), 0o644); err != nil {
		return fmt.Errorf("writing resolv.conf: %w", err)
	}
	return nil
}

// WriteIfChanged writes f to path unless the file already says exactly
// that, so renewals do not churn the file.
func WriteIfChanged(path string, f File) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, Render(f)) {
		return nil
	}
	return Write(path, f)
}

func dedupAddrs(in []netip.Addr) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, a := range in {
		if a.IsValid() && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

func dedupStrings(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
