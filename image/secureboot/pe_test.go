package secureboot

import (
	"bytes"
	"context"
	"crypto"
	"debug/pe"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foxboron/go-uefi/authenticode"
)

// systemdBoot is Debian's unsigned systemd-boot (package systemd-boot-efi,
// which make deps installs): a real PE image built by another toolchain.
const systemdBoot = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testKeys(t testing.TB) *Keys {
	t.Helper()
	k, err := LoadKeys(context.Background(), discard(), filepath.Join("testdata", "testkeys"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// need returns a host file or tool the test cross-checks with. Missing, it
// skips the test on a developer's machine and fails it in CI, where make
// deps installs it.
func need(t testing.TB, path string) string {
	t.Helper()
	p := path
	if !filepath.IsAbs(path) {
		var err error
		if p, err = exec.LookPath(path); err != nil {
			p = ""
		}
	} else if _, err := os.Stat(path); err != nil {
		p = ""
	}
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (make deps installs it)", path)
		}
		t.Skipf("%s is missing (make deps installs it)", path)
	}
	return p
}

func readSystemdBoot(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(need(t, systemdBoot))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sbverify(t *testing.T, cert, image string) error {
	t.Helper()
	out, err := exec.Command(need(t, "sbverify"), "--cert", cert, image).CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)))
	}
	return nil
}

func TestSignPESystemdBoot(t *testing.T) {
	k := testKeys(t)
	in := readSystemdBoot(t)
	orig := bytes.Clone(in)
	signed, err := SignPE(in, k.DB.Signer, k.DB.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, orig) {
		t.Fatal("SignPE changed its input")
	}
	if err := VerifyPE(signed, k.DB.Cert); err != nil {
		t.Fatalf("VerifyPE: %v", err)
	}
	// A real verifier agrees.
	p := writeTemp(t, "signed.efi", signed)
	if err := sbverify(t, k.Path(FileDBCert), p); err != nil {
		t.Fatalf("sbverify --cert db.crt: %v", err)
	}

	// Still the same PE: same headers fields and section contents.
	f0, err := pe.NewFile(bytes.NewReader(orig))
	if err != nil {
		t.Fatal(err)
	}
	f1, err := pe.NewFile(bytes.NewReader(signed))
	if err != nil {
		t.Fatalf("signed image is no PE: %v", err)
	}
	if len(f0.Sections) != len(f1.Sections) || f0.FileHeader != f1.FileHeader {
		t.Fatal("signing changed the COFF header or the sections")
	}
	for i, s := range f0.Sections {
		a, _ := s.Data()
		b, _ := f1.Sections[i].Data()
		if s.SectionHeader != f1.Sections[i].SectionHeader || !bytes.Equal(a, b) {
			t.Fatalf("section %s changed", s.Name)
		}
	}
	oh0, oh1 := *f0.OptionalHeader.(*pe.OptionalHeader64), *f1.OptionalHeader.(*pe.OptionalHeader64)
	if dd := oh1.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY]; int(dd.VirtualAddress)+int(dd.Size) != len(signed) || dd.VirtualAddress%8 != 0 {
		t.Fatalf("certificate table %+v in %d bytes", dd, len(signed))
	}
	oh0.CheckSum, oh1.CheckSum = 0, 0
	oh1.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY] = oh0.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY]
	if oh0 != oh1 {
		t.Fatal("signing changed the optional header beyond the checksum and the certificate table")
	}
	// go-uefi's Authenticode hash of the signed image is ours too, and it
	// finds our signature valid.
	bin, err := authenticode.Parse(bytes.NewReader(signed))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := parsePE(signed)
	ours, _ := authenticodeDigest(signed, l)
	if !bytes.Equal(bin.Hash(crypto.SHA256), ours) {
		t.Fatal("go-uefi's Authenticode hash differs from ours")
	}
	if ok, err := bin.Verify(k.DB.Cert); !ok || err != nil {
		t.Fatalf("go-uefi does not verify the signature: %v %v", ok, err)
	}
}

func TestSignPEDeterministic(t *testing.T) {
	k := testKeys(t)
	in := readSystemdBoot(t)
	a, err := SignPE(in, k.DB.Signer, k.DB.Cert)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SignPE(bytes.Clone(in), k.DB.Signer, k.DB.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two signatures of one image differ")
	}
}

