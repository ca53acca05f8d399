package assemble

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/spec"
)

// arm64Root is a sysroot of tiny aarch64 ELF files laid out as Debian's
// arm64 packages unpack (image/elfdeps/testdata/mkroot.sh).
const arm64Root = "../elfdeps/testdata/arm64root"

// sysrootSpec names host paths the way image/spec.yaml does: programs by
// name, a multiarch plugins dir, absolute files and busybox.
const sysrootSpec = `
modules: [nvme, loop, erofs]
preload: [loop, erofs]
root:
  files: [{dst: /etc/protocols, src: /etc/protocols, mode: "0644"}, {dst: /etc/mke2fs.conf, src: /etc/mke2fs.conf, mode: "0644", optional: true}]
  plugins: [{dir: "/usr/lib/${MULTIARCH}/xtables"}]
  binaries: [{name: mkfs.ext4, tool: true}]
  busybox: {src: /bin/busybox, dst: /bin/busybox, applets: [sh]}
`

// An arm64 image built with -sysroot reads every absolute host path under
// it, links resolved inside it: the program by name, its loader through an
// absolute link, its libraries from the aarch64 directories, the plugins
// from the aarch64 xtables directory with their links, and passes the ELF
// machine check.
func TestBuildSysroot(t *testing.T) {
	s, err := spec.Parse([]byte(sysrootSpec))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	berth, _ := fakeBerth(t, "arm64")
	in := Inputs{Spec: rs, Berth: berth, BerthVersion: "v0.0.0-test", KernelDir: fakeKernelFor(t, "arm64"),
		RepoRoot: "../..", Out: t.TempDir(), Arch: "arm64", Sysroot: arm64Root}
	res, err := Build(context.Background(), slog.New(slog.DiscardHandler), in)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]manifest.File{}
	for _, f := range res.Manifest.Files {
		files[f.Path] = f
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(arm64Root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for p, src := range map[string]string{
		"/usr/sbin/mkfs.ext4":                           "/sbin/mke2fs",
		"/lib/ld-linux-aarch64.so.1":                    "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
		"/lib/aarch64-linux-gnu/libfoo.so.1":            "/lib/aarch64-linux-gnu/libfoo.so.1.2.3",
		"/usr/lib/aarch64-linux-gnu/libbar.so.2":        "/usr/lib/aarch64-linux-gnu/libbar.so.2",
		"/usr/lib/aarch64-linux-gnu/xtables/libxt_a.so": "/usr/lib/aarch64-linux-gnu/xtables/libxt_a.so",
		"/etc/protocols":                                "/etc/protocols",
		"/bin/busybox":                                  "/bin/busybox",
	} {
		f, ok := files[p]
		if !ok || f.Link != "" {
			t.Errorf("image lacks file %s (%+v)", p, f)
			continue
		}
		if want := int64(len(read(src))); f.Size != want {
			t.Errorf("%s: %d bytes, want %d (the sysroot's %s)", p, f.Size, want, src)
		}
	}
	if l := files["/usr/lib/aarch64-linux-gnu/xtables/libxt_b.so"].Link; l != "libxt_a.so" {
		t.Errorf("libxt_b.so links to %q, want libxt_a.so", l)
	}
	if _, ok := files["/etc/mke2fs.conf"]; ok {
		t.Error("optional /etc/mke2fs.conf shipped, but the sysroot has none (the builder's own must not be read)")
	}
	if res.Manifest.Tools["mkfs.ext4"] != "/usr/sbin/mkfs.ext4" {
		t.Errorf("tools %v", res.Manifest.Tools)
	}

	// Without the sysroot the same spec reads the builder's amd64 files,
	// which the machine check refuses (the builder has no aarch64 xtables).
	noPlugins := *rs
	noPlugins.Root.Plugins = nil
	in.Spec, in.Sysroot, in.Out = &noPlugins, "", t.TempDir()
	if _, err := Build(context.Background(), slog.New(slog.DiscardHandler), in); err == nil || !strings.Contains(err.Error(), "EM_X86_64") {
		t.Errorf("arm64 image from the builder's /: %v, want the amd64 files refused", err)
	}
	in.Sysroot = filepath.Join(t.TempDir(), "none")
	if _, err := Build(context.Background(), slog.New(slog.DiscardHandler), in); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("missing sysroot: %v, want an error naming it", err)
	}
}

// HostFiles names what make sysroot must unpack, in the target's terms, and
// nothing the repository provides.
func TestHostFiles(t *testing.T) {
	s, err := spec.Parse([]byte(sysrootSpec + `  images: [{name: "x:1", src: build/none.tar, dst: /x.tar}]
  goBuild: [{package: ./qemu-tests/cmd/orphaner, dst: /usr/bin/orphaner}]
`))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rs.Root.Binaries = append(rs.Root.Binaries, spec.Binary{Name: "kubelet", Src: "build/none/kubelet"},
		spec.Binary{Name: "containerd", Src: filepath.Join(repo, "build/none/containerd")})
	got, err := HostFiles(context.Background(), Inputs{Spec: rs, RepoRoot: "../..", Arch: "arm64", Sysroot: arm64Root})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/bin/busybox",
		"/etc/protocols",
		"/lib/aarch64-linux-gnu/libfoo.so.1",
		"/lib/ld-linux-aarch64.so.1",
		"/sbin/mkfs.ext4",
		"/usr/lib/aarch64-linux-gnu/libbar.so.2",
		"/usr/lib/aarch64-linux-gnu/xtables/libxt_a.so",
	}
	if !slices.Equal(got, want) {
		t.Errorf("HostFiles =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
