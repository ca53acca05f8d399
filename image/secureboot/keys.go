// Package secureboot makes and reads the UEFI Secure Boot keys a berth
// image is signed with, on the build host: the PK, KEK and db key pairs
// with self-signed certificates, their EFI signature lists, the signed
// variables that enroll them (.auth), EC2's UefiData blob, and the
// Authenticode signing and verification of PE images (systemd-boot, UKIs)
// with the db key. Nothing here runs on a node; ./init never imports it.
package secureboot

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/berth-node/berth/image/secureboot/uefidata"
)

// The files of a key directory.
const (
	FilePKKey      = "PK.key"
	FilePKCert     = "PK.crt"
	FileKEKKey     = "KEK.key"
	FileKEKCert    = "KEK.crt"
	FileDBKey      = "db.key"
	FileDBCert     = "db.crt"
	FilePKESL      = "PK.esl"
	FileKEKESL     = "KEK.esl"
	FileDBESL      = "db.esl"
	FilePKAuth     = "PK.auth"
	FileKEKAuth    = "KEK.auth"
	FileDBAuth     = "db.auth"
	FileUEFIData   = "uefi-data"
	FileKeysJSON   = "keys.json"
	certValidity   = 30 * 365 * 24 * time.Hour
	rsaKeyBits     = 2048
	keysJSONFormat = 1
)

// ErrExists: a key set is already where one would be written.
var ErrExists = errors.New("a key set already exists")

// KeyPair is one of PK, KEK and db.
type KeyPair struct {
	Name   string // "PK", "KEK" or "db"
	Signer crypto.Signer
	Cert   *x509.Certificate
}

// Fingerprint is the SHA-256 of the certificate's DER, in lower-case hex.
func (k KeyPair) Fingerprint() string {
	s := sha256.Sum256(k.Cert.Raw)
	return hex.EncodeToString(s[:])
}

// Keys is a complete key set: the three key pairs, the owner GUID of
// their signature lists, and the content of every file of the set.
type Keys struct {
	// Dir is the directory the set was loaded from or last written to;
	// empty for a set only in memory.
	Dir         string
	Owner       uefidata.GUID
	PK, KEK, DB KeyPair
	files       map[string][]byte
}

// Path is the path of one of the set's files (FileDBAuth...) in Dir.
func (k *Keys) Path(name string) string { return filepath.Join(k.Dir, name) }

// File is the content of one of the set's files, nil for an unknown name.
func (k *Keys) File(name string) []byte { return k.files[name] }

// AuthFiles are the names of the signed variables, in the order firmware
// must enroll them (db and KEK before PK: setting PK ends setup mode).
func AuthFiles() []string { return []string{FileDBAuth, FileKEKAuth, FilePKAuth} }

// fileNames are all files of a set; the first six are the key pairs.
func fileNames() []string {
	return []string{FilePKKey, FilePKCert, FileKEKKey, FileKEKCert, FileDBKey, FileDBCert,
		FilePKESL, FileKEKESL, FileDBESL, FilePKAuth, FileKEKAuth, FileDBAuth, FileUEFIData, FileKeysJSON}
}

// GenerateOptions tune Generate; the zero value is what `make keys` uses.
type GenerateOptions struct {
	// Now is the certificates' start and the .auth files' timestamp; zero
	// means the current time.
	Now time.Time
	// Owner is the signature lists' owner GUID; nil means a random one.
	Owner *uefidata.GUID
	// CommonNamePrefix names the certificates "<prefix> PK" and so on;
	// empty means "berth".
	CommonNamePrefix string
}

// Generate makes a new key set in memory: RSA-2048 keys, self-signed
// SHA-256 certificates valid 30 years, and every derived file.
func Generate(opts GenerateOptions) (*Keys, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC().Truncate(time.Second)
	prefix := opts.CommonNamePrefix
	if prefix == "" {
		prefix = "berth"
	}
	k := &Keys{files: map[string][]byte{}}
	if opts.Owner != nil {
		k.Owner = *opts.Owner
	} else {
		k.Owner = randomGUID()
	}
	for _, p := range []struct {
		kp        *KeyPair
		name      string
		key, cert string
	}{{&k.PK, "PK", FilePKKey, FilePKCert}, {&k.KEK, "KEK", FileKEKKey, FileKEKCert}, {&k.DB, "db", FileDBKey, FileDBCert}} {
		key, err := rsa.GenerateKey(rand.Reader, rsaKeyBits)
		if err != nil {
			return nil, fmt.Errorf("generating the %s key: %w", p.name, err)
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			return nil, fmt.Errorf("serial number of the %s certificate: %w", p.name, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial,
			Subject:               pkix.Name{CommonName: prefix + " " + p.name},
			NotBefore:             now,
			NotAfter:              now.Add(certValidity),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			BasicConstraintsValid: true,
			IsCA:                  true,
			SignatureAlgorithm:    x509.SHA256WithRSA,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, fmt.Errorf("%s certificate: %w", p.name, err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s certificate: %w", p.name, err)
		}
		pk8, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("%s key: %w", p.name, err)
		}
		*p.kp = KeyPair{Name: p.name, Signer: key, Cert: cert}
		k.files[p.key] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk8})
		k.files[p.cert] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	if err := k.derive(now, func(string, string) {}); err != nil {
		return nil, err
	}
	return k, nil
}

