package nocloud

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/network"
)

// addCorpus seeds f with every testdata file under dir and with extra.
func addCorpus(f *testing.F, dir string, extra ...string) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus under testdata/%s: %v", dir, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, e := range extra {
		f.Add([]byte(e))
	}
}

// checkProblems asserts what every problem must be: about file, one line
// of text, bounded.
func checkProblems(t *testing.T, file string, ps []Problem) {
	t.Helper()
	for _, p := range ps {
		if p.File != file || p.Message == "" {
			t.Errorf("problem without file or message: %+v", p)
		}
		if strings.ContainsAny(p.Error(), "\n\r") {
			t.Errorf("problem spans lines: %q", p.Error())
		}
		if len(p.Path) > maxPath || len(p.Message) > maxMessage {
			t.Errorf("problem over its bounds: %d-byte path, %d-byte message", len(p.Path), len(p.Message))
		}
	}
	if len(ps) > MaxProblems+1 {
		t.Errorf("%d problems, over MaxProblems", len(ps))
	}
}

// FuzzNetworkConfig feeds arbitrary bytes to ParseNetworkConfig and what
// it accepts to NetworkConfig: neither may panic, errors and warnings
// name network-config, and what is accepted holds only checked values.
func FuzzNetworkConfig(f *testing.F) {
	addCorpus(f, "network-config",
		"network:\n  version: 2\n  bonds: {}\n",
		aliasBomb(),
		"version: 1\nconfig:\n  - {type: physical, name: eth0, subnets: [{type: static, address: 10.0.0.2, netmask: 255.255.255.0, routes: [{destination: 10.1.0.0, netmask: 16, gateway: 10.0.0.1}]}]}\n",
		"version: 2\nethernets:\n  a: &e {dhcp4: true}\n  b: *e\n",
		"{\"version\": 2, \"ethernets\": {\"eth0\": {\"addresses\": [\"10.0.0.2/24\"], \"gateway4\": \"10.0.0.1\"}}}",
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		n, warns, err := ParseNetworkConfig(data)
		checkProblems(t, FileNetworkConfig, warns)
		if err != nil {
			ps, ok := err.(Problems)
			if !ok || len(ps) == 0 {
				t.Fatalf("error %T is not Problems: %v", err, err)
			}
			checkProblems(t, FileNetworkConfig, ps)
			if n != nil {
				t.Fatal("a network returned with an error")
			}
			return
		}
		if n == nil {
			return
		}
		if n.Version != 1 && n.Version != 2 {
			t.Fatalf("version %d accepted", n.Version)
		}
		seen := map[string]bool{}
		for _, e := range n.Ethernets {
			s := e.Selector()
			if s == "" || seen[s] {
				t.Fatalf("selector %q empty or repeated", s)
			}
			seen[s] = true
			if e.MatchMAC == "" && ifNameProblem(s) != "" {
				t.Fatalf("interface name %q accepted", s)
			}
			for _, a := range e.Addresses {
				if !a.IsValid() || a.Addr().Zone() != "" || a.Addr().IsUnspecified() {
					t.Fatalf("address %v accepted", a)
				}
			}
			for _, r := range e.Routes {
				if !r.To.IsValid() || r.To.Masked() != r.To || r.Via.IsValid() && r.Via.Is4() != r.To.Addr().Is4() {
					t.Fatalf("route %+v accepted", r)
				}
			}
			for _, d := range e.Nameservers.Search {
				if err := syntax.DNSName(d); err != nil {
					t.Fatalf("search domain accepted: %v", err)
				}
			}
			if e.MTU != 0 && (e.MTU < 68 || e.MTU > 65535) {
				t.Fatalf("MTU %d accepted", e.MTU)
			}
		}
		c, cwarns, err := NetworkConfig(n)
		checkProblems(t, FileNetworkConfig, cwarns)
		if err != nil {
			if ps, ok := err.(Problems); !ok || len(ps) == 0 {
				t.Fatalf("mapping error %T is not Problems: %v", err, err)
			}
			return
		}
		switch c.Mode {
		case network.ModeStatic:
			if !c.Address.Addr().Is4() || c.Gateway.IsValid() && !c.Address.Masked().Contains(c.Gateway) {
				t.Fatalf("static config %+v", c)
			}
		case network.ModeDHCP:
			if c.Address.IsValid() || c.Gateway.IsValid() {
				t.Fatalf("DHCP config with a static address: %+v", c)
			}
		default:
			t.Fatalf("mode %q", c.Mode)
		}
		if c.Interface == "" {
			t.Fatal("no interface selected")
		}
	})
}

// FuzzMetaData feeds arbitrary bytes to ParseMetaData: it must not panic,
// and what it accepts must be safe to write where berth writes it.
func FuzzMetaData(f *testing.F) {
	addCorpus(f, "meta-data",
		"local-hostname: node_1\n",
		"instance-id: \"a\\nb\"\n",
		"local-hostname: 10.0.0.1\n",
		"{\"instance-id\": [1], \"local-hostname\": {}}",
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		md, warns, err := ParseMetaData(data)
		checkProblems(t, FileMetaData, warns)
		if err != nil {
			ps, ok := err.(Problems)
			if !ok || len(ps) == 0 {
				t.Fatalf("error %T is not Problems: %v", err, err)
			}
			checkProblems(t, FileMetaData, ps)
			if md != (MetaData{}) {
				t.Fatal("meta-data returned with an error")
			}
			return
		}
		if md.LocalHostname != "" {
			if err := syntax.Hostname(md.LocalHostname); err != nil {
				t.Fatalf("hostname accepted: %v", err)
			}
		}
		if err := syntax.NoControl(md.InstanceID); err != nil || len(md.InstanceID) > MaxInstanceID {
			t.Fatalf("instance-id %q accepted", md.InstanceID)
		}
	})
}
