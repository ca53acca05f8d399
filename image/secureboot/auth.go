package secureboot

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf16"

	"github.com/foxboron/go-uefi/efi/signature"
	"github.com/foxboron/go-uefi/efi/util"
	"github.com/foxboron/go-uefi/pkcs7"
	"golang.org/x/crypto/cryptobyte"

	"github.com/berth-node/berth/image/secureboot/uefidata"
)

// Layout constants of the UEFI specification (section 8.2, "Variable
// Services", and 32.2.4, WIN_CERTIFICATE).
const (
	winCertTypeEFIGUID = 0x0EF1 // WIN_CERT_TYPE_EFI_GUID
	efiTimeSize        = 16
	guidSize           = 16
	// eslHeaderSize is EFI_SIGNATURE_LIST's SignatureType, ListSize,
	// HeaderSize and SignatureSize.
	eslHeaderSize = guidSize + 4 + 4 + 4
)

// certX509GUID is EFI_CERT_X509_GUID, a signature list of X.509
// certificates; pkcs7GUID is EFI_CERT_TYPE_PKCS7_GUID.
func certX509GUID() uefidata.GUID { return fromEFIGUID(signature.CERT_X509_GUID) }
func pkcs7GUID() uefidata.GUID    { return fromEFIGUID(signature.EFI_CERT_TYPE_PKCS7_GUID) }

func fromEFIGUID(g util.EFIGUID) uefidata.GUID {
	var out uefidata.GUID
	binary.LittleEndian.PutUint32(out[0:], g.Data1)
	binary.LittleEndian.PutUint16(out[4:], g.Data2)
	binary.LittleEndian.PutUint16(out[6:], g.Data3)
	copy(out[8:], g.Data4[:])
	return out
}

func toEFIGUID(g uefidata.GUID) util.EFIGUID {
	e := util.EFIGUID{
		Data1: binary.LittleEndian.Uint32(g[0:]),
		Data2: binary.LittleEndian.Uint16(g[4:]),
		Data3: binary.LittleEndian.Uint16(g[6:]),
	}
	copy(e.Data4[:], g[8:])
	return e
}

// CertESL is an EFI_SIGNATURE_LIST holding one X.509 certificate (DER)
// owned by owner: what `cert-to-efi-sig-list -g OWNER` writes.
func CertESL(owner uefidata.GUID, cert *x509.Certificate) ([]byte, error) {
	db := signature.NewSignatureDatabase()
	if err := db.Append(signature.CERT_X509_GUID, toEFIGUID(owner), cert.Raw); err != nil {
		return nil, fmt.Errorf("signature list of %q: %w", cert.Subject.String(), err)
	}
	return db.Bytes(), nil
}

// eslEntry is one EFI_SIGNATURE_DATA of a signature list.
type eslEntry struct {
	Type  uefidata.GUID
	Owner uefidata.GUID
	Data  []byte
}

// parseESLs reads a variable's data: EFI_SIGNATURE_LISTs one after the
// other, checking each header against the data's length.
func parseESLs(b []byte) ([]eslEntry, error) {
	var out []eslEntry
	for off := 0; off < len(b); {
		if len(b)-off < eslHeaderSize {
			return nil, fmt.Errorf("signature list at offset %d: %d bytes, the header alone is %d", off, len(b)-off, eslHeaderSize)
		}
		var typ uefidata.GUID
		copy(typ[:], b[off:])
		listSize := int64(binary.LittleEndian.Uint32(b[off+16:]))
		hdrSize := int64(binary.LittleEndian.Uint32(b[off+20:]))
		sigSize := int64(binary.LittleEndian.Uint32(b[off+24:]))
		if listSize > int64(len(b)-off) || sigSize < guidSize || listSize < eslHeaderSize+hdrSize || (listSize-eslHeaderSize-hdrSize)%sigSize != 0 {
			return nil, fmt.Errorf("signature list at offset %d: ListSize %d, SignatureHeaderSize %d, SignatureSize %d do not fit %d bytes", off, listSize, hdrSize, sigSize, len(b)-off)
		}
		for p := int64(off) + eslHeaderSize + hdrSize; p < int64(off)+listSize; p += sigSize {
			var e eslEntry
			e.Type = typ
			copy(e.Owner[:], b[p:])
			e.Data = b[p+guidSize : p+sigSize]
			out = append(out, e)
		}
		off += int(listSize)
	}
	return out, nil
}

// Authenticated variable: the name, namespace and attributes firmware
// stores it under.
type authVar struct {
	name  string
	guid  uefidata.GUID
	attrs uint32
}

func varPK() authVar {
	return authVar{"PK", uefidata.GlobalVariableGUID(), uefidata.AttrSecureBootKey}
}
func varKEK() authVar {
	return authVar{"KEK", uefidata.GlobalVariableGUID(), uefidata.AttrSecureBootKey}
}
func varDB() authVar {
	return authVar{"db", uefidata.ImageSecurityDatabaseGUID(), uefidata.AttrSecureBootKey}
}

// efiTime encodes t as EFI_TIME with Pad1, Nanosecond, TimeZone,
// Daylight and Pad2 zero, as an authenticated variable's timestamp must be.
func efiTime(t time.Time) [efiTimeSize]byte {
	t = t.UTC()
	var b [efiTimeSize]byte
	binary.LittleEndian.PutUint16(b[0:], uint16(t.Year()))
	b[2], b[3], b[4], b[5], b[6] = byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second())
	return b
}

