package secureboot

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	encasn1 "encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"

	"github.com/berth-node/berth/image/secureboot/uefidata"
)

// The GUIDs as the UEFI specification lists them, in firmware byte order.
var (
	specCertX509GUID = []byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72} // a5c059a1-94e4-4aa7-87b5-ab155c2bf072
	specPKCS7GUID    = []byte{0x9d, 0xd2, 0xaf, 0x4a, 0xdf, 0x68, 0xee, 0x49, 0x8a, 0xa9, 0x34, 0x7d, 0x37, 0x56, 0x65, 0xa7} // 4aafd29d-68df-49ee-8aa9-347d375665a7
)

// TestESLLayout reads each EFI_SIGNATURE_LIST field by field.
func TestESLLayout(t *testing.T) {
	k := testKeys(t)
	for _, p := range []struct {
		kp   KeyPair
		file string
	}{{k.PK, FilePKESL}, {k.KEK, FileKEKESL}, {k.DB, FileDBESL}} {
		b := k.File(p.file)
		der := p.kp.Cert.Raw
		if len(b) != 28+16+len(der) {
			t.Fatalf("%s: %d bytes, want header 28 + owner 16 + certificate %d", p.file, len(b), len(der))
		}
		if !bytes.Equal(b[0:16], specCertX509GUID) {
			t.Errorf("%s: SignatureType % x, want EFI_CERT_X509_GUID", p.file, b[0:16])
		}
		if v := binary.LittleEndian.Uint32(b[16:]); int(v) != len(b) {
			t.Errorf("%s: SignatureListSize %d, want %d", p.file, v, len(b))
		}
		if v := binary.LittleEndian.Uint32(b[20:]); v != 0 {
			t.Errorf("%s: SignatureHeaderSize %d, want 0", p.file, v)
		}
		if v := binary.LittleEndian.Uint32(b[24:]); int(v) != 16+len(der) {
			t.Errorf("%s: SignatureSize %d, want %d", p.file, v, 16+len(der))
		}
		if !bytes.Equal(b[28:44], k.Owner[:]) {
			t.Errorf("%s: SignatureOwner % x, want % x", p.file, b[28:44], k.Owner[:])
		}
		if !bytes.Equal(b[44:], der) {
			t.Errorf("%s: SignatureData is not the certificate's DER", p.file)
		}
	}
}

// TestESLMatchesEfitools: efitools' cert-to-efi-sig-list writes the same
// bytes.
func TestESLMatchesEfitools(t *testing.T) {
	k := testKeys(t)
	tool := need(t, "cert-to-efi-sig-list")
	for _, c := range []struct{ crt, esl string }{{FilePKCert, FilePKESL}, {FileKEKCert, FileKEKESL}, {FileDBCert, FileDBESL}} {
		out := filepath.Join(t.TempDir(), c.esl)
		if b, err := exec.Command(tool, "-g", k.Owner.String(), k.Path(c.crt), out).CombinedOutput(); err != nil {
			t.Fatalf("cert-to-efi-sig-list: %v: %s", err, b)
		}
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CertESL(k.Owner, map[string]*x509.Certificate{FilePKCert: k.PK.Cert, FileKEKCert: k.KEK.Cert, FileDBCert: k.DB.Cert}[c.crt])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !bytes.Equal(k.File(c.esl), want) {
			t.Errorf("%s differs from cert-to-efi-sig-list's", c.esl)
		}
	}
}

