package plan

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	tomlu "github.com/pelletier/go-toml/v2/unstable"

	"github.com/berth-node/berth/config/nodeconfig"
)

// containerdHosts reads a hosts.toml as containerd 2.2's
// core/remotes/docker/config.parseHostsFile does, with the same go-toml
// calls (importing containerd would pull its module graph into berth's
// go.mod): the [host."..."] tables in file order with their capabilities,
// and the top-level server.
func containerdHosts(t *testing.T, b []byte) (server string, hosts []string, caps [][]string) {
	t.Helper()
	p := tomlu.Parser{}
	p.Reset(b)
	last := ""
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != tomlu.Table {
			continue
		}
		var parts []string
		for it := e.Key(); it.Next(); {
			parts = append(parts, string(it.Node().Data))
		}
		if len(parts) < 2 || parts[0] != "host" || parts[1] == last {
			continue
		}
		last = parts[1]
		hosts = append(hosts, last)
	}
	if err := p.Error(); err != nil {
		t.Fatalf("hosts.toml: %v\n%s", err, b)
	}
	var c struct {
		Server string `toml:"server"`
		Host   map[string]struct {
			Capabilities []string `toml:"capabilities"`
		} `toml:"host"`
	}
	if err := toml.Unmarshal(b, &c); err != nil {
		t.Fatalf("hosts.toml: %v\n%s", err, b)
	}
	for _, h := range hosts {
		caps = append(caps, c.Host[h].Capabilities)
	}
	return c.Server, hosts, caps
}

func TestHostsTOMLAsContainerdReadsIt(t *testing.T) {
	for _, m := range []nodeconfig.RegistryMirrors{
		{Registry: "registry.berth.test", Endpoints: []string{"http://10.0.2.2:5000"}},
		{Registry: "docker.io", Endpoints: []string{"https://b.example.com/x", "https://a.example.com:8443"}},
		{Registry: "[fd00::1]:5000", Endpoints: []string{"http://[fd00::2]:5000/v2", "https://c.example.com/'$&()*+,;=@!~%41"}},
		{Registry: "*", Endpoints: []string{"https://cache.example.com"}},
	} {
		server, hosts, caps := containerdHosts(t, hostsTOML(m))
		want := upstream(m.Registry)
		if m.Registry == "*" {
			want = ""
		}
		if server != want {
			t.Errorf("%s: server %q, want %q", m.Registry, server, want)
		}
		if !reflect.DeepEqual(hosts, m.Endpoints) {
			t.Errorf("%s: mirrors %q, want %q in order", m.Registry, hosts, m.Endpoints)
		}
		for i, c := range caps {
			if !reflect.DeepEqual(c, []string{"pull", "resolve"}) {
				t.Errorf("%s: %s capabilities %q", m.Registry, hosts[i], c)
			}
		}
	}
}

func TestHostsDirName(t *testing.T) {
	for in, want := range map[string]string{
		"*": "_default", "docker.io": "docker.io", "10.0.0.5:5000": "10.0.0.5_5000_",
		"[fd00::1]": "[fd00::1]", "[fd00::1]:5000": "[fd00::1]_5000_",
	} {
		if got := hostsDirName(in); got != want {
			t.Errorf("hostsDirName(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestRegistryHostsDirIsConfigPath: containerd looks where the files go.
func TestRegistryHostsDirIsConfigPath(t *testing.T) {
	p, err := Build(caseByName(t, "registry-mirrors").inputs(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range p.Files {
		found = found || f.Path == "/etc/containerd/config.toml"
		if f.Path == "/etc/containerd/config.toml" && !strings.Contains(string(f.Data), `config_path = '`+RegistryHostsDir+`:`) &&
			!strings.Contains(string(f.Data), `config_path = "`+RegistryHostsDir+`:`) {
			t.Errorf("config.toml's config_path does not start with %s:\n%s", RegistryHostsDir, f.Data)
		}
	}
	if !found {
		t.Error("no config.toml planned")
	}
}

func TestOverridden(t *testing.T) {
	p, err := Build(caseByName(t, "registry-mirrors").inputs(t))
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string][]byte{}
	for _, f := range p.Files {
		planned[f.Path] = f.Data
	}
	disk := map[string][]byte{
		// Same bytes (a reboot of an image that baked berth's own): no override.
		"/etc/containerd/certs.d/registry.berth.test/hosts.toml": planned["/etc/containerd/certs.d/registry.berth.test/hosts.toml"],
		"/etc/containerd/certs.d/docker.io/hosts.toml":           []byte("server = \"https://registry-1.docker.io\"\n"),
		// Shadowed by 10.0.0.5_5000_, which containerd reads first.
		"/etc/containerd/certs.d/10.0.0.5:5000/hosts.toml": []byte("x"),
		// Not a hosts.toml: none of this check's business.
		"/etc/containerd/config.toml": []byte("x"),
	}
	got := p.Overridden(func(path string) ([]byte, error) {
		if b, ok := disk[path]; ok {
			return b, nil
		}
		return nil, fs.ErrNotExist
	})
	want := []string{"/etc/containerd/certs.d/docker.io/hosts.toml", "/etc/containerd/certs.d/10.0.0.5:5000/hosts.toml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Overridden = %q, want %q", got, want)
	}
	if got := p.Overridden(func(string) ([]byte, error) { return nil, errors.New("EACCES") }); got != nil {
		t.Errorf("unreadable files: %q", got)
	}
}