func TestVerifyPERefuses(t *testing.T) {
	k := testKeys(t)
	in := readSystemdBoot(t)
	signed, err := SignPE(in, k.DB.Signer, k.DB.Cert)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := pe.NewFile(bytes.NewReader(signed))
	text := f.Section(".text")
	if text == nil {
		t.Fatal("no .text")
	}

	t.Run("one changed byte", func(t *testing.T) {
		bad := bytes.Clone(signed)
		bad[text.Offset+100] ^= 0x01
		err := VerifyPE(bad, k.DB.Cert)
		if err == nil || !strings.Contains(err.Error(), "image changed after signing") {
			t.Fatalf("VerifyPE of a changed image: %v", err)
		}
		if err := sbverify(t, k.Path(FileDBCert), writeTemp(t, "bad.efi", bad)); err == nil {
			t.Fatal("sbverify took the changed image")
		}
	})
	t.Run("changed byte after the sections", func(t *testing.T) {
		// A UKI's sections are all hashed, but so is anything between the
		// last one and the certificate table.
		bad := bytes.Clone(signed)
		last := f.Sections[len(f.Sections)-1]
		bad[last.Offset+last.Size-1] ^= 0x80
		if err := VerifyPE(bad, k.DB.Cert); err == nil {
			t.Fatal("VerifyPE took it")
		}
	})
	t.Run("another key", func(t *testing.T) {
		other, err := SignPE(in, k.KEK.Signer, k.KEK.Cert)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyPE(other, k.KEK.Cert); err != nil {
			t.Fatalf("the other key's own cert: %v", err)
		}
		err = VerifyPE(other, k.DB.Cert)
		if !errors.Is(err, ErrNotSignedByCert) {
			t.Fatalf("VerifyPE against db.crt of an image the KEK signed: %v", err)
		}
		if err := sbverify(t, k.Path(FileDBCert), writeTemp(t, "other.efi", other)); err == nil {
			t.Fatal("sbverify --cert db.crt took an image signed by KEK")
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		if err := VerifyPE(in, k.DB.Cert); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("VerifyPE of an unsigned image: %v", err)
		}
	})
	t.Run("signed content swapped", func(t *testing.T) {
		// Another image, carrying this image's signature with the image
		// hash inside it replaced by the other image's: the hash matches,
		// the RSA signature over the attributes is intact, only the
		// messageDigest attribute no longer matches the content. (go-uefi's
		// own Verify does not check that.)
		otherImage := append(bytes.Clone(in), make([]byte, 64)...)
		other, err := SignPE(otherImage, k.DB.Signer, k.DB.Cert)
		if err != nil {
			t.Fatal(err)
		}
		lo, _ := parsePE(other)
		ls, _ := parsePE(signed)
		if lo.certSize != ls.certSize {
			t.Fatalf("certificate tables of %d and %d bytes", lo.certSize, ls.certSize)
		}
		bad := bytes.Clone(other)
		copy(bad[lo.certVA:], signed[ls.certVA:])
		at := lo.certVA + findSpc(t, bad[lo.certVA:])
		copy(bad[at:at+32], other[lo.certVA+findSpc(t, other[lo.certVA:]):])
		err = VerifyPE(bad, k.DB.Cert)
		if err == nil || !strings.Contains(err.Error(), "messageDigest") {
			t.Fatalf("VerifyPE of a signature whose content was swapped: %v", err)
		}
	})
	t.Run("already signed", func(t *testing.T) {
		if _, err := SignPE(signed, k.DB.Signer, k.DB.Cert); !errors.Is(err, ErrAlreadySigned) {
			t.Fatalf("SignPE of a signed image: %v", err)
		}
	})
	t.Run("not a PE", func(t *testing.T) {
		for _, b := range [][]byte{nil, []byte("MZ"), bytes.Repeat([]byte{0}, 4096), signed[:1000]} {
			if _, err := SignPE(b, k.DB.Signer, k.DB.Cert); err == nil {
				t.Errorf("SignPE took %d bytes", len(b))
			}
			if err := VerifyPE(b, k.DB.Cert); err == nil {
				t.Errorf("VerifyPE took %d bytes", len(b))
			}
		}
	})
	t.Run("key and cert disagree", func(t *testing.T) {
		if _, err := SignPE(in, k.KEK.Signer, k.DB.Cert); err == nil || !strings.Contains(err.Error(), "does not match") {
			t.Fatalf("SignPE with the KEK key and db cert: %v", err)
		}
	})
}

