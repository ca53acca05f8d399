package qemutests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/image/disk"
	"github.com/berth-node/berth/image/disk/esp"
	"github.com/berth-node/berth/image/secureboot"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// testKeysDir is the committed test key set: fixed, so that a variable
// store it was enrolled in can be kept between tests and runs
// (enrolledVars). Never a key for anything but tests.
const testKeysDir = "../image/secureboot/testdata/testkeys"

// testKeys loads the test key set.
func testKeys(t testing.TB) *secureboot.Keys {
	t.Helper()
	k, err := secureboot.LoadKeys(context.Background(), slog.New(slog.DiscardHandler), testKeysDir)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signer signs as make disk does, with k's db key.
func signer(k *secureboot.Keys) func([]byte) ([]byte, error) {
	return func(pe []byte) ([]byte, error) { return secureboot.SignPE(pe, k.DB.Signer, k.DB.Cert) }
}

// enrollFiles are k's signed variables, for the ESP's loader/keys/auto/.
func enrollFiles(k *secureboot.Keys) []esp.File {
	var fs []esp.File
	for _, n := range secureboot.AuthFiles() {
		fs = append(fs, esp.File{Path: n, Src: k.Path(n)})
	}
	return fs
}

// enrollTimeout bounds the enrollment boot: firmware, systemd-boot's
// enrollment and its reset take about 10 s under TCG on amd64.
const enrollTimeout = 3 * time.Minute

// reEnrolling is systemd-boot's line as it enrolls the ESP's keys.
var reEnrolling = regexp.MustCompile(`Enrolling secure boot keys from directory: .*loader.keys.auto`)

// enrolledVars returns a UEFI variable store, for arch's Secure Boot
// firmware, with the test keys enrolled: Secure Boot on, in user mode,
// as an EC2 instance registered with the keys' uefi-data is. The first
// call boots img (a disk signed with the test keys and carrying them for
// enrollment) on the firmware's empty store, where systemd-boot enrolls
// the keys and resets the machine, and keeps the store beside the image
// (build/qemu-vars/), named for the firmware and the keys, so later tests
// and runs start from it. A fresh clone (CI) has none, so every CI run
// goes through the enrollment.
func enrolledVars(t *testing.T, arch, img string) string {
	t.Helper()
	code, vars, err := qemu.SecureFirmware(arch)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	k := testKeys(t)
	for _, f := range append([]string{code, vars}, k.Path(secureboot.FilePKAuth), k.Path(secureboot.FileKEKAuth), k.Path(secureboot.FileDBAuth)) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	dir := filepath.Join(filepath.Dir(qemu.ImageDir(t)), "qemu-vars")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "enrolled-"+hex.EncodeToString(h.Sum(nil))[:16]+".fd")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	start := time.Now()
	vm := qemu.Start(t, qemu.Config{Name: "enroll", Arch: arch, UEFI: true, SecureBoot: true, Timeout: enrollTimeout,
		Disks: []qemu.Disk{{Path: img, Interface: "nvme", Serial: "berth-root-disk"}}})
	if _, err := vm.Expect(reEnrolling, enrollTimeout); err != nil {
		t.Fatalf("systemd-boot did not enroll the ESP's keys on a store in setup mode: %v", err)
	}
	// systemd-boot resets once the keys are in; QEMU runs with -no-reboot.
	if err := vm.WaitExit(enrollTimeout); err != nil {
		t.Fatalf("no reset after the enrollment: %v", err)
	}
	tmp := out + fmt.Sprintf(".%d.tmp", os.Getpid())
	if err := vm.SaveVars(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	figure(t, "Secure Boot: enrolling the test keys through systemd-boot took %.1f s (QEMU start to reset)", time.Since(start).Seconds())
	return out
}

// espFile reads path from the ESP of disk image img.
func espFile(t *testing.T, img string, l partition.DiskLayout, path string) []byte {
	t.Helper()
	p, _, _ := l.Find(partition.NameESP)
	b, err := exec.Command("mtype", "-i", fmt.Sprintf("%s@@%d", img, p.Offset()), "::/"+path).Output()
	if err != nil {
		t.Fatalf("reading %s from the ESP of %s: %v", path, img, err)
	}
	return b
}

// withUKI copies img to a new disk whose UKI is uki instead: what someone
// who can write the ESP (or the AMI's snapshot) can do.
func withUKI(t *testing.T, img string, res disk.Result, uki []byte) string {
	t.Helper()
	out := copyDisk(t, img, res.Layout.Size())
	src := filepath.Join(t.TempDir(), "uki.efi")
	if err := os.WriteFile(src, uki, 0o644); err != nil {
		t.Fatal(err)
	}
	p, _, _ := res.Layout.Find(partition.NameESP)
	cmd := exec.Command("mcopy", "-o", "-i", fmt.Sprintf("%s@@%d", out, p.Offset()), src, "::/"+res.UKI)
	cmd.Env = append(os.Environ(), "MTOOLSRC=/dev/null", "MTOOLS_SKIP_CHECK=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replacing the UKI on the ESP: %v\n%s", err, b)
	}
	if got := espFile(t, out, res.Layout, res.UKI); !bytes.Equal(got, uki) {
		t.Fatal("the UKI on the ESP is not the one put there")
	}
	return out
}

