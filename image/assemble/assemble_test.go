package assemble

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/elfdeps"
	"github.com/berth-node/berth/image/fstree"
	"github.com/berth-node/berth/image/internal/kotest"
	"github.com/berth-node/berth/image/moddeps"
	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/image/spec"
	"github.com/berth-node/berth/image/sysroot"
	"github.com/berth-node/berth/image/verity"
	mverity "github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/repo"
)

const kver = "6.1.0-test-amd64"

func fakeKernel(t *testing.T) string { return fakeKernelFor(t, "amd64") }

// fakeKernelFor is an unpacked kernel package for arch: modules of its
// ELF machine, and a vmlinuz with its boot image's magic number.
func fakeKernelFor(t *testing.T, arch string) string {
	dir := t.TempDir()
	mods := filepath.Join(dir, "lib/modules", kver)
	m, _ := elfarch.Machine(arch)
	kotest.WriteKOFor(t, filepath.Join(mods, "kernel/drivers/block/loop.ko"), m, "alias=devname:loop-control", "name=loop")
	kotest.WriteKOFor(t, filepath.Join(mods, "kernel/fs/erofs/erofs.ko"), m, "depends=", "alias=fs-erofs", "name=erofs")
	kotest.WriteKOFor(t, filepath.Join(mods, "kernel/drivers/nvme/host/nvme.ko"), m, "depends=nvme-core", "alias=pci:v*d*sv*sd*bc01sc08i02*", "name=nvme")
	kotest.WriteKOFor(t, filepath.Join(mods, "kernel/drivers/nvme/host/nvme-core.ko"), m, "name=nvme_core")
	kotest.WriteKOFor(t, filepath.Join(mods, "kernel/fs/unshipped.ko"), m, "name=unshipped")
	// Loaded only once the root is mounted: not in the initramfs.
	kotest.WriteKOFor(t, filepath.Join(mods, "kernel/net/netfilter/xt_statistic.ko"), m, "alias=ipt_statistic", "name=xt_statistic")
	for name, data := range map[string]string{
		"boot/vmlinuz-" + kver:                     fakeVmlinuz(arch),
		"lib/modules/" + kver + "/modules.builtin": "kernel/net/ipv6/ipv6.ko\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeVmlinuz is a kernel image with only arch's magic number set.
func fakeVmlinuz(arch string) string {
	b := make([]byte, 0x300)
	switch arch {
	case "amd64":
		copy(b[0x202:], "HdrS")
	case "arm64":
		copy(b[56:], "ARM\x64")
	}
	return string(b)
}

// fakeBerth writes a stand-in berth, an ELF file of arch's machine.
func fakeBerth(t *testing.T, arch string) (path string, data []byte) {
	t.Helper()
	m, _ := elfarch.Machine(arch)
	data = kotest.ELF(m, "fake berth")
	path = filepath.Join(t.TempDir(), "berth")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path, data
}

const testSpec = `
modules: [nvme, loop, erofs, xt_statistic, "ipv6?", "squashfs?"]
preload: [loop, erofs]
kernelArgs: [cryptomgr.notests, a.b=c]
root:
  dirs: [{path: /proc, mode: "0555"}, {path: /tmp, mode: "1777"}]
  symlinks: [{path: /sbin/init, target: berth}]
  files: [{dst: /etc/hosts, content: "127.0.0.1 localhost\n", mode: "0644"}]
  binaries: [{name: mkfs.ext4, tool: true}]
`

func build(t *testing.T, kernel, berth, out string, opts ...func(*Inputs)) *Result {
	res, err := tryBuild(t, kernel, berth, out, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tryBuild builds testSpec with opts applied, for a test that expects
// Build to fail.
func tryBuild(t *testing.T, kernel, berth, out string, opts ...func(*Inputs)) (*Result, error) {
	t.Helper()
	s, err := spec.Parse([]byte(testSpec))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	in := Inputs{Spec: rs, Berth: berth, BerthVersion: "v0.0.0-test", KernelDir: kernel, RepoRoot: ".", Out: out}
	for _, o := range opts {
		o(&in)
	}
	return Build(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), in)
}

// readInitramfs returns the regular files of the cpio at path by their
// absolute path.
func readInitramfs(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(f))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, r := range recs {
		if r.Mode&cpio.S_IFMT == cpio.S_IFREG {
			data, err := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
			if err != nil {
				t.Fatal(err)
			}
			files["/"+r.Name] = data
		}
	}
	return files
}

// Two builds of the same inputs are byte-identical, and the initramfs holds
// what berth expects where it expects it.
func TestBuild(t *testing.T) {
	kernel := fakeKernel(t)
	berth, berthData := fakeBerth(t, "amd64")
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	res := build(t, kernel, berth, a)
	build(t, kernel, berth, b)
	for _, f := range []string{"initramfs.img", "root.erofs", "manifest.json", "vmlinuz"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same inputs", f)
		}
	}

	m := res.Manifest
	if m.KernelVersion != kver || m.BerthVersion != "v0.0.0-test" || m.Arch != "amd64" {
		t.Errorf("versions %q %q, arch %q", m.KernelVersion, m.BerthVersion, m.Arch)
	}
	if !slices.Equal(m.Modules, []string{"erofs", "loop", "nvme", "nvme_core", "xt_statistic"}) {
		t.Errorf("modules %v", m.Modules)
	}
	// nvme is a device driver (a pci: alias), loop and erofs are preloaded;
	// xt_statistic is for later and stays on the root.
	if !slices.Equal(m.EarlyModules, []string{"erofs", "loop", "nvme", "nvme_core"}) {
		t.Errorf("early modules %v", m.EarlyModules)
	}
	if !slices.Equal(m.Preload, []string{"loop", "erofs"}) {
		t.Errorf("preload %v", m.Preload)
	}
	if m.Tools["mkfs.ext4"] != "/usr/sbin/mkfs.ext4" {
		t.Errorf("tools %v", m.Tools)
	}
	// root.erofs is the root disk: the filesystem the manifest describes,
	// then the dm-verity tree its parameters point at.
	disk, _ := os.ReadFile(filepath.Join(a, "root.erofs"))
	if m.Root == nil || m.Root.Size <= 0 || m.Root.Size > int64(len(disk)) {
		t.Fatalf("root %+v, root.erofs %d bytes", m.Root, len(disk))
	}
	rootData := disk[:m.Root.Size]
	sum := sha256.Sum256(rootData)
	if m.Root.Format != "erofs" || m.Root.Path != "" || m.Root.Serial != RootSerial || m.Root.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("root %+v", m.Root)
	}
	vp, err := mverity.ParseParam(m.Root.Verity)
	if err != nil {
		t.Fatalf("root verity %q: %v", m.Root.Verity, err)
	}
	tree, err := verity.Build(bytes.NewReader(rootData), int64(len(rootData)), verity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if vp.RootHash != tree.RootHashHex() || vp.RootHash != m.Root.RootHash || vp.Salt != tree.SaltHex() ||
		vp.DataBlocks*verity.BlockSize != uint64(m.Root.Size) || vp.HashStartBlock != vp.DataBlocks {
		t.Errorf("root verity %+v, want root hash %s salt %s over %d bytes, tree right after", vp, tree.RootHashHex(), tree.SaltHex(), m.Root.Size)
	}
	if !bytes.Equal(disk[m.Root.Size:], tree.Hash) {
		t.Errorf("root.erofs after the filesystem: %d bytes, not its %d-byte hash tree", len(disk)-int(m.Root.Size), len(tree.Hash))
	}
	if res.RootSize != int64(len(disk)) {
		t.Errorf("result root size %d, root.erofs %d bytes", res.RootSize, len(disk))
	}
	byPath := map[string]manifest.File{}
	for i, f := range m.Files {
		byPath[f.Path] = f
		if i > 0 && m.Files[i-1].Path >= f.Path {
			t.Errorf("manifest files not sorted at %s", f.Path)
		}
	}
	for _, p := range []string{"/init", "/sbin/berth", "/usr/sbin/mkfs.ext4", "/etc/os-release", "/etc/hosts",
		"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2",
		"/lib/modules/" + kver + "/kernel/drivers/nvme/host/nvme-core.ko", "/lib/modules/" + kver + "/modules.dep"} {
		if _, ok := byPath[p]; !ok {
			t.Errorf("manifest lacks %s", p)
		}
	}
	if l := byPath["/sbin/init"].Link; l != "berth" {
		t.Errorf("/sbin/init link %q", l)
	}

	files := readInitramfs(t, filepath.Join(a, "initramfs.img"))
	if !bytes.Equal(files["/init"], berthData) {
		t.Error("/init is not berth")
	}
	if _, ok := files[RootImagePath]; ok {
		t.Errorf("the initramfs carries %s: the root belongs on its own disk", RootImagePath)
	}
	mj, _ := os.ReadFile(filepath.Join(a, "manifest.json"))
	if !bytes.Equal(files[manifest.DefaultPath], mj) {
		t.Error("manifest in the initramfs differs from manifest.json")
	}
	dep := string(files["/lib/modules/"+kver+"/modules.dep"])
	if !strings.Contains(dep, "kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko\n") {
		t.Errorf("modules.dep:\n%s", dep)
	}
	alias := string(files["/lib/modules/"+kver+"/modules.alias"])
	if !strings.Contains(alias, "alias pci:v*d*sv*sd*bc01sc08i02* nvme\n") {
		t.Errorf("modules.alias:\n%s", alias)
	}
	if _, ok := files["/lib/modules/"+kver+"/modules.builtin"]; !ok {
		t.Error("modules.builtin not copied")
	}
	if _, ok := files["/lib/modules/"+kver+"/kernel/fs/unshipped.ko"]; ok {
		t.Error("an unrequested module was shipped")
	}
	// The root has every module and the index of all of them; the
	// initramfs only the early ones, and an index of those.
	late := "/lib/modules/" + kver + "/kernel/net/netfilter/xt_statistic.ko"
	if _, ok := files[late]; ok {
		t.Errorf("the initramfs carries %s, which nothing loads before the root is mounted", late)
	}
	if strings.Contains(dep, "xt_statistic") || strings.Contains(alias, "xt_statistic") {
		t.Errorf("the initramfs's index names xt_statistic:\n%s%s", dep, alias)
	}
	if _, ok := byPath[late]; !ok {
		t.Errorf("manifest lacks %s: the root must carry every module", late)
	}
	if f := byPath["/lib/modules/"+kver+"/modules.dep"]; f.Size <= int64(len(dep)) {
		t.Errorf("manifest's modules.dep is %d bytes, not the root's full index (the initramfs's is %d)", f.Size, len(dep))
	}
}

// The early set: every device driver (by a bus alias), the named modules,
// and what they need, by dependency or by a soft dependency on an alias.
func TestEarlyModules(t *testing.T) {
	all := []moddeps.Module{
		{Name: "virtio_net", Aliases: []string{"virtio:d00000001v*"}, Depends: []string{"net_failover"}},
		{Name: "net_failover", Depends: []string{"failover"}},
		{Name: "failover"},
		{Name: "button", Aliases: []string{"acpi*:PNP0C0C:*"}},
		{Name: "crc32c_intel", Aliases: []string{"cpu:type:x86,ven*fam*mod*:feature:*0094*", "crypto-crc32c", "crc32c"}},
		{Name: "crc32c_generic", Aliases: []string{"crypto-crc32c", "crc32c"}},
		{Name: "libcrc32c", SoftPre: []string{"crc32c"}},
		{Name: "erofs", Aliases: []string{"fs-erofs"}, Depends: []string{"libcrc32c"}},
		{Name: "loop", Aliases: []string{"devname:loop-control", "char-major-10-237"}},
		{Name: "ip_set_hash_ip", Aliases: []string{"ip_set:hash:ip"}, Depends: []string{"ip_set"}},
		{Name: "ip_set", Aliases: []string{"nfnetlink-subsys-6"}},
		{Name: "xt_statistic", Aliases: []string{"ipt_statistic"}},
		{Name: "dm_verity", Depends: []string{"dm_mod"}},
		{Name: "dm_mod", Aliases: []string{"devname:mapper/control"}},
	}
	var got []string
	for _, m := range earlyModules(all, []string{"erofs", "dm-verity"}) {
		got = append(got, m.Name)
	}
	want := []string{"virtio_net", "net_failover", "failover", "button", "crc32c_intel", "crc32c_generic", "libcrc32c", "erofs", "dm_verity", "dm_mod"}
	if !slices.Equal(got, want) {
		t.Errorf("early %v, want %v (devname:, ip_set: and plain aliases are no device)", got, want)
	}
}

// RootInInitramfs is the layout before root disks: /root.erofs in the
// initramfs, the bare filesystem in root.erofs, and a manifest with its
// path and no disk to find.
func TestBuildRootInInitramfs(t *testing.T) {
	kernel := fakeKernel(t)
	berth, _ := fakeBerth(t, "amd64")
	out := t.TempDir()
	res := build(t, kernel, berth, out, func(in *Inputs) { in.RootInInitramfs = true })
	rootData, _ := os.ReadFile(filepath.Join(out, "root.erofs"))
	sum := sha256.Sum256(rootData)
	if r := res.Manifest.Root; r.Path != RootImagePath || r.Serial != "" || r.Verity != "" || r.Size != int64(len(rootData)) || r.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("root %+v, root.erofs %d bytes", r, len(rootData))
	}
	files := readInitramfs(t, filepath.Join(out, "initramfs.img"))
	if !bytes.Equal(files[RootImagePath], rootData) {
		t.Errorf("%s in the initramfs differs from root.erofs", RootImagePath)
	}
	if !slices.ContainsFunc(res.Manifest.Files, func(f manifest.File) bool { return f.Path == RootImagePath }) {
		t.Errorf("manifest lacks %s", RootImagePath)
	}
}