// derive fills in the files of the set that are missing from k.files,
// calling note for each.
func (k *Keys) derive(now time.Time, note func(file, why string)) error {
	esl := map[string][]byte{}
	for _, p := range []struct {
		kp   KeyPair
		file string
	}{{k.PK, FilePKESL}, {k.KEK, FileKEKESL}, {k.DB, FileDBESL}} {
		if b, ok := k.files[p.file]; ok {
			esl[p.file] = b
			continue
		}
		b, err := CertESL(k.Owner, p.kp.Cert)
		if err != nil {
			return err
		}
		k.files[p.file], esl[p.file] = b, b
		note(p.file, "signature list of "+p.kp.Name+"'s certificate")
	}
	for _, a := range []struct {
		v      authVar
		file   string
		data   []byte
		signer KeyPair
	}{
		{varPK(), FilePKAuth, esl[FilePKESL], k.PK},
		{varKEK(), FileKEKAuth, esl[FileKEKESL], k.PK},
		{varDB(), FileDBAuth, esl[FileDBESL], k.KEK},
	} {
		if _, ok := k.files[a.file]; ok {
			continue
		}
		b, err := signedVariable(a.v, a.data, now, a.signer.Signer, a.signer.Cert)
		if err != nil {
			return err
		}
		k.files[a.file] = b
		note(a.file, a.v.name+" signed by "+a.signer.Name)
	}
	if _, ok := k.files[FileUEFIData]; !ok {
		b, err := uefidata.Encode(uefidata.SecureBootVariables(esl[FilePKESL], esl[FileKEKESL], esl[FileDBESL]))
		if err != nil {
			return err
		}
		// No newline: the file is passed whole, as python-uefivars writes
		// it, to `aws ec2 register-image --uefi-data file://uefi-data`.
		k.files[FileUEFIData] = b
		note(FileUEFIData, "EC2 UefiData with PK, KEK and db")
	}
	if _, ok := k.files[FileKeysJSON]; !ok {
		b, err := json.MarshalIndent(k.summary(), "", "  ")
		if err != nil {
			return fmt.Errorf("%s: %w", FileKeysJSON, err)
		}
		k.files[FileKeysJSON] = append(b, '\n')
		note(FileKeysJSON, "owner GUID and certificate fingerprints")
	}
	return nil
}

// keysJSON is keys.json: what the set is, for people and tools; nothing
// secret.
type keysJSON struct {
	Format int                    `json:"format"`
	Owner  string                 `json:"owner_guid"`
	Certs  map[string]certSummary `json:"certificates"`
}

type certSummary struct {
	Subject  string    `json:"subject"`
	SHA256   string    `json:"sha256"`
	NotAfter time.Time `json:"not_after"`
}

func (k *Keys) summary() keysJSON {
	s := keysJSON{Format: keysJSONFormat, Owner: k.Owner.String(), Certs: map[string]certSummary{}}
	for _, p := range []KeyPair{k.PK, k.KEK, k.DB} {
		s.Certs[p.Name] = certSummary{Subject: p.Cert.Subject.String(), SHA256: p.Fingerprint(), NotAfter: p.Cert.NotAfter.UTC()}
	}
	return s
}