// reRefused is systemd-boot's line when the firmware refuses to load a
// UKI (LoadImage's EFI_SECURITY_VIOLATION or EFI_ACCESS_DENIED).
var reRefused = regexp.MustCompile(`Error loading .*berth-.*\.efi: (Security Violation|Access Denied)`)

// TestSecureBoot boots UKIs that must not run under Secure Boot, each on
// the disk signed with the enrolled test keys, systemd-boot signed as
// well, so the firmware starts systemd-boot and it is the UKI that is
// refused: one whose command line names another root hash (one byte of
// .cmdline changed after signing: what an attacker who can write the ESP
// would do to boot a root of their own), one not signed at all, and one
// signed with another key. Each must be refused by the firmware's
// verdict, seen on the console, and berth must never start. (The signed
// disk booting and joining with Secure Boot on is TestDiskBoot's and
// TestHostContract/disk's: every disk boot of the suite is a Secure Boot
// boot.)
func TestSecureBoot(t *testing.T) {
	dir := qemu.ImageDir(t)
	arch := qemu.ImageManifest(t, dir).Arch
	img, res := testDisk(t, dir)
	uki := espFile(t, img, res.Layout, res.UKI)

	refused := func(t *testing.T, bad []byte) {
		t.Helper()
		cfg := uefiConfig(t, withUKI(t, img, res, bad))
		cfg.Timeout = 3 * time.Minute
		vm := qemu.Start(t, cfg)
		start := time.Now()
		l, err := vm.ExpectLine(reRefused, 2*time.Minute)
		if err != nil {
			t.Fatalf("no refusal on the console: %v", err)
		}
		t.Logf("refused: %s", strings.TrimSpace(l.Text))
		figure(t, "Secure Boot refusal of a bad UKI: %.1f s from QEMU's start", time.Since(start).Seconds())
		for _, l := range vm.Lines() {
			if berthLine.MatchString(l.Text) || strings.Contains(l.Text, "Linux version") {
				t.Errorf("the kernel or berth ran from a refused UKI: %s", l.Text)
			}
		}
	}

	t.Run("tampered command line", func(t *testing.T) {
		// Another root hash: one hex digit of berth.verity= changed.
		i := bytes.Index(uki, []byte("berth.verity=sha256:"))
		if i < 0 {
			t.Fatal("the UKI has no berth.verity= in its command line")
		}
		bad := bytes.Clone(uki)
		d := i + len("berth.verity=sha256:")
		bad[d] = "01"[btoi(bad[d] == '0')]
		if bad[d] == uki[d] {
			t.Fatalf("the tampered UKI's root hash digit is still %q", uki[d])
		}
		refused(t, bad)
	})
	if arch == "arm64" {
		// arm64 proves the firmware enforces at all; the other cases
		// test the same verdict again.
		return
	}
	t.Run("unsigned", func(t *testing.T) {
		plain, pres := testDiskKeys(t, dir, diskCmdline, nil)
		refused(t, espFile(t, plain, pres.Layout, pres.UKI))
	})
	t.Run("another key", func(t *testing.T) {
		other, err := secureboot.Generate(secureboot.GenerateOptions{CommonNamePrefix: "not berth's"})
		if err != nil {
			t.Fatal(err)
		}
		// On disk, as make keys leaves a set: the disk carries its .auth files.
		if err := other.Write(slog.New(slog.DiscardHandler), filepath.Join(t.TempDir(), "keys"), false); err != nil {
			t.Fatal(err)
		}
		fimg, fres := testDiskKeys(t, dir, diskCmdline, other)
		foreign := espFile(t, fimg, fres.Layout, fres.UKI)
		if err := secureboot.VerifyPE(foreign, other.DB.Cert); err != nil {
			t.Fatalf("the foreign UKI is not validly signed by its own key: %v", err)
		}
		refused(t, foreign)
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