func TestPreloadMustBeShipped(t *testing.T) {
	kernel := fakeKernel(t)
	s, err := spec.Parse([]byte("modules: [loop]\npreload: [loop, erofs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), Inputs{
		Spec: s, Berth: "/bin/true", KernelDir: kernel, RepoRoot: ".", Out: t.TempDir(),
	})
	if err == nil || !strings.Contains(err.Error(), "preload module erofs") {
		t.Fatalf("want an error naming preload module erofs, got %v", err)
	}
}

// With Disk set, the same build also writes a reproducible disk.raw whose
// UKI initramfs carries no /root.erofs (the root is the disk's partition)
// but a manifest naming the partition and the root hash; the manifest
// beside the image records the disk's digest and command line.
// testSign stands in for Authenticode (image/secureboot signs for real):
// a marker after the PE, which the disk's bytes then carry.
func testSign(pe []byte) ([]byte, error) { return append(pe, "SIGNED-BY-TEST"...), nil }

func TestBuildDisk(t *testing.T) {
	kernel := fakeKernel(t)
	berth, _ := fakeBerth(t, "amd64")
	s, err := spec.Parse([]byte(testSpec))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	var last *Result
	var lastDir string
	for range 2 {
		out := t.TempDir()
		res, err := Build(context.Background(), slog.New(slog.DiscardHandler), Inputs{
			Spec: rs, Berth: berth, BerthVersion: "v0.0.0-test", KernelDir: kernel, RepoRoot: ".", Out: out,
			Disk:     filepath.Join(out, "disk.raw"),
			DiskSign: testSign, DiskSigner: &manifest.DiskSigner{Subject: "CN=test db", CertSHA256: "ab12"},
		})
		if err != nil {
			t.Fatal(err)
		}
		img, err := os.ReadFile(filepath.Join(out, "disk.raw"))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(img)
		sums = append(sums, hex.EncodeToString(sum[:]))
		if bytes.Contains(img, []byte("root.erofs")) {
			t.Error("disk.raw contains the name root.erofs: the UKI's initramfs still carries the root image")
		}
		if !bytes.Contains(img, []byte(`"partition": "berth-root-a"`)) {
			t.Error("disk.raw's initramfs manifest does not name the berth-root-a partition")
		}
		if bytes.Contains(img, []byte(`"serial": "`)) {
			t.Error("disk.raw's initramfs manifest names a root disk serial: berth would look for a disk the image is not")
		}
		if _, err := os.Stat(filepath.Join(out, ".disk-initramfs.img")); err == nil {
			t.Error("the disk's temporary initramfs was left behind")
		}
		last, lastDir = res, out
	}
	if sums[0] != sums[1] {
		t.Errorf("two disk builds differ: %s %s", sums[0], sums[1])
	}
	m := last.Manifest
	if m.Disk == nil || m.Disk.SHA256 != sums[1] || m.Disk.Path != "disk.raw" {
		t.Fatalf("manifest disk %+v, want sha256 %s", m.Disk, sums[1])
	}
	if m.Disk.UKI != "EFI/Linux/berth-v0.0.0-test.efi" || m.Disk.Slot != "a" || m.Disk.SignedBy == nil || m.Disk.SignedBy.Subject != "CN=test db" ||
		m.Disk.EnrollKeys || !strings.Contains(m.Disk.Cmdline, " berth.verity=") || strings.Contains(m.Disk.Cmdline, "berth.slot=") {
		t.Errorf("manifest disk %+v (signed by %+v): want the UKI for v0.0.0-test, its root in slot a, signed, no keys to enroll, no slot on the command line", m.Disk, m.Disk.SignedBy)
	}
	if m.Root.RootHash == "" || m.Root.RootHash != last.Disk.RootHash {
		t.Errorf("manifest root hash %q, disk's %q", m.Root.RootHash, last.Disk.RootHash)
	}
	// One filesystem, one tree: the root disk's parameters are the disk
	// image's.
	if want := "berth.verity=" + m.Root.Verity; !strings.HasSuffix(m.Disk.Cmdline, want) {
		t.Errorf("disk cmdline %q, want it to end with the root disk's %s", m.Disk.Cmdline, want)
	}
	if want := "berth.verity=sha256:" + m.Root.RootHash + ":"; !strings.HasPrefix(m.Disk.Cmdline, DefaultDiskCmdline+" ") || !strings.Contains(m.Disk.Cmdline, want) {
		t.Errorf("disk cmdline %q, want %s... after %q", m.Disk.Cmdline, want, DefaultDiskCmdline)
	}
	// The spec's kernel arguments: in the manifest, and on the UKI's
	// command line after the console.
	if !slices.Equal(m.KernelArgs, []string{"cryptomgr.notests", "a.b=c"}) {
		t.Errorf("manifest kernelArgs %q", m.KernelArgs)
	}
	if want := DefaultDiskCmdline + " cryptomgr.notests a.b=c berth.verity="; !strings.HasPrefix(m.Disk.Cmdline, want) {
		t.Errorf("disk cmdline %q, want it to start %q", m.Disk.Cmdline, want)
	}
	mj, _ := os.ReadFile(filepath.Join(lastDir, "manifest.json"))
	back, err := manifest.Parse(mj)
	if err != nil || back.Disk == nil || back.Disk.SHA256 != sums[1] {
		t.Errorf("manifest.json disk entry %+v (%v)", back.Disk, err)
	}
	// The signed UKI beside the disk, for make update-repo: the ESP's,
	// as the manifest records it.
	efi, err := os.ReadFile(filepath.Join(lastDir, UKIFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(efi)
	if back.Disk.UKIFile != UKIFile || back.Disk.UKISize != int64(len(efi)) || back.Disk.UKISHA256 != hex.EncodeToString(sum[:]) || back.Disk.UKISHA256 != last.Disk.UKISHA256 {
		t.Errorf("manifest's UKI file %q %d bytes sha256 %s; %s is %d bytes", back.Disk.UKIFile, back.Disk.UKISize, back.Disk.UKISHA256, UKIFile, len(efi))
	}
	if !bytes.HasSuffix(efi, []byte("SIGNED-BY-TEST")) || !bytes.Contains(efi, []byte(m.Disk.Cmdline)) {
		t.Errorf("%s is not the signed UKI with the disk's command line", UKIFile)
	}
}

// TestBuildUpdateTrust: -update-root puts the trusted root.json in the
// root filesystem and the manifest (beside and in the initramfs) says where,
// with the default repository; bad inputs are refused by name.
func TestBuildUpdateTrust(t *testing.T) {
	kernel := fakeKernel(t)
	berth, _ := fakeBerth(t, "amd64")
	ks, err := repo.SetUpKeys(filepath.Join(t.TempDir(), "update"), false, repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rootPath := filepath.Join(t.TempDir(), "root.json")
	if err := os.WriteFile(rootPath, ks.TrustedRoot, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res := build(t, kernel, berth, out, func(in *Inputs) {
		in.UpdateRoot, in.UpdateRepository = rootPath, "https://updates.example.com/berth"
	})
	want := manifest.Update{TrustedRoot: manifest.TrustedRootPath, Repository: "https://updates.example.com/berth"}
	if u := res.Manifest.Update; u == nil || *u != want {
		t.Fatalf("manifest update %+v, want %+v", u, want)
	}
	sum := sha256.Sum256(ks.TrustedRoot)
	i := slices.IndexFunc(res.Manifest.Files, func(f manifest.File) bool { return f.Path == manifest.TrustedRootPath })
	if i < 0 || res.Manifest.Files[i].SHA256 != hex.EncodeToString(sum[:]) || res.Manifest.Files[i].Mode != "0444" {
		t.Fatalf("the image's files do not list %s as the trusted root, read-only", manifest.TrustedRootPath)
	}
	if erofs, _ := os.ReadFile(filepath.Join(out, "root.erofs")); !bytes.Contains(erofs, ks.TrustedRoot) {
		t.Error("root.erofs does not hold the trusted root")
	}
	ird := readInitramfs(t, filepath.Join(out, "initramfs.img"))
	if _, ok := ird[manifest.TrustedRootPath]; ok {
		t.Error("the trusted root is in the initramfs; it belongs in the verity-protected root")
	}
	inner, err := manifest.Parse(ird[manifest.DefaultPath])
	if err != nil || inner.Update == nil || *inner.Update != want {
		t.Errorf("the initramfs manifest's update %+v (%v)", inner.Update, err)
	}

	// Without -update-root the image carries no trust, and says so by
	// having no update entry.
	if res := build(t, kernel, berth, t.TempDir()); res.Manifest.Update != nil {
		t.Errorf("an image without a trusted root has update %+v", res.Manifest.Update)
	}

	notRoot := filepath.Join(t.TempDir(), "root.json")
	os.WriteFile(notRoot, []byte(`{"signed":{}}`), 0o644)
	for name, tc := range map[string]struct {
		root, url, want string
	}{
		"url without root": {"", "https://u.example.com", "no trusted root.json"},
		"missing root":     {filepath.Join(t.TempDir(), "none.json"), "", "none.json"},
		"not a root":       {notRoot, "", "not a TUF root.json"},
		"ftp url":          {rootPath, "ftp://u.example.com", "want an http:// or https:// URL"},
	} {
		_, err := tryBuild(t, kernel, berth, t.TempDir(), func(in *Inputs) { in.UpdateRoot, in.UpdateRepository = tc.root, tc.url })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, tc.want)
		}
	}
}

// A plugins directory ships every matching file at its own path with the
// libraries those files need (found by no walk from a binary), and a
// binary's links name it beside itself.
func TestLayerPluginsAndLinks(t *testing.T) {
	deps, err := elfdeps.Resolve(sysroot.Root{}, []string{"/bin/true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var libc string
	for _, d := range deps {
		if d.Name == "libc.so.6" {
			libc = d.Path
		}
	}
	if libc == "" {
		t.Fatalf("/bin/true needs no libc.so.6: %v", deps)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(libc)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"libxt_a.so": data, "libxt_b.so": data, "README": []byte("not a plugin")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// iptables ships some extensions as links to another (libxt_SNAT.so →
	// libxt_NAT.so): dlopen by either name must work in the image.
	if err := os.Symlink("libxt_a.so", filepath.Join(dir, "libxt_c.so")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(libc, filepath.Join(dir, "libxt_d.so")); err != nil {
		t.Fatal(err)
	}

	tree := fstree.New()
	l := spec.Layer{
		Binaries: []spec.Binary{{Name: "multi", Src: "/bin/true", Dst: "/usr/sbin/multi", Links: []string{"one", "two"}}},
		Plugins:  []spec.Plugins{{Dir: dir}},
	}
	m := &manifest.Manifest{Tools: map[string]string{}}
	if err := addLayer(context.Background(), tree, l, Inputs{RepoRoot: "."}, m); err != nil {
		t.Fatal(err)
	}
	byPath := map[string]manifest.File{}
	for _, f := range tree.Manifest() {
		byPath[f.Path] = f
	}
	for _, p := range []string{filepath.Join(dir, "libxt_a.so"), filepath.Join(dir, "libxt_b.so"), libc, "/lib64/ld-linux-x86-64.so.2"} {
		if f, ok := byPath[p]; !ok || f.Link != "" {
			t.Errorf("tree lacks file %s (%+v)", p, f)
		}
	}
	if _, ok := byPath[filepath.Join(dir, "README")]; ok {
		t.Error("tree has README, which is no *.so")
	}
	if l := byPath[filepath.Join(dir, "libxt_c.so")].Link; l != "libxt_a.so" {
		t.Errorf("libxt_c.so links to %q, want libxt_a.so", l)
	}
	if f, ok := byPath[filepath.Join(dir, "libxt_d.so")]; !ok || f.Link != "" {
		t.Errorf("libxt_d.so, a link out of the directory, is not shipped as the file: %+v", f)
	}
	for _, p := range []string{"/usr/sbin/one", "/usr/sbin/two"} {
		if l := byPath[p].Link; l != "multi" {
			t.Errorf("%s links to %q, want multi", p, l)
		}
	}

	// Only the plugins: their own dependencies are walked.
	tree = fstree.New()
	if err := addLayer(context.Background(), tree, spec.Layer{Plugins: []spec.Plugins{{Dir: dir, Glob: "libxt_b*"}}}, Inputs{RepoRoot: "."}, m); err != nil {
		t.Fatal(err)
	}
	if !tree.Has(filepath.Join(dir, "libxt_b.so")) || tree.Has(filepath.Join(dir, "libxt_a.so")) || !tree.Has("/lib64/ld-linux-x86-64.so.2") {
		t.Errorf("glob libxt_b*: tree %v", tree.Manifest())
	}
	// A matching link brings its target even when the glob does not.
	tree = fstree.New()
	if err := addLayer(context.Background(), tree, spec.Layer{Plugins: []spec.Plugins{{Dir: dir, Glob: "libxt_c*"}}}, Inputs{RepoRoot: "."}, m); err != nil {
		t.Fatal(err)
	}
	if !tree.Has(filepath.Join(dir, "libxt_c.so")) || !tree.Has(filepath.Join(dir, "libxt_a.so")) {
		t.Errorf("glob libxt_c*: tree %v", tree.Manifest())
	}

	for _, p := range []spec.Plugins{{Dir: filepath.Join(dir, "absent")}, {Dir: dir, Glob: "*.none"}} {
		if err := addLayer(context.Background(), fstree.New(), spec.Layer{Plugins: []spec.Plugins{p}}, Inputs{RepoRoot: "."}, m); err == nil || !strings.Contains(err.Error(), p.Dir) {
			t.Errorf("plugins %+v: got %v, want an error naming the directory", p, err)
		}
	}
}

// archSpec has no host binary: every file in it is the test's own, so it
// builds for either architecture.
const archSpec = `
modules: [nvme, loop, erofs]
preload: [loop, erofs]
root:
  dirs: [{path: /proc, mode: "0555"}]
  files: [{dst: /etc/hosts, content: "127.0.0.1 localhost\n", mode: "0644"}]
`

func buildArch(t *testing.T, specText, arch, kernel, berth string) (*Result, error) {
	t.Helper()
	s, err := spec.Parse([]byte(specText))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	return Build(context.Background(), slog.New(slog.DiscardHandler), Inputs{
		Spec: rs, Berth: berth, BerthVersion: "v0.0.0-test", KernelDir: kernel, RepoRoot: "../..", Out: t.TempDir(), Arch: arch,
	})
}

// An arm64 image is built from arm64 parts only: each amd64 part (a host
// binary, berth, a module, the kernel) is refused by name, and the manifest
// records the architecture.
func TestBuildArch(t *testing.T) {
	armKernel, amdKernel := fakeKernelFor(t, "arm64"), fakeKernelFor(t, "amd64")
	armBerth, _ := fakeBerth(t, "arm64")
	amdBerth, _ := fakeBerth(t, "amd64")

	res, err := buildArch(t, archSpec, "arm64", armKernel, armBerth)
	if err != nil {
		t.Fatalf("arm64 image of arm64 parts: %v", err)
	}
	if res.Manifest.Arch != "arm64" {
		t.Errorf("manifest arch %q, want arm64", res.Manifest.Arch)
	}

	// The kernel of one arch with the modules of the other.
	mixed := fakeKernelFor(t, "arm64")
	kotest.WriteKO(t, filepath.Join(mixed, "lib/modules", kver, "kernel/fs/erofs/erofs.ko"), "depends=", "alias=fs-erofs", "name=erofs")

	for name, tc := range map[string]struct {
		spec, arch, kernel, berth string
		errHas                    []string
	}{
		"host binary":  {testSpec, "arm64", armKernel, armBerth, []string{"root", "/usr/sbin/mkfs.ext4", "EM_X86_64", "EM_AARCH64"}},
		"amd64 berth":  {archSpec, "arm64", armKernel, amdBerth, []string{"/sbin/berth", "EM_X86_64"}},
		"arm64 berth":  {archSpec, "amd64", amdKernel, armBerth, []string{"/sbin/berth", "EM_AARCH64"}},
		"amd64 module": {archSpec, "arm64", mixed, armBerth, []string{"root", "erofs.ko", "EM_X86_64"}},
		"amd64 kernel": {archSpec, "arm64", amdKernel, armBerth, []string{"kernel", "vmlinuz", "arm64"}},
		"unknown arch": {archSpec, "riscv64", armKernel, armBerth, []string{"riscv64", "amd64, arm64"}},
	} {
		if name == "amd64 kernel" {
			// Modules of the right machine, so that only vmlinuz is wrong.
			tc.kernel = fakeKernelFor(t, "arm64")
			if err := os.WriteFile(filepath.Join(tc.kernel, "boot/vmlinuz-"+kver), []byte(fakeVmlinuz("amd64")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := buildArch(t, tc.spec, tc.arch, tc.kernel, tc.berth)
		if err == nil {
			t.Errorf("%s: Build = nil, want an error", name)
			continue
		}
		for _, s := range tc.errHas {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: Build = %q, want it to contain %q", name, err, s)
			}
		}
	}
}

// goBuild packages are built for the image's architecture.
func TestGoBuildArch(t *testing.T) {
	data, err := goBuild(context.Background(), "../..", "./qemu-tests/cmd/orphaner", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if err := elfarch.Check("orphaner", data, elf.EM_AARCH64); err != nil {
		t.Errorf("goBuild for arm64: %v", err)
	}
}

func TestCheckKernel(t *testing.T) {
	for _, tc := range []struct {
		data, arch string
		ok         bool
	}{
		{fakeVmlinuz("amd64"), "amd64", true},
		{fakeVmlinuz("arm64"), "arm64", true},
		{"MZ\x00\x00zimg" + strings.Repeat("\x00", 64), "arm64", true}, // EFI zboot
		{fakeVmlinuz("amd64"), "arm64", false},
		{fakeVmlinuz("arm64"), "amd64", false},
		{"", "arm64", false},
		{"HdrS", "amd64", false}, // too short for the header
	} {
		if err := checkKernel("vmlinuz", []byte(tc.data), tc.arch); (err == nil) != tc.ok {
			t.Errorf("checkKernel(%.8q..., %s) = %v, want ok %v", tc.data, tc.arch, err, tc.ok)
		}
	}
}

// The manifest names each image with its image ID, read from its tarball
// for the image's architecture; a tarball with no image for it fails the
// build, naming the image and the file.
func TestBuildRecordsImageIDs(t *testing.T) {
	kernel := fakeKernel(t)
	berth, _ := fakeBerth(t, "amd64")
	repo := t.TempDir()
	var buf bytes.Buffer
	res, err := oci.Write(&buf, oci.Image{Name: "localhost/demo:v1", Entrypoint: []string{"/demo"}, Files: []oci.File{{Path: "demo", Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "demo.tar"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "bad.tar"), []byte("not a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	withImage := func(src string) func(*Inputs) {
		return func(in *Inputs) {
			in.RepoRoot = repo
			in.Spec.Root.Images = []spec.Image{{Name: "localhost/demo:v1", Src: src, Dst: "/usr/share/berth/images/demo.tar"}}
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	build(t, kernel, berth, out, withImage("demo.tar"))
	mj, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(mj)
	if err != nil {
		t.Fatal(err)
	}
	want := []manifest.Image{{Name: "localhost/demo:v1", Path: "/usr/share/berth/images/demo.tar", ID: res.ConfigDigest}}
	if !slices.Equal(m.Images, want) {
		t.Errorf("manifest images %+v, want %+v", m.Images, want)
	}

	_, err = tryBuild(t, kernel, berth, filepath.Join(t.TempDir(), "bad"), withImage("bad.tar"))
	if err == nil || !strings.Contains(err.Error(), "image localhost/demo:v1 (bad.tar)") {
		t.Errorf("Build with a tarball that is not one: %v, want an error naming the image and its file", err)
	}
}