// findSpc finds the 32-byte SHA-256 image hash inside a certificate
// table's SpcIndirectDataContent (after the digest's OCTET STRING header).
func findSpc(t *testing.T, table []byte) int {
	t.Helper()
	// DigestInfo: SEQUENCE { AlgorithmIdentifier sha256, NULL }, OCTET STRING 32
	marker := []byte{0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20}
	// The first occurrence is the SignedData's digestAlgorithms, which
	// has no OCTET STRING after it; the DigestInfo's has.
	i := bytes.Index(table, marker)
	if i < 0 {
		t.Fatal("no DigestInfo in the signature")
	}
	return i + len(marker)
}

// TestVerifyPEReadsSbsign: an image signed by sbsign (OpenSSL's PKCS#7,
// other attributes) verifies too.
func TestVerifyPEReadsSbsign(t *testing.T) {
	k := testKeys(t)
	in := need(t, systemdBoot)
	out := filepath.Join(t.TempDir(), "sbsign.efi")
	if b, err := exec.Command(need(t, "sbsign"), "--key", k.Path(FileDBKey), "--cert", k.Path(FileDBCert), "--output", out, in).CombinedOutput(); err != nil {
		t.Fatalf("sbsign: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyPE(b, k.DB.Cert); err != nil {
		t.Fatalf("VerifyPE of sbsign's signature: %v", err)
	}
	if err := VerifyPE(b, k.KEK.Cert); !errors.Is(err, ErrNotSignedByCert) {
		t.Fatalf("VerifyPE against the wrong cert: %v", err)
	}
}

// BenchmarkSignPE signs a 30 MiB PE image, a UKI's size: systemd-boot
// with 30 MiB of data after its sections (hashed like a section).
func BenchmarkSignPE(b *testing.B) {
	k := testKeys(b)
	in := readSystemdBoot(b)
	big := make([]byte, 30<<20)
	copy(big, in)
	for i := len(in); i < len(big); i++ {
		big[i] = byte(i)
	}
	b.SetBytes(int64(len(big)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := SignPE(big, k.DB.Signer, k.DB.Cert); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyPE(b *testing.B) {
	k := testKeys(b)
	in := readSystemdBoot(b)
	big := make([]byte, 30<<20)
	copy(big, in)
	signed, err := SignPE(big, k.DB.Signer, k.DB.Cert)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(signed)))
	b.ResetTimer()
	for b.Loop() {
		if err := VerifyPE(signed, k.DB.Cert); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPEChecksum: the checksum of a signed image is what sbsign writes for
// its own (checked against sbsign's output, the independent
// implementation), and it equals the word-at-a-time definition.
func TestPEChecksum(t *testing.T) {
	k := testKeys(t)
	in := need(t, systemdBoot)
	out := filepath.Join(t.TempDir(), "sbsign.efi")
	if b, err := exec.Command(need(t, "sbsign"), "--key", k.Path(FileDBKey), "--cert", k.Path(FileDBCert), "--output", out, in).CombinedOutput(); err != nil {
		t.Fatalf("sbsign: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	l, err := parsePE(b)
	if err != nil {
		t.Fatal(err)
	}
	want := binary.LittleEndian.Uint32(b[l.checksumOff:])
	zeroed := bytes.Clone(b)
	binary.LittleEndian.PutUint32(zeroed[l.checksumOff:], 0)
	if got := peChecksum(zeroed); got != want {
		t.Fatalf("checksum %#x, sbsign wrote %#x", got, want)
	}
	// Odd lengths and carries, against the definition.
	for _, n := range []int{0, 1, 2, 7, 9, 4097} {
		d := bytes.Repeat([]byte{0xff, 0xfe, 0x01}, n)[:n]
		var sum uint32
		for i := 0; i < n; i += 2 {
			w := uint32(d[i])
			if i+1 < n {
				w |= uint32(d[i+1]) << 8
			}
			sum += w
			sum = sum&0xffff + sum>>16
		}
		if got := peChecksum(d); got != sum+uint32(n) {
			t.Errorf("%d bytes: %#x, want %#x", n, got, sum+uint32(n))
		}
	}
}
