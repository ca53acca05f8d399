package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest"
)

// ImageDir is the image the tests boot: $BERTH_IMAGE, or build/image-test at
// the repository root (found by walking up to go.mod). A missing image fails
// the test: `make test-qemu` builds it first.
func ImageDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("BERTH_IMAGE")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "build", "image-test")
				break
			}
			if filepath.Dir(d) == d {
				t.Fatalf("qemu: no go.mod above %s; set BERTH_IMAGE", wd)
			}
		}
	}
	for _, f := range []string{"vmlinuz", "initramfs.img", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("qemu: image incomplete: %v (run make image-test)", err)
		}
	}
	return dir
}

// ImageConfig returns a Config booting the image in dir on its manifest's
// architecture with the defaults (1 GiB, 2 vCPUs, quiet) and the given extra kernel arguments. IMDS is off
// (berth.imds=off) unless appendArgs names one: QEMU has no IMDS at
// 169.254.169.254, and a node that needs one waits for it until its deadline.
func ImageConfig(dir, appendArgs string) Config {
	if !strings.Contains(appendArgs, "berth.imds=") {
		appendArgs = strings.TrimSpace("berth.imds=off " + appendArgs)
	}
	// quiet: the kernel's own boot lines cost serial time under TCG and
	// are not what the tests read (berth keeps its kmsg copies off the
	// console at any level; TestFaultIMDS/token-403 boots without quiet).
	if !strings.Contains(appendArgs, "quiet") && !strings.Contains(appendArgs, "loglevel=") {
		appendArgs = "quiet " + appendArgs
	}
	m, _ := manifest.Load(filepath.Join(dir, "manifest.json"))
	appendArgs = WithImageArgs(appendArgs, m)
	return Config{
		Kernel:   filepath.Join(dir, "vmlinuz"),
		Initrd:   filepath.Join(dir, "initramfs.img"),
		Append:   appendArgs,
		Arch:     imageArch(m),
		RootDisk: rootDisk(dir, m),
	}
}

// imageArch is the architecture in the manifest of the image in dir, which
// picks the QEMU binary and machine. An unreadable manifest leaves it empty
// (amd64): ImageDir has already refused an image without one, and Boot of
// the wrong machine fails loudly at the first console line.
func imageArch(m *manifest.Manifest) string {
	if m == nil {
		return ""
	}
	return m.Arch
}

// rootDisk is the image's root disk, root.erofs beside the kernel, when
// its manifest names one (an image with its root in the initramfs has
// none). A missing root.erofs then fails Boot, naming the file.
func rootDisk(dir string, m *manifest.Manifest) *Disk {
	if m == nil || m.Root == nil || m.Root.Serial == "" || m.Root.Path != "" {
		return nil
	}
	return &Disk{Path: filepath.Join(dir, "root.erofs"), Interface: "virtio", Serial: m.Root.Serial}
}

// ImageManifest loads the manifest of the image in dir.
func ImageManifest(t testing.TB, dir string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("qemu: %v", err)
	}
	return m
}

// WithImageArgs puts the image's own kernel arguments (the manifest's
// kernelArgs, what its disk's UKI carries) before cmdline, leaving out any
// whose key cmdline sets already, so a boot boots the image as shipped and
// a test can still override a word.
func WithImageArgs(cmdline string, m *manifest.Manifest) string {
	if m == nil {
		return cmdline
	}
	have := map[string]bool{}
	for _, w := range strings.Fields(cmdline) {
		have[argKey(w)] = true
	}
	var words []string
	for _, a := range m.KernelArgs {
		if !have[argKey(a)] {
			words = append(words, a)
		}
	}
	return strings.TrimSpace(strings.Join(words, " ") + " " + cmdline)
}

// argKey is a command-line word's key: what comes before '='.
func argKey(w string) string {
	k, _, _ := strings.Cut(w, "=")
	return k
}