// TestAuthLayout reads each .auth file field by field:
// EFI_VARIABLE_AUTHENTICATION_2 { EFI_TIME, WIN_CERTIFICATE_UEFI_GUID {
// dwLength, wRevision, wCertificateType, CertType, CertData } }, then the
// signature list; then checks the signature.
func TestAuthLayout(t *testing.T) {
	k := testKeys(t)
	for _, a := range []struct {
		file, esl string
		v         authVar
		signer    KeyPair
		not       KeyPair
	}{
		{FilePKAuth, FilePKESL, varPK(), k.PK, k.KEK},
		{FileKEKAuth, FileKEKESL, varKEK(), k.PK, k.DB},
		{FileDBAuth, FileDBESL, varDB(), k.KEK, k.PK},
	} {
		b := k.File(a.file)
		// EFI_TIME of 2026-12-01 00:00:00, every other field zero.
		wantTime := []byte{0xea, 0x07, 12, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		if !bytes.Equal(b[0:16], wantTime) {
			t.Errorf("%s: TimeStamp % x, want % x", a.file, b[0:16], wantTime)
		}
		dwLength := binary.LittleEndian.Uint32(b[16:])
		if v := binary.LittleEndian.Uint16(b[20:]); v != 0x0200 {
			t.Errorf("%s: wRevision %#x, want 0x0200", a.file, v)
		}
		if v := binary.LittleEndian.Uint16(b[22:]); v != 0x0EF1 {
			t.Errorf("%s: wCertificateType %#x, want WIN_CERT_TYPE_EFI_GUID 0x0EF1", a.file, v)
		}
		if !bytes.Equal(b[24:40], specPKCS7GUID) {
			t.Errorf("%s: CertType % x, want EFI_CERT_TYPE_PKCS7_GUID", a.file, b[24:40])
		}
		certData := b[40 : 16+dwLength]
		// CertData is one DER SignedData, exactly dwLength - 24 bytes.
		s := cryptobyte.String(certData)
		var sd cryptobyte.String
		if !s.ReadASN1(&sd, asn1.SEQUENCE) || !s.Empty() {
			t.Fatalf("%s: CertData is not exactly one DER SEQUENCE (dwLength %d)", a.file, dwLength)
		}
		var version int64
		var algs, ci cryptobyte.String
		var ct encasn1.ObjectIdentifier
		if !sd.ReadASN1Integer(&version) || version != 1 || !sd.ReadASN1(&algs, asn1.SET) || !sd.ReadASN1(&ci, asn1.SEQUENCE) || !ci.ReadASN1ObjectIdentifier(&ct) {
			t.Fatalf("%s: SignedData header", a.file)
		}
		if !ct.Equal(encasn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}) || !ci.Empty() {
			t.Errorf("%s: content %v with %d bytes, want id-data and detached", a.file, ct, len(ci))
		}
		if !bytes.Contains(algs, []byte{0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01}) {
			t.Errorf("%s: digest algorithm is not SHA-256", a.file)
		}
		if !bytes.Equal(b[16+dwLength:], k.File(a.esl)) {
			t.Errorf("%s: the data after the header is not %s", a.file, a.esl)
		}
		if _, err := verifyAuth(b, a.v, a.signer.Cert); err != nil {
			t.Errorf("%s: signed by %s: %v", a.file, a.signer.Name, err)
		}
		if _, err := verifyAuth(b, a.v, a.not.Cert); !errors.Is(err, ErrNotSignedByCert) {
			t.Errorf("%s: verified by %s: %v", a.file, a.not.Name, err)
		}
		// The signature covers name, GUID, attributes, time and data.
		other := a.v
		other.name = "dbx"
		if _, err := verifyAuth(b, other, a.signer.Cert); err == nil {
			t.Errorf("%s verifies as variable dbx", a.file)
		}
		bad := bytes.Clone(b)
		bad[len(bad)-1] ^= 1
		if _, err := verifyAuth(bad, a.v, a.signer.Cert); err == nil {
			t.Errorf("%s verifies with a changed list", a.file)
		}
		opensslVerify(t, a.file, certData, signedPayload(a.v, [16]byte(b[0:16]), k.File(a.esl)), a.signer)
	}
}

// opensslVerify checks a detached SignedData with OpenSSL, the library
// EDK2 verifies it with.
func opensslVerify(t *testing.T, name string, signedData, payload []byte, signer KeyPair) {
	t.Helper()
	tool := need(t, "openssl")
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(encasn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2})
		b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) { b.AddBytes(signedData) })
	})
	dir := t.TempDir()
	p7 := filepath.Join(dir, "sig.p7")
	data := filepath.Join(dir, "payload")
	ca := filepath.Join(dir, "signer.crt")
	os.WriteFile(p7, b.BytesOrPanic(), 0o644)
	os.WriteFile(data, payload, 0o644)
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signer.Cert.Raw}), 0o644)
	out, err := exec.Command(tool, "cms", "-verify", "-binary", "-inform", "DER", "-in", p7, "-content", data,
		"-CAfile", ca, "-purpose", "any", "-out", os.DevNull).CombinedOutput()
	if err != nil {
		t.Errorf("%s: openssl cms -verify: %v: %s", name, err, out)
	}
}