// signedPayload is what an EFI_VARIABLE_AUTHENTICATION_2 signature covers:
// the name (UCS-2, no terminator), vendor GUID, attributes, timestamp and
// data.
func signedPayload(v authVar, ts [efiTimeSize]byte, data []byte) []byte {
	var b bytes.Buffer
	for _, u := range utf16.Encode([]rune(v.name)) {
		b.Write(binary.LittleEndian.AppendUint16(nil, u))
	}
	b.Write(v.guid[:])
	b.Write(binary.LittleEndian.AppendUint32(nil, v.attrs))
	b.Write(ts[:])
	b.Write(data)
	return b.Bytes()
}

// signedVariable is an .auth file: EFI_VARIABLE_AUTHENTICATION_2 (the
// timestamp and a WIN_CERTIFICATE_UEFI_GUID holding a detached PKCS#7
// SignedData, without its ContentInfo wrapper) followed by the data, what
// `sign-efi-sig-list -t TIME` writes and what SetVariable and systemd-boot's
// enrollment take. Deterministic for a given timestamp.
func signedVariable(v authVar, data []byte, ts time.Time, key crypto.Signer, cert *x509.Certificate) ([]byte, error) {
	t := efiTime(ts)
	ci, err := signedData(key, cert, pkcs7.OIDData, signedPayload(v, t, data), false)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", v.name, err)
	}
	sd, err := unwrapContentInfo(ci)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(t[:])
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(winCertHeaderSize+guidSize+len(sd))))
	b.Write(binary.LittleEndian.AppendUint16(nil, winCertRevision))
	b.Write(binary.LittleEndian.AppendUint16(nil, winCertTypeEFIGUID))
	g := pkcs7GUID()
	b.Write(g[:])
	b.Write(sd)
	b.Write(data)
	return b.Bytes(), nil
}

// unwrapContentInfo returns the SignedData inside a ContentInfo.
func unwrapContentInfo(ci []byte) ([]byte, error) {
	s := cryptobyte.String(ci)
	_, content, err := pkcs7.ParseContentInfo(&s)
	if err != nil {
		return nil, fmt.Errorf("PKCS#7 ContentInfo: %w", err)
	}
	return content, nil
}

// authFile is a parsed .auth file.
type authFile struct {
	Timestamp  [efiTimeSize]byte
	Length     uint32 // WIN_CERTIFICATE dwLength
	Revision   uint16
	CertType   uint16
	GUID       uefidata.GUID
	SignedData []byte
	Data       []byte
}

// parseAuth reads an .auth file, checking every header field against the
// specification.
func parseAuth(b []byte) (*authFile, error) {
	const hdr = efiTimeSize + winCertHeaderSize + guidSize
	if len(b) < hdr {
		return nil, fmt.Errorf("%d bytes, EFI_VARIABLE_AUTHENTICATION_2's header alone is %d", len(b), hdr)
	}
	var a authFile
	copy(a.Timestamp[:], b)
	if a.Timestamp[7] != 0 || !bytes.Equal(a.Timestamp[8:], make([]byte, 8)) {
		return nil, errors.New("timestamp: Pad1, Nanosecond, TimeZone, Daylight and Pad2 must be zero")
	}
	a.Length = binary.LittleEndian.Uint32(b[16:])
	a.Revision = binary.LittleEndian.Uint16(b[20:])
	a.CertType = binary.LittleEndian.Uint16(b[22:])
	copy(a.GUID[:], b[24:])
	if a.Revision != winCertRevision {
		return nil, fmt.Errorf("WIN_CERTIFICATE wRevision %#04x, want %#04x", a.Revision, winCertRevision)
	}
	if a.CertType != winCertTypeEFIGUID {
		return nil, fmt.Errorf("WIN_CERTIFICATE wCertificateType %#04x, want WIN_CERT_TYPE_EFI_GUID %#04x", a.CertType, winCertTypeEFIGUID)
	}
	if a.GUID != pkcs7GUID() {
		return nil, fmt.Errorf("CertType %v, want EFI_CERT_TYPE_PKCS7_GUID %v", a.GUID, pkcs7GUID())
	}
	if a.Length < winCertHeaderSize+guidSize || int64(a.Length) > int64(len(b)-efiTimeSize) {
		return nil, fmt.Errorf("WIN_CERTIFICATE dwLength %d does not fit %d bytes", a.Length, len(b)-efiTimeSize)
	}
	a.SignedData = b[hdr : efiTimeSize+int(a.Length)]
	a.Data = b[efiTimeSize+int(a.Length):]
	return &a, nil
}

// verifyAuth checks an .auth file for variable v: well formed and signed
// by signer over its own timestamp and data.
func verifyAuth(b []byte, v authVar, signer *x509.Certificate) (*authFile, error) {
	a, err := parseAuth(b)
	if err != nil {
		return nil, err
	}
	payload := signedPayload(v, a.Timestamp, a.Data)
	err = verifySignedData(a.SignedData, signer, pkcs7.OIDData, func(content []byte) ([]byte, error) {
		if content != nil {
			return nil, errors.New("PKCS#7 carries content; an authenticated variable's signature is detached")
		}
		return payload, nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// CertFingerprints returns the SHA-256 (lower-case hex, as
// KeyPair.Fingerprint) of each X.509 certificate in a variable's signature
// lists (db's data in EC2's uefi-data, say), so a caller can tell whether a
// certificate is enrolled there.
func CertFingerprints(esl []byte) ([]string, error) {
	entries, err := parseESLs(esl)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Type != certX509GUID() {
			continue
		}
		s := sha256.Sum256(e.Data)
		out = append(out, hex.EncodeToString(s[:]))
	}
	return out, nil
}
