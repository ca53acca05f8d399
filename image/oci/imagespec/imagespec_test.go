package imagespec

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/oci"
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
	img, err := Build(context.Background(), s, t.TempDir())
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
	_, err := Build(context.Background(), s, t.TempDir())
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
		if _, err := Build(context.Background(), s, t.TempDir()); err == nil || !strings.Contains(err.Error(), "entrypoint") {
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