// LoadKeys reads a key directory: one `make keys` wrote, or a user's own
// holding at least PK.key, PK.crt, KEK.key, KEK.crt, db.key and db.crt
// (PEM; RSA-2048 keys in PKCS#8 or PKCS#1, X.509 certificates). Files of
// the set that are missing (signature lists, .auth files, uefi-data,
// keys.json) are derived in memory and logged; LoadKeys writes nothing
// (WriteMissing does). Those present are checked against the keys: a
// signature list must hold its certificate, an .auth file must be signed
// by its signer over its signature list, uefi-data must hold the three
// lists, keys.json must name the certificates. Errors name the file.
func LoadKeys(ctx context.Context, log *slog.Logger, dir string) (*Keys, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("key directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("key directory %s: not a directory", dir)
	}
	k := &Keys{Dir: dir, files: map[string][]byte{}}
	for _, name := range fileNames() {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		k.files[name] = b
	}
	now := time.Now().UTC()
	for _, p := range []struct {
		kp        *KeyPair
		name      string
		key, cert string
	}{{&k.PK, "PK", FilePKKey, FilePKCert}, {&k.KEK, "KEK", FileKEKKey, FileKEKCert}, {&k.DB, "db", FileDBKey, FileDBCert}} {
		kp, err := loadPair(dir, p.name, p.key, p.cert, k.files, now)
		if err != nil {
			return nil, err
		}
		*p.kp = kp
		if st, err := os.Stat(filepath.Join(dir, p.key)); err == nil && st.Mode().Perm()&0o077 != 0 {
			log.Warn("secure boot keys: a private key is readable by others than its owner; chmod 600 it", "file", filepath.Join(dir, p.key), "mode", st.Mode().Perm().String())
		}
	}
	if err := k.loadOwner(log); err != nil {
		return nil, err
	}
	if err := k.checkPresent(); err != nil {
		return nil, err
	}
	err = k.derive(now.Truncate(time.Second), func(file, why string) {
		log.Info("secure boot keys: derived a missing file", "dir", dir, "file", file, "what", why)
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// loadPair reads and checks one key and certificate.
func loadPair(dir, name, keyFile, certFile string, files map[string][]byte, now time.Time) (KeyPair, error) {
	kb, ok := files[keyFile]
	if !ok {
		return KeyPair{}, fmt.Errorf("%s: missing; a key directory holds at least PK.key, PK.crt, KEK.key, KEK.crt, db.key and db.crt", filepath.Join(dir, keyFile))
	}
	cb, ok := files[certFile]
	if !ok {
		return KeyPair{}, fmt.Errorf("%s: missing; a key directory holds at least PK.key, PK.crt, KEK.key, KEK.crt, db.key and db.crt", filepath.Join(dir, certFile))
	}
	key, err := parseKey(kb)
	if err != nil {
		return KeyPair{}, fmt.Errorf("%s: %w", filepath.Join(dir, keyFile), err)
	}
	cert, err := parseCert(cb)
	if err != nil {
		return KeyPair{}, fmt.Errorf("%s: %w", filepath.Join(dir, certFile), err)
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return KeyPair{}, fmt.Errorf("%s: the key does not match the certificate %s (%q)", filepath.Join(dir, keyFile), certFile, cert.Subject.String())
	}
	if now.After(cert.NotAfter) {
		return KeyPair{}, fmt.Errorf("%s: certificate %q expired on %s; make a new key set (mkkeys -force)", filepath.Join(dir, certFile), cert.Subject.String(), cert.NotAfter.UTC().Format(time.DateOnly))
	}
	return KeyPair{Name: name, Signer: key, Cert: cert}, nil
}

// parseKey reads one PEM private key and accepts only what UEFI firmware
// verifies: RSA-2048.
func parseKey(b []byte) (crypto.Signer, error) {
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("not PEM (want a \"PRIVATE KEY\" or \"RSA PRIVATE KEY\" block)")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("more than one PEM block; want only the key")
	}
	var key any
	var err error
	switch blk.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("the key is encrypted; give it unencrypted (openssl pkey -in KEY -out KEY.plain)")
	default:
		return nil, fmt.Errorf("PEM block %q, want \"PRIVATE KEY\" or \"RSA PRIVATE KEY\"", blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("PEM %q: %w", blk.Type, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if n := k.N.BitLen(); n != rsaKeyBits {
			return nil, fmt.Errorf("RSA-%d key; UEFI firmware (OVMF, EC2) takes RSA-2048", n)
		}
		return k, nil
	case *ecdsa.PrivateKey:
		return nil, fmt.Errorf("EC %s key; UEFI firmware (OVMF, EC2) verifies RSA-2048 signatures only", k.Curve.Params().Name)
	default:
		return nil, fmt.Errorf("%T key; UEFI firmware (OVMF, EC2) takes RSA-2048", key)
	}
}

func parseCert(b []byte) (*x509.Certificate, error) {
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("not PEM (want a \"CERTIFICATE\" block)")
	}
	if blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("PEM block %q, want \"CERTIFICATE\"", blk.Type)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("more than one PEM block; want only the certificate")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, err
	}
	if cert.PublicKeyAlgorithm != x509.RSA {
		return nil, fmt.Errorf("certificate %q has a %v key; UEFI firmware takes RSA-2048", cert.Subject.String(), cert.PublicKeyAlgorithm)
	}
	return cert, nil
}

// loadOwner takes the owner GUID from keys.json, else from PK.esl, else
// makes one.
func (k *Keys) loadOwner(log *slog.Logger) error {
	if b, ok := k.files[FileKeysJSON]; ok {
		var s keysJSON
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%s: %w", k.Path(FileKeysJSON), err)
		}
		g, err := uefidata.ParseGUID(s.Owner)
		if err != nil {
			return fmt.Errorf("%s: owner_guid: %w", k.Path(FileKeysJSON), err)
		}
		k.Owner = g
		return nil
	}
	if b, ok := k.files[FilePKESL]; ok {
		e, err := parseESLs(b)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Path(FilePKESL), err)
		}
		if len(e) > 0 {
			k.Owner = e[0].Owner
			return nil
		}
	}
	k.Owner = randomGUID()
	log.Info("secure boot keys: no keys.json or PK.esl; made a new owner GUID", "dir", k.Dir, "owner", k.Owner.String())
	return nil
}

