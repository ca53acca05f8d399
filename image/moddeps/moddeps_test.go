package moddeps

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/internal/kotest"
	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// fakeTree mirrors the shape of Debian's virtio/nvme/xfs modules.
func fakeTree(t *testing.T) string {
	dir := t.TempDir()
	k := filepath.Join(dir, "kernel")
	kotest.WriteKO(t, filepath.Join(k, "drivers/nvme/host/nvme.ko"), "license=GPL", "depends=nvme-core",
		"alias=pci:v*d*sv*sd*bc01sc08i02*", "name=nvme")
	kotest.WriteKO(t, filepath.Join(k, "drivers/nvme/host/nvme-core.ko"), "depends=t10-pi", "name=nvme_core")
	kotest.WriteKO(t, filepath.Join(k, "block/t10-pi.ko"), "depends=crc64-rocksoft", "name=t10_pi")
	kotest.WriteKO(t, filepath.Join(k, "lib/crc64-rocksoft.ko"), "depends=", "name=crc64_rocksoft")
	kotest.WriteKO(t, filepath.Join(k, "drivers/net/virtio_net.ko"), "depends=virtio_ring,virtio,net_failover",
		"alias=virtio:d00000001v*", "name=virtio_net")
	kotest.WriteKO(t, filepath.Join(k, "drivers/virtio/virtio.ko"), "depends=", "name=virtio")
	kotest.WriteKO(t, filepath.Join(k, "drivers/virtio/virtio_ring.ko"), "depends=virtio", "name=virtio_ring")
	kotest.WriteKO(t, filepath.Join(k, "drivers/net/net_failover.ko"), "depends=failover", "name=net_failover")
	kotest.WriteKO(t, filepath.Join(k, "net/core/failover.ko"), "depends=", "name=failover")
	kotest.WriteKO(t, filepath.Join(k, "fs/xfs/xfs.ko"), "depends=libcrc32c", "alias=fs-xfs", "name=xfs")
	kotest.WriteKO(t, filepath.Join(k, "lib/libcrc32c.ko"), "depends=", "softdep=pre: crc32c", "name=libcrc32c")
	kotest.WriteKO(t, filepath.Join(k, "fs/unused.ko"), "name=unused")
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/net/ipv6/ipv6.ko\nkernel/net/packet/af_packet.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSelectClosureAndFiles(t *testing.T) {
	tree, err := Scan(fakeTree(t))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := tree.Select([]Request{{Name: "nvme"}, {Name: "virtio_net"}, {Name: "xfs"},
		{Name: "ipv6", Optional: true}, {Name: "squashfs", Optional: true}, {Name: "af_packet"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range sel.Modules {
		names = append(names, m.Name)
	}
	want := []string{"crc64_rocksoft", "failover", "libcrc32c", "net_failover", "nvme", "nvme_core", "t10_pi",
		"virtio", "virtio_net", "virtio_ring", "xfs"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("closure = %v, want %v", names, want)
	}
	if !reflect.DeepEqual(sel.Builtin, []string{"af_packet", "ipv6"}) {
		t.Errorf("builtin = %v", sel.Builtin)
	}
	if !reflect.DeepEqual(sel.Missing, []string{"squashfs"}) {
		t.Errorf("missing = %v", sel.Missing)
	}
	dep, err := DepFile(sel.Modules)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "modules.dep", dep)
	checkGolden(t, "modules.alias", AliasFile(sel.Modules))
	checkGolden(t, "modules.softdep", SoftdepFile(sel.Modules))
	// Loading nvme's list from its end must put every module after its deps.
	line := lineFor(t, string(dep), "kernel/drivers/nvme/host/nvme.ko:")
	if !strings.HasSuffix(line, "kernel/drivers/nvme/host/nvme-core.ko kernel/block/t10-pi.ko kernel/lib/crc64-rocksoft.ko") {
		t.Errorf("nvme deps not in depmod order: %q", line)
	}
}

func TestSelectRequiredMissing(t *testing.T) {
	tree, err := Scan(fakeTree(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tree.Select([]Request{{Name: "squashfs"}})
	if err == nil || !strings.Contains(err.Error(), "squashfs") {
		t.Fatalf("want an error naming squashfs, got %v", err)
	}
}

func TestClosureCycle(t *testing.T) {
	mods := map[string]Module{
		"a": {Name: "a", Depends: []string{"b"}},
		"b": {Name: "b", Depends: []string{"a"}},
	}
	if _, err := Closure(mods, "a"); err == nil || !strings.Contains(err.Error(), "a -> b -> a") {
		t.Fatalf("want cycle error, got %v", err)
	}
}

func TestClosureDiamond(t *testing.T) {
	mods := map[string]Module{
		"top":  {Name: "top", Depends: []string{"l", "r"}},
		"l":    {Name: "l", Depends: []string{"base"}},
		"r":    {Name: "r", Depends: []string{"base"}},
		"base": {Name: "base"},
	}
	got, err := Closure(mods, "top")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"r", "l", "base"}) {
		t.Errorf("Closure = %v", got)
	}
}

func TestParseModinfo(t *testing.T) {
	m, err := ParseModinfo("kernel/x/dm-mod.ko", []byte("license=GPL\x00depends=a-b, c\x00softdep=pre: crc32c post: z\x00alias=x*\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	want := Module{Name: "dm_mod", Path: "kernel/x/dm-mod.ko", Depends: []string{"a_b", "c"}, Aliases: []string{"x*"}, SoftPre: []string{"crc32c"}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if _, err := ParseModinfo("bad.ko", []byte("noequals\x00")); err == nil || !strings.Contains(err.Error(), "bad.ko") {
		t.Errorf("want error naming bad.ko, got %v", err)
	}
}

func FuzzParseModinfo(f *testing.F) {
	f.Add([]byte("name=nvme\x00depends=nvme-core\x00alias=pci:v*d*\x00"))
	f.Add([]byte("softdep=pre: a b post: c\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModinfo("k.ko", data)
		if err != nil {
			return
		}
		if m.Name == "" || strings.Contains(m.Name, "-") {
			t.Errorf("bad name %q", m.Name)
		}
		for _, d := range m.Depends {
			if d == "" {
				t.Errorf("empty dependency from %q", data)
			}
		}
	})
}

func lineFor(t *testing.T, text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting %q in:\n%s", prefix, text)
	return ""
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	golden.Check(t, p, got, *update)
}
