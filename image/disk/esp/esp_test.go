package esp

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func build(t *testing.T, dir, name string, files []File) []byte {
	t.Helper()
	out := filepath.Join(dir, name)
	err := Build(context.Background(), slog.New(slog.DiscardHandler), out, Options{Size: 64 << 20, VolumeID: 0x1234abcd}, files)
	if err != nil {
		t.Fatalf("%v (CI needs Debian's dosfstools and mtools)", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuild: the image holds the files at their paths with their contents
// and the volume ID asked for, and two builds more than FAT's 2-second
// time resolution apart, from sources with different mtimes, are
// byte-identical.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "uki.efi")
	payload := bytes.Repeat([]byte("berth uki "), 100000)
	if err := os.WriteFile(src, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	// systemd-boot's layout: long, mixed-case names (VFAT long-name
	// entries and their short aliases must come out the same each time).
	files := []File{{Path: BootPath, Src: src}, {Path: "BERTH.TXT", Src: src},
		{Path: "EFI/Linux/berth-v1.2-3-gabcdef.efi", Src: src}, {Path: "EFI/Linux/berth-v1.2-4-g012345+3.efi", Src: src},
		{Path: "loader/loader.conf", Src: src}}
	a := build(t, dir, "a.img", files)
	time.Sleep(2100 * time.Millisecond)
	if err := os.Chtimes(src, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	b := build(t, dir, "b.img", []File{files[4], files[1], files[3], files[0], files[2]})
	if len(a) != 64<<20 {
		t.Fatalf("image is %d bytes", len(a))
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of the same ESP differ")
	}
	img := filepath.Join(dir, "a.img")
	got, err := exec.Command("mtype", "-i", img, "::/"+BootPath).Output()
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("reading %s back: %v (%d bytes, want %d)", BootPath, err, len(got), len(payload))
	}
	for _, f := range files[2:] {
		got, err := exec.Command("mtype", "-i", img, "::/"+f.Path).Output()
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("reading %s back: %v (%d bytes, want %d)", f.Path, err, len(got), len(payload))
		}
	}
	names, err := exec.Command("mdir", "-b", "-i", img, "::/EFI/Linux").CombinedOutput()
	if err != nil || !strings.Contains(string(names), "berth-v1.2-4-g012345+3.efi") {
		t.Fatalf("mdir -b ::/EFI/Linux: %v\n%s; want the long name kept, case and '+' included", err, names)
	}
	ls, err := exec.Command("mdir", "-i", img, "::/EFI/BOOT").CombinedOutput()
	if err != nil || !strings.Contains(string(ls), "Serial Number is 1234-ABCD") || !strings.Contains(string(ls), "1980-01-01") {
		t.Fatalf("mdir: %v\n%s", err, ls)
	}
	if _, err := os.Stat(img + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("temporary image left behind")
	}
}

func TestBuildRejects(t *testing.T) {
	ctx, log := context.Background(), slog.New(slog.DiscardHandler)
	out := filepath.Join(t.TempDir(), "x.img")
	for name, c := range map[string]struct {
		o     Options
		files []File
	}{
		"size not MiB":   {Options{Size: 1<<20 + 1}, nil},
		"long label":     {Options{Size: 1 << 20, Label: "ABCDEFGHIJKL"}, nil},
		"early epoch":    {Options{Size: 1 << 20, Epoch: 1}, nil},
		"too long":       {Options{Size: 1 << 20}, []File{{Path: "EFI/Linux/" + strings.Repeat("x", 101), Src: "x"}}},
		"space":          {Options{Size: 1 << 20}, []File{{Path: "EFI/Linux/a b.efi", Src: "x"}}},
		"dot file":       {Options{Size: 1 << 20}, []File{{Path: "EFI/.hidden", Src: "x"}}},
		"case twice":     {Options{Size: 1 << 20}, []File{{Path: "loader/x", Src: "x"}, {Path: "LOADER/X", Src: "y"}}},
		"absolute":       {Options{Size: 1 << 20}, []File{{Path: "/EFI/X", Src: "x"}}},
		"dot-dot":        {Options{Size: 1 << 20}, []File{{Path: "../X", Src: "x"}}},
		"twice":          {Options{Size: 1 << 20}, []File{{Path: "X", Src: "x"}, {Path: "X", Src: "y"}}},
		"missing source": {Options{Size: 1 << 20}, []File{{Path: "X"}}},
	} {
		if err := Build(ctx, log, out, c.o, c.files); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPlanDirs(t *testing.T) {
	dirs, err := plan([]File{{Path: BootPath, Src: "a"}, {Path: "EFI/Linux/a.efi", Src: "b"}, {Path: "X", Src: "c"}, {Path: "efi/linux/b.efi", Src: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dirs, ",") != "EFI,EFI/BOOT,EFI/Linux" {
		t.Fatalf("dirs %v", dirs)
	}
}

func TestBootPathFor(t *testing.T) {
	for arch, want := range map[string]string{"": BootPath, "amd64": "EFI/BOOT/BOOTX64.EFI", "arm64": "EFI/BOOT/BOOTAA64.EFI"} {
		if got, ok := BootPathFor(arch); !ok || got != want {
			t.Errorf("BootPathFor(%q) = %q, %v; want %q", arch, got, ok, want)
		}
	}
	if _, ok := BootPathFor("riscv64"); ok {
		t.Error("BootPathFor(riscv64) is known")
	}
}