// checkPresent checks the derived files a directory already has against
// its keys.
func (k *Keys) checkPresent() error {
	for _, p := range []struct {
		kp   KeyPair
		file string
	}{{k.PK, FilePKESL}, {k.KEK, FileKEKESL}, {k.DB, FileDBESL}} {
		b, ok := k.files[p.file]
		if !ok {
			continue
		}
		entries, err := parseESLs(b)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Path(p.file), err)
		}
		if !slices.ContainsFunc(entries, func(e eslEntry) bool { return e.Type == certX509GUID() && bytes.Equal(e.Data, p.kp.Cert.Raw) }) {
			return fmt.Errorf("%s: does not hold %s's certificate %q (written for other keys?)", k.Path(p.file), p.kp.Name, p.kp.Cert.Subject.String())
		}
	}
	for _, a := range []struct {
		v      authVar
		file   string
		esl    string
		signer KeyPair
	}{{varPK(), FilePKAuth, FilePKESL, k.PK}, {varKEK(), FileKEKAuth, FileKEKESL, k.PK}, {varDB(), FileDBAuth, FileDBESL, k.KEK}} {
		b, ok := k.files[a.file]
		if !ok {
			continue
		}
		af, err := verifyAuth(b, a.v, a.signer.Cert)
		if err != nil {
			return fmt.Errorf("%s: %s signed by %s: %w", k.Path(a.file), a.v.name, a.signer.Name, err)
		}
		want, ok := k.files[a.esl]
		if !ok {
			// The signed list is the one to use; keep it as the ESL.
			k.files[a.esl] = af.Data
			want = af.Data
		}
		if !bytes.Equal(af.Data, want) {
			return fmt.Errorf("%s: its signature list differs from %s", k.Path(a.file), a.esl)
		}
	}
	if b, ok := k.files[FileUEFIData]; ok {
		vars, err := uefidata.Decode(b)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Path(FileUEFIData), err)
		}
		for _, w := range []struct {
			name string
			esl  string
		}{{"PK", FilePKESL}, {"KEK", FileKEKESL}, {"db", FileDBESL}} {
			i := slices.IndexFunc(vars, func(v uefidata.Variable) bool { return v.Name == w.name })
			if i < 0 {
				return fmt.Errorf("%s: no %s variable", k.Path(FileUEFIData), w.name)
			}
			if esl, ok := k.files[w.esl]; ok && !bytes.Equal(vars[i].Data, esl) {
				return fmt.Errorf("%s: its %s differs from %s", k.Path(FileUEFIData), w.name, w.esl)
			}
		}
	}
	if b, ok := k.files[FileKeysJSON]; ok {
		var s keysJSON
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%s: %w", k.Path(FileKeysJSON), err)
		}
		for _, p := range []KeyPair{k.PK, k.KEK, k.DB} {
			if got := s.Certs[p.Name].SHA256; got != p.Fingerprint() {
				return fmt.Errorf("%s: %s's fingerprint %q is not %s's (%s)", k.Path(FileKeysJSON), p.Name, got, p.Name+".crt", p.Fingerprint())
			}
		}
	}
	return nil
}

func randomGUID() uefidata.GUID {
	var g uefidata.GUID
	_, _ = rand.Read(g[:]) // crypto/rand.Read never fails
	// A version 4 GUID; byte 7 holds the version as firmware stores it.
	g[7] = g[7]&0x0f | 0x40
	g[8] = g[8]&0x3f | 0x80
	return g
}
