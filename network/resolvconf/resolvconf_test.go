package resolvconf

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name                string
		servers             []netip.Addr
		domain              string
		search, ns, domains []string
	}{
		{name: "qemu", servers: addrs("10.0.2.3")},
		{name: "ec2", servers: addrs("10.0.0.2"), domain: "ec2.internal"},
		{name: "dhcp-search", servers: addrs("10.0.0.2", "10.0.0.2", "fd00::2"), domain: "a.example", search: []string{"a.example", "b.example."}},
		{name: "override", servers: addrs("10.0.0.2"), domain: "ec2.internal", ns: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "10.0.0.2"}, domains: []string{"corp.example."}},
		// The NodeConfig sets only the search list: DHCP's servers stay.
		{name: "override-domains", servers: addrs("10.0.0.2"), domain: "ec2.internal", domains: []string{"corp.example", "ec2.internal"}},
		{name: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Merge(tc.servers, tc.domain, tc.search, tc.ns, tc.domains)
			if err != nil {
				t.Fatal(err)
			}
			got := Render(f)
			goldenPath := filepath.Join("testdata", tc.name+".golden")
			golden.Check(t, goldenPath, got, *update)
		})
	}
}

func TestMergeErrors(t *testing.T) {
	if _, err := Merge(nil, "", nil, []string{"1.1.1.1", "one"}, nil); err == nil ||
		!strings.Contains(err.Error(), `spec.instance.network.nameservers[1]: "one" is not an IP address`) {
		t.Errorf("bad nameserver: %v", err)
	}
	if _, err := Merge(nil, "", nil, []string{"fe80::1%eth0\noptions ndots:9"}, nil); err == nil ||
		!strings.Contains(err.Error(), "nameservers[0]") {
		t.Errorf("zone with a newline: %v", err)
	}
	if _, err := Merge(nil, "", nil, []string{"fe80::1%eth0"}, nil); err != nil {
		t.Errorf("plain zone: %v", err)
	}
	if _, err := Merge(nil, "", nil, []string{"fd00::1%eth0"}, nil); err == nil ||
		!strings.Contains(err.Error(), "only allowed on a link-local address") {
		t.Errorf("zone on a global address: %v", err)
	}
	if _, err := Merge(nil, "", nil, nil, []string{"-bad.com"}); err == nil ||
		!strings.Contains(err.Error(), `spec.instance.network.domains[0]: "-bad.com" is not a DNS name`) {
		t.Errorf("bad domain: %v", err)
	}
	if _, err := Merge(nil, "", nil, nil, []string{"ok.example", "evil\nnameserver 6.6.6.6"}); err == nil ||
		!strings.Contains(err.Error(), `spec.instance.network.domains[1]: "evil\nnameserver 6.6.6.6"`) {
		t.Errorf("domain with a newline: %v", err)
	}
}

func TestWriteIfChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "etc", "resolv.conf")
	f := File{Nameservers: addrs("10.0.2.3"), Search: []string{"x.example"}}
	if err := WriteIfChanged(p, f); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(p)
	if st1.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st1.Mode())
	}
	ino := func() uint64 { st, _ := os.Stat(p); return statIno(st) }
	before := ino()
	if err := WriteIfChanged(p, f); err != nil {
		t.Fatal(err)
	}
	if ino() != before {
		t.Error("unchanged content was rewritten")
	}
	f.Nameservers = addrs("10.0.2.4")
	if err := WriteIfChanged(p, f); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "nameserver 10.0.2.4\n") || ino() == before {
		t.Errorf("changed content not written atomically:\n%s", b)
	}
}

// TestRenderLeavesOutWhatIsNotAName: values that reach Render without
// Merge's checks (a File built by hand, DHCP's values) are left out when
// they are not addresses or names.
func TestRenderLeavesOutWhatIsNotAName(t *testing.T) {
	f := File{
		Nameservers: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::1%x\nnameserver 6.6.6.6"), {}},
		Search:      []string{"good.example", "a.example\rnameserver 6.6.6.6", "x#y", "b.example."},
	}
	want := headerDHCP + "nameserver 10.0.0.2\nsearch good.example b.example\n"
	if got := string(Render(f)); got != want {
		t.Errorf("Render:\n%q\nwant\n%q", got, want)
	}
	rc, err := Merge(f.Nameservers, "dom\nain.example", f.Search, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(Render(rc)); got != want {
		t.Errorf("Render(Merge):\n%q\nwant\n%q", got, want)
	}
}

// FuzzMerge: whatever NodeConfig and DHCP say, resolv.conf has only
// comment, nameserver and search lines (no injected directives).
func FuzzMerge(f *testing.F) {
	f.Add("10.0.2.3", "ec2.internal", "a.example", "1.1.1.1", "corp.example")
	f.Add("", "", "", "", "x\nnameserver 6.6.6.6")
	f.Fuzz(func(t *testing.T, server, domain, search, ns, dom string) {
		var servers []netip.Addr
		if a, err := netip.ParseAddr(server); err == nil {
			servers = append(servers, a)
		}
		var nsl, doml []string
		if ns != "" {
			nsl = []string{ns}
		}
		if dom != "" {
			doml = []string{dom}
		}
		file, err := Merge(servers, domain, []string{search}, nsl, doml)
		if err != nil {
			return
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(Render(file)), "\n"), "\n") {
			if !(strings.HasPrefix(line, "#") || strings.HasPrefix(line, "nameserver ") || strings.HasPrefix(line, "search ")) {
				t.Fatalf("unexpected line %q", line)
			}
		}
	})
}