func TestSignedVariableDeterministic(t *testing.T) {
	k := testKeys(t)
	ts := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a, err := signedVariable(varDB(), k.File(FileDBESL), ts, k.KEK.Signer, k.KEK.Cert)
	if err != nil {
		t.Fatal(err)
	}
	b, err := signedVariable(varDB(), k.File(FileDBESL), ts, k.KEK.Signer, k.KEK.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || !bytes.Equal(a, k.File(FileDBAuth)) {
		t.Fatal("db.auth is not the same bytes each time")
	}
}

func TestTestKeysUEFIData(t *testing.T) {
	k := testKeys(t)
	vars, err := uefidata.Decode(k.File(FileUEFIData))
	if err != nil {
		t.Fatal(err)
	}
	want := uefidata.SecureBootVariables(k.File(FilePKESL), k.File(FileKEKESL), k.File(FileDBESL))
	if len(vars) != 3 {
		t.Fatalf("%d variables", len(vars))
	}
	for i := range want {
		if vars[i].Name != want[i].Name || vars[i].GUID != want[i].GUID || vars[i].Attributes != want[i].Attributes || !bytes.Equal(vars[i].Data, want[i].Data) {
			t.Errorf("variable %d: %s, want %s", i, vars[i].Name, want[i].Name)
		}
	}
}

func TestGenerateWriteLoad(t *testing.T) {
	k, err := Generate(GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []KeyPair{k.PK, k.KEK, k.DB} {
		c := p.Cert
		if c.Subject.CommonName != "berth "+p.Name || c.SignatureAlgorithm != x509.SHA256WithRSA {
			t.Errorf("%s: %q %v", p.Name, c.Subject.CommonName, c.SignatureAlgorithm)
		}
		if n := c.PublicKey.(*rsa.PublicKey).N.BitLen(); n != 2048 {
			t.Errorf("%s: RSA-%d", p.Name, n)
		}
		if err := c.CheckSignatureFrom(c); err != nil {
			t.Errorf("%s: not self-signed: %v", p.Name, err)
		}
		if c.NotAfter.Sub(c.NotBefore) < 29*365*24*time.Hour {
			t.Errorf("%s: valid only until %v", p.Name, c.NotAfter)
		}
	}
	dir := filepath.Join(t.TempDir(), "keys")
	if err := k.Write(discard(), dir, false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("key directory: %v %v", st.Mode(), err)
	}
	for _, name := range fileNames() {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".key") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", name, st.Mode())
		}
	}
	var logs bytes.Buffer
	back, err := LoadKeys(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.DB.Fingerprint() != k.DB.Fingerprint() || back.Owner != k.Owner || logs.Len() != 0 {
		t.Fatalf("loaded set differs, or derived something: %s", logs.String())
	}
	for _, name := range fileNames() {
		if !bytes.Equal(back.File(name), k.File(name)) {
			t.Errorf("%s differs after loading", name)
		}
	}

	if err := k.Write(discard(), dir, false); !errors.Is(err, ErrExists) {
		t.Fatalf("Write over a set: %v", err)
	}
	k2, err := Generate(GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k2.Write(discard(), dir, true); err != nil {
		t.Fatal(err)
	}
	back, err = LoadKeys(context.Background(), discard(), dir)
	if err != nil || back.DB.Fingerprint() != k2.DB.Fingerprint() {
		t.Fatalf("forced Write did not replace the set: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Fatalf("left beside the key directory: %v", entries)
	}
}

// copyKeys copies the named files of the test keys into a new directory.
func copyKeys(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "testkeys", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func pemPairs() []string {
	return []string{FilePKKey, FilePKCert, FileKEKKey, FileKEKCert, FileDBKey, FileDBCert}
}

func TestLoadKeysDerives(t *testing.T) {
	dir := copyKeys(t, pemPairs()...)
	var logs bytes.Buffer
	k, err := LoadKeys(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{FilePKESL, FileKEKESL, FileDBESL, FilePKAuth, FileKEKAuth, FileDBAuth, FileUEFIData, FileKeysJSON} {
		if !strings.Contains(logs.String(), "file="+f) {
			t.Errorf("log does not say %s was derived:\n%s", f, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "made a new owner GUID") {
		t.Errorf("log does not say the owner GUID is new")
	}
	if _, err := verifyAuth(k.File(FileDBAuth), varDB(), k.KEK.Cert); err != nil {
		t.Fatalf("derived db.auth: %v", err)
	}
	if err := k.WriteMissing(discard()); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	again, err := LoadKeys(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), dir)
	if err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 || again.Owner != k.Owner {
		t.Fatalf("second load derived again or changed owner: %s", logs.String())
	}
	for _, name := range fileNames() {
		if !bytes.Equal(again.File(name), k.File(name)) {
			t.Errorf("%s differs after WriteMissing", name)
		}
	}

	// With PK.esl present, its owner is the set's.
	dir = copyKeys(t, append(pemPairs(), FilePKESL)...)
	k, err = LoadKeys(context.Background(), discard(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if k.Owner.String() != "3e1a6f2c-7b4d-4c1e-9a5f-0b8d2c4e6f10" {
		t.Fatalf("owner %v, want PK.esl's", k.Owner)
	}
	if !bytes.Equal(k.File(FileDBESL), testKeys(t).File(FileDBESL)) {
		t.Fatal("derived db.esl differs from the test keys' with the same owner")
	}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadKeysErrors(t *testing.T) {
	all := fileNames()
	k := testKeys(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		says  string
	}{
		{"missing cert", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, FileDBCert)) }, "db.crt: missing"},
		{"not PEM", func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, FileKEKKey), []byte("hello"), 0o600) }, "KEK.key: not PEM"},
		{"cert is a key", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, FilePKKey))
			os.WriteFile(filepath.Join(dir, FilePKCert), b, 0o600)
		}, `PK.crt: PEM block "PRIVATE KEY", want "CERTIFICATE"`},
		{"EC key", func(t *testing.T, dir string) {
			ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			der, _ := x509.MarshalPKCS8PrivateKey(ec)
			writePEM(t, filepath.Join(dir, FileDBKey), "PRIVATE KEY", der)
		}, "db.key: EC P-256 key; UEFI firmware (OVMF, EC2) verifies RSA-2048 signatures only"},
		{"RSA-1024", func(t *testing.T, dir string) {
			rk, _ := rsa.GenerateKey(rand.Reader, 1024)
			writePEM(t, filepath.Join(dir, FileDBKey), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk))
		}, "db.key: RSA-1024 key"},
		{"encrypted", func(t *testing.T, dir string) {
			writePEM(t, filepath.Join(dir, FileDBKey), "ENCRYPTED PRIVATE KEY", []byte{1})
		}, "db.key: the key is encrypted"},
		{"key of another cert", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, FileKEKKey))
			os.WriteFile(filepath.Join(dir, FileDBKey), b, 0o600)
		}, "db.key: the key does not match the certificate db.crt"},
		{"expired", func(t *testing.T, dir string) {
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "old db"},
				NotBefore: time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.DB.Signer.Public(), k.DB.Signer)
			if err != nil {
				t.Fatal(err)
			}
			writePEM(t, filepath.Join(dir, FileDBCert), "CERTIFICATE", der)
		}, `db.crt: certificate "CN=old db" expired on 2020-01-01`},
		{"ESL of another cert", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, FileDBESL))
			os.WriteFile(filepath.Join(dir, FileKEKESL), b, 0o600)
		}, "KEK.esl: does not hold KEK's certificate"},
		{"ESL cut", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, FileDBESL))
			os.WriteFile(filepath.Join(dir, FileDBESL), b[:100], 0o600)
		}, "db.esl: signature list at offset 0"},
		{"auth signed by the wrong key", func(t *testing.T, dir string) {
			b, err := signedVariable(varDB(), k.File(FileDBESL), time.Now(), k.PK.Signer, k.PK.Cert)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, FileDBAuth), b, 0o600)
		}, "db.auth: db signed by KEK"},
		{"auth changed", func(t *testing.T, dir string) {
			b := bytes.Clone(k.File(FileKEKAuth))
			b[len(b)-10] ^= 1
			os.WriteFile(filepath.Join(dir, FileKEKAuth), b, 0o600)
		}, "KEK.auth: KEK signed by PK"},
		{"auth header", func(t *testing.T, dir string) {
			b := bytes.Clone(k.File(FilePKAuth))
			b[22], b[23] = 2, 0 // wCertificateType WIN_CERT_TYPE_PKCS_SIGNED_DATA
			os.WriteFile(filepath.Join(dir, FilePKAuth), b, 0o600)
		}, "PK.auth: PK signed by PK: WIN_CERTIFICATE wCertificateType 0x0002"},
		{"uefi-data corrupt", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, FileUEFIData), []byte("QU1aTlVFRkkAAAAAAAAAAA=="), 0o600)
		}, "uefi-data: uefi-data: CRC32C mismatch"},
		{"keys.json of other keys", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, FileKeysJSON))
			b = bytes.Replace(b, []byte(k.DB.Fingerprint()), []byte(k.PK.Fingerprint()), 1)
			os.WriteFile(filepath.Join(dir, FileKeysJSON), b, 0o600)
		}, "keys.json: db's fingerprint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyKeys(t, all...)
			tc.setup(t, dir)
			_, err := LoadKeys(context.Background(), discard(), dir)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the directory", err)
			}
		})
	}
	if _, err := LoadKeys(context.Background(), discard(), filepath.Join("testdata", "testkeys", FileDBKey)); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("LoadKeys of a file: %v", err)
	}
}

func TestLoadKeysWarnsOpenKey(t *testing.T) {
	dir := copyKeys(t, fileNames()...)
	os.Chmod(filepath.Join(dir, FileDBKey), 0o644)
	var logs bytes.Buffer
	if _, err := LoadKeys(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), dir); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "readable by others") || !strings.Contains(logs.String(), FileDBKey) || strings.Contains(logs.String(), FilePKKey) {
		t.Fatalf("log: %s", logs.String())
	}
}

func TestUEFIDataFileIsBareBase64(t *testing.T) {
	k, err := Generate(GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := k.File(FileUEFIData)
	if len(b) == 0 || len(bytes.TrimSpace(b)) != len(b) {
		t.Fatalf("uefi-data has white space around it: %q...%q", b[:min(8, len(b))], b[max(0, len(b)-8):])
	}
	if err := uefidata.Check(b); err != nil {
		t.Fatal(err)
	}
}
