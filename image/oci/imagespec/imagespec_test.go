package imagespec

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/image/spec"
)

// hostTrue is a dynamically linked program every build host has.
const hostTrue = "/bin/true"

const sample = `
name: registry.berth.test/berth/tool:${VERSION}
title: tool
version: ${VERSION}
entrypoint: [/usr/sbin/tool-alias]
env: [PATH=/usr/sbin]
root:
  dirs:
    - {path: /tmp, mode: "1777"}
  files:
    - {dst: /etc/motd, content: "hello\n", mode: "0644"}
  binaries:
    - {name: tool, src: "${SRC}", dst: /usr/sbin/tool, links: [tool-alias, tool-other]}
`

func parseSample(t *testing.T, src string) *Spec {
	t.Helper()
	s, err := Parse([]byte(sample), map[string]string{"VERSION": "v1", "SRC": src})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func byPath(img oci.Image) map[string]oci.File {
	m := map[string]oci.File{}
	for _, f := range img.Files {
		m[f.Path] = f
	}
	return m
}

func TestBuildResolvesLibrariesAndLinks(t *testing.T) {
	s := parseSample(t, hostTrue)
	img, err := Build(context.Background(), s, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != "registry.berth.test/berth/tool:v1" || img.Annotations[oci.AnnotationVersion] != "v1" || img.Annotations[oci.AnnotationTitle] != "tool" {
		t.Errorf("image %s, annotations %v", img.Name, img.Annotations)
	}
	files := byPath(img)
	if f := files["/usr/sbin/tool"]; len(f.Data) == 0 || f.Mode != 0o755 {
		t.Errorf("/usr/sbin/tool: %d bytes, mode %v", len(f.Data), f.Mode)
	}
	for _, ln := range []string{"/usr/sbin/tool-alias", "/usr/sbin/tool-other"} {
		if f := files[ln]; f.Symlink != "tool" {
			t.Errorf("%s = %+v, want a link to tool", ln, f)
		}
	}
	if f := files["/tmp"]; !f.Dir || f.Mode&os.ModeSticky == 0 {
		t.Errorf("/tmp = %+v, want a sticky directory", f)
	}
	// Every library the program needs, and its interpreter, came along.
	var libc, interp bool
	for p, f := range files {
		libc = libc || (strings.HasSuffix(p, "/libc.so.6") && len(f.Data) > 0)
		interp = interp || (strings.HasPrefix(filepath.Base(p), "ld-linux") && len(f.Data) > 0)
	}
	if !libc || !interp {
		t.Errorf("libc found %v, interpreter found %v; files: %v", libc, interp, keys(files))
	}
}

func keys(m map[string]oci.File) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// foreign writes a copy of /bin/true that claims another machine.
func foreign(t *testing.T, m elf.Machine) string {
	t.Helper()
	b, err := os.ReadFile(hostTrue)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(b[18:], uint16(m)) // e_machine
	p := filepath.Join(t.TempDir(), "foreign")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildRefusesWrongMachine(t *testing.T) {
	s := parseSample(t, foreign(t, elf.EM_AARCH64))
	_, err := Build(context.Background(), s, t.TempDir(), "")
	if err == nil || !strings.Contains(err.Error(), "/usr/sbin/tool") || !strings.Contains(err.Error(), "EM_AARCH64") {
		t.Fatalf("Build = %v, want an error naming the file and its machine", err)
	}
	// The same bytes are right for an arm64 image.
	if err := elfarch.Check("x", mustRead(t, foreign(t, elf.EM_AARCH64)), elf.EM_AARCH64); err != nil {
		t.Errorf("CheckELF of an arm64 file for arm64: %v", err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildChecksEntrypoint(t *testing.T) {
	for name, ep := range map[string]string{
		"absent":    "/usr/bin/nothing",
		"directory": "/usr/sbin",
		"not exec":  "/etc/motd",
	} {
		s := parseSample(t, hostTrue)
		s.Entrypoint = []string{ep}
		if _, err := Build(context.Background(), s, t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "entrypoint") {
			t.Errorf("%s: Build = %v, want an entrypoint error", name, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	vars := map[string]string{"VERSION": "v1", "SRC": hostTrue}
	for name, tc := range map[string]struct{ spec, errHas string }{
		"missing variable": {strings.ReplaceAll(sample, "${SRC}", "${NOPE}"), "NOPE"},
		"unknown field":    {sample + "extra: 1\n", "extra"},
		"no title":         {strings.Replace(sample, "title: tool\n", "", 1), "title"},
		"relative entry":   {strings.Replace(sample, "[/usr/sbin/tool-alias]", "[tool]", 1), "entrypoint"},
		"bad arch":         {sample + "architecture: s390\n", "architecture"},
		"layer rule":       {strings.Replace(sample, "dst: /etc/motd", "dst: etc/motd", 1), "root.files[0].dst"},
		"images":           {sample + "  images:\n    - {name: a, src: b, dst: /c}\n", "root.images"},
	} {
		if _, err := Parse([]byte(tc.spec), vars); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: Parse = %v, want an error containing %q", name, err, tc.errHas)
		}
	}
}

func TestParseExpands(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(sample, "env: [PATH=/usr/sbin]", "env: [PATH=/usr/sbin, PRICE=$$5]", 1)),
		map[string]string{"VERSION": "v2", "SRC": hostTrue})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "registry.berth.test/berth/tool:v2" || s.Root.Binaries[0].Src != hostTrue || s.Env[1] != "PRICE=$5" {
		t.Errorf("expanded spec: name %s, src %s, env %v", s.Name, s.Root.Binaries[0].Src, s.Env)
	}
}

// arm64Root is a sysroot of tiny aarch64 ELF files laid out as Debian's
// arm64 packages unpack (image/elfdeps/testdata/mkroot.sh).
const arm64Root = "../../elfdeps/testdata/arm64root"

// sysrootSpec is shaped like kube-proxy.yaml and busybox.yaml: a host
// program by name with links, the extensions it dlopens from a multiarch
// directory, a host file, and busybox.
const sysrootSpec = `
name: registry.berth.test/berth/tool:v1
title: tool
version: v1
entrypoint: [/bin/sh]
root:
  files:
    - {dst: /etc/protocols, src: /etc/protocols, mode: "0644"}
  binaries:
    - {name: mkfs.ext4, links: [mkfs.ext3]}
  plugins:
    - {dir: "/usr/lib/${MULTIARCH}/xtables"}
  busybox: {src: /bin/busybox, dst: /bin/busybox, applets: [sh]}
`

// An arm64 image built with a sysroot reads every absolute host path from
// it (the program by name, its loader and libraries, the aarch64 xtables
// extensions, /etc/protocols, busybox), and HostFiles names exactly those,
// in the target's terms, for make sysroot: not a build output of the
// repository, which need not exist then.
func TestBuildSysroot(t *testing.T) {
	repo := t.TempDir()
	s, err := Parse([]byte(sysrootSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Architecture = "arm64"
	img, err := Build(context.Background(), s, repo, arm64Root)
	if err != nil {
		t.Fatal(err)
	}
	if img.Architecture != "arm64" {
		t.Errorf("image architecture %s, want arm64", img.Architecture)
	}
	files := byPath(img)
	for p, src := range map[string]string{
		"/usr/sbin/mkfs.ext4":                           "sbin/mke2fs",
		"/lib/ld-linux-aarch64.so.1":                    "lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
		"/lib/aarch64-linux-gnu/libfoo.so.1":            "lib/aarch64-linux-gnu/libfoo.so.1.2.3",
		"/usr/lib/aarch64-linux-gnu/xtables/libxt_a.so": "usr/lib/aarch64-linux-gnu/xtables/libxt_a.so",
		"/etc/protocols":                                "etc/protocols",
		"/bin/busybox":                                  "bin/busybox",
	} {
		if f, ok := files[p]; !ok || f.Symlink != "" || !bytes.Equal(f.Data, mustRead(t, filepath.Join(arm64Root, src))) {
			t.Errorf("%s: %+v, want the sysroot's %s", p, f, src)
		}
	}
	if f := files["/usr/sbin/mkfs.ext3"]; f.Symlink != "mkfs.ext4" {
		t.Errorf("/usr/sbin/mkfs.ext3 = %+v, want a link to mkfs.ext4", f)
	}

	withOutput := *s
	withOutput.Root.Binaries = append(slices.Clone(s.Root.Binaries),
		spec.Binary{Name: "kube-proxy", Src: filepath.Join(repo, "build/none/kube-proxy")})
	got, err := HostFiles(context.Background(), &withOutput, repo, arm64Root)
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

	// From the builder's own / the same spec finds amd64 files, which an
	// arm64 image refuses.
	s.Root.Plugins = nil
	if _, err := Build(context.Background(), s, repo, ""); err == nil || !strings.Contains(err.Error(), "EM_X86_64") {
		t.Errorf("arm64 image from the builder's /: %v, want the host's amd64 files refused", err)
	}
}

// An image with no entrypoint starts its cmd, as upstream's busybox
// (["sh"]) and nonewprivs (["nnp"]) do: a bare name is found along the
// spec's PATH, as the runtime finds it, and must be there; the user goes
// into the config.
func TestBuildCmdOnly(t *testing.T) {
	s := parseSample(t, hostTrue)
	s.Entrypoint, s.Cmd, s.User = nil, []string{"tool-other", "-v"}, "1234"
	img, err := Build(context.Background(), s, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if img.User != "1234" || len(img.Entrypoint) != 0 || !slices.Equal(img.Cmd, []string{"tool-other", "-v"}) {
		t.Errorf("image user %q, entrypoint %q, cmd %q", img.User, img.Entrypoint, img.Cmd)
	}
	for name, tc := range map[string]struct {
		cmd    []string
		env    []string
		errHas string
	}{
		"not on PATH":  {[]string{"nothing"}, []string{"PATH=/bin:/usr/sbin"}, "nothing is in no directory of PATH /bin:/usr/sbin"},
		"no PATH":      {[]string{"tool"}, nil, "needs PATH"},
		"absolute bad": {[]string{"/bin/nothing"}, []string{"PATH=/usr/sbin"}, "/bin/nothing is not in the image"},
	} {
		s := parseSample(t, hostTrue)
		s.Entrypoint, s.Cmd, s.Env = nil, tc.cmd, tc.env
		if _, err := Build(context.Background(), s, t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: Build = %v, want an error containing %q", name, err, tc.errHas)
		}
	}
}

func TestParseRejectsNoProgram(t *testing.T) {
	vars := map[string]string{"VERSION": "v1", "SRC": hostTrue}
	for name, tc := range map[string]struct{ spec, errHas string }{
		"neither":   {strings.Replace(sample, "entrypoint: [/usr/sbin/tool-alias]\n", "", 1), "entrypoint and cmd are empty"},
		"empty cmd": {strings.Replace(sample, "entrypoint: [/usr/sbin/tool-alias]\n", "cmd: [\"\"]\n", 1), "want a program first"},
		"command beside entrypoint": {strings.Replace(sample, "entrypoint: [/usr/sbin/tool-alias]\n", "entrypoint: [/usr/sbin/tool-alias]\ncommand: [/usr/sbin/tool]\n", 1),
			"command is only for an image that names no program"},
		"relative command": {strings.Replace(sample, "entrypoint: [/usr/sbin/tool-alias]\n", "command: [tool]\n", 1), "want an absolute program path first"},
	} {
		if _, err := Parse([]byte(tc.spec), vars); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: Parse = %v, want an error containing %q", name, err, tc.errHas)
		}
	}
}

// An image that names no program (etcd's, whose pods give their command)
// has an empty config and is still checked for the program its pods run.
func TestBuildCommandOnly(t *testing.T) {
	vars := map[string]string{"VERSION": "v1", "SRC": hostTrue}
	ok := strings.Replace(sample, "entrypoint: [/usr/sbin/tool-alias]\n", "command: [/usr/sbin/tool, --flag]\n", 1)
	s, err := Parse([]byte(ok), vars)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(context.Background(), s, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if img.Entrypoint != nil || img.Cmd != nil {
		t.Errorf("entrypoint %q cmd %q, want none: command is not written into the image", img.Entrypoint, img.Cmd)
	}
	missing, err := Parse([]byte(strings.Replace(sample, "entrypoint: [/usr/sbin/tool-alias]\n", "command: [/usr/sbin/absent]\n", 1)), vars)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), missing, t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "/usr/sbin/absent") {
		t.Errorf("Build with a command the image lacks = %v, want an error naming /usr/sbin/absent", err)
	}
}
