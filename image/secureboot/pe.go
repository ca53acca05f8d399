package secureboot

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"debug/pe"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/foxboron/go-uefi/authenticode"
)

// Errors VerifyPE and SignPE wrap.
var (
	// ErrUnsigned: the image has no Authenticode signature.
	ErrUnsigned = errors.New("PE image is not signed")
	// ErrNotSignedByCert: the image is signed, but by no signer that is
	// the given certificate.
	ErrNotSignedByCert = errors.New("not signed by this certificate")
	// ErrAlreadySigned: SignPE takes only unsigned images, so that one
	// input always gives one output.
	ErrAlreadySigned = errors.New("PE image is already signed")
)

const (
	winCertRevision   = 0x0200
	winCertTypePKCS7  = 0x0002 // WIN_CERT_TYPE_PKCS_SIGNED_DATA
	winCertHeaderSize = 8
)

// peLayout is what Authenticode needs of a PE/COFF image.
type peLayout struct {
	checksumOff  int // the optional header's CheckSum field
	certDirOff   int // data directory 4, the certificate table entry
	sizeOfHeader int
	sections     [][2]int // [offset, size] of each section's raw data, sorted by offset
	certVA       int      // certificate table's file offset, 0 when none
	certSize     int
}

// parsePE reads the fields Authenticode hashes around, checking each
// against the data's length so that a malformed image is an error.
func parsePE(data []byte) (*peLayout, error) {
	f, err := pe.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a PE image: %w", err)
	}
	defer f.Close()
	if len(data) < 0x40 {
		return nil, errors.New("not a PE image: shorter than a DOS header")
	}
	optOff := int(binary.LittleEndian.Uint32(data[0x3c:])) + 4 + 20
	var l peLayout
	l.checksumOff = optOff + 64
	var dirs uint32
	var dd pe.DataDirectory
	switch oh := f.OptionalHeader.(type) {
	case *pe.OptionalHeader32:
		l.certDirOff = optOff + 128
		l.sizeOfHeader = int(oh.SizeOfHeaders)
		dirs = oh.NumberOfRvaAndSizes
		dd = oh.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY]
	case *pe.OptionalHeader64:
		l.certDirOff = optOff + 144
		l.sizeOfHeader = int(oh.SizeOfHeaders)
		dirs = oh.NumberOfRvaAndSizes
		dd = oh.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY]
	default:
		return nil, errors.New("PE image has no optional header")
	}
	if dirs <= pe.IMAGE_DIRECTORY_ENTRY_SECURITY {
		return nil, fmt.Errorf("PE image has %d data directories, none for certificates", dirs)
	}
	if l.certDirOff+8 > l.sizeOfHeader || l.sizeOfHeader > len(data) {
		return nil, fmt.Errorf("PE image: SizeOfHeaders %d does not hold the headers or exceeds the file (%d bytes)", l.sizeOfHeader, len(data))
	}
	for _, s := range f.Sections {
		if s.Size == 0 {
			continue
		}
		if uint64(s.Offset)+uint64(s.Size) > uint64(len(data)) {
			return nil, fmt.Errorf("PE image: section %q (offset %d, %d bytes) runs past the end of the file (%d bytes)", s.Name, s.Offset, s.Size, len(data))
		}
		l.sections = append(l.sections, [2]int{int(s.Offset), int(s.Size)})
	}
	slices.SortFunc(l.sections, func(a, b [2]int) int { return a[0] - b[0] })
	l.certVA, l.certSize = int(dd.VirtualAddress), int(dd.Size)
	if (l.certVA == 0) != (l.certSize == 0) {
		return nil, fmt.Errorf("PE image: certificate table at %d with %d bytes", l.certVA, l.certSize)
	}
	if l.certSize != 0 && uint64(dd.VirtualAddress)+uint64(dd.Size) != uint64(len(data)) {
		return nil, fmt.Errorf("PE image: certificate table (offset %d, %d bytes) does not end the file (%d bytes)", l.certVA, l.certSize, len(data))
	}
	return &l, nil
}

// authenticodeDigest is the SHA-256 Authenticode image hash (Windows
// Authenticode PE Signature Format, "Calculating the PE Image Hash"): the
// headers without the checksum and the certificate table entry, the
// sections in file order, what follows them up to the certificate table,
// padded with zeros to a multiple of 8.
func authenticodeDigest(data []byte, l *peLayout) ([]byte, error) {
	h := sha256.New()
	h.Write(data[:l.checksumOff])
	h.Write(data[l.checksumOff+4 : l.certDirOff])
	h.Write(data[l.certDirOff+8 : l.sizeOfHeader])
	sum := l.sizeOfHeader
	for _, s := range l.sections {
		h.Write(data[s[0] : s[0]+s[1]])
		sum += s[1]
	}
	end := len(data) - l.certSize
	if end > sum {
		h.Write(data[sum:end])
	} else if end < sum {
		return nil, fmt.Errorf("PE image: headers and sections add up to %d bytes, past the signed part of the file (%d)", sum, end)
	}
	if pad := (8 - end%8) % 8; pad != 0 {
		h.Write(make([]byte, pad))
	}
	return h.Sum(nil), nil
}

// SignPE signs a PE/COFF image (a UKI, systemd-boot) with Authenticode, as
// UEFI Secure Boot checks it against db: the image is padded to a multiple
// of 8 bytes, a PKCS#7 signature over its SHA-256 image hash is appended
// as the certificate table, and the PE checksum is updated. Signing is
// deterministic: the same image, key and certificate give the same bytes.
// key must be RSA (PKCS#1 v1.5) and match cert. An image already signed is
// refused (ErrAlreadySigned).
func SignPE(data []byte, key crypto.Signer, cert *x509.Certificate) ([]byte, error) {
	l, err := parsePE(data)
	if err != nil {
		return nil, err
	}
	if l.certSize != 0 {
		return nil, fmt.Errorf("%w (certificate table of %d bytes at offset %d)", ErrAlreadySigned, l.certSize, l.certVA)
	}
	out := make([]byte, len(data), len(data)+7+winCertHeaderSize+2048)
	copy(out, data)
	out = append(out, make([]byte, (8-len(out)%8)%8)...)
	digest, err := authenticodeDigest(out, l)
	if err != nil {
		return nil, err
	}
	spc, err := authenticode.CreateSpcIndirectDataContent(digest, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("Authenticode SpcIndirectDataContent: %w", err)
	}
	sig, err := signedData(key, cert, authenticode.OIDSpcIndirectDataContent, spc, true)
	if err != nil {
		return nil, fmt.Errorf("Authenticode signature: %w", err)
	}
	certVA := len(out)
	entryLen := winCertHeaderSize + len(sig)
	out = binary.LittleEndian.AppendUint32(out, uint32(entryLen))
	out = binary.LittleEndian.AppendUint16(out, winCertRevision)
	out = binary.LittleEndian.AppendUint16(out, winCertTypePKCS7)
	out = append(out, sig...)
	out = append(out, make([]byte, (8-entryLen%8)%8)...)
	binary.LittleEndian.PutUint32(out[l.certDirOff:], uint32(certVA))
	binary.LittleEndian.PutUint32(out[l.certDirOff+4:], uint32(len(out)-certVA))
	binary.LittleEndian.PutUint32(out[l.checksumOff:], 0)
	binary.LittleEndian.PutUint32(out[l.checksumOff:], peChecksum(out))
	return out, nil
}

// VerifyPE checks that one of data's Authenticode signatures is cert's and
// covers the image as it is: the image hash in the signature equals the
// image's, the signed attributes match the signed content, and cert's key
// verifies the signature. It checks no chain or validity period: like
// UEFI firmware against db, cert is trusted as given.
func VerifyPE(data []byte, cert *x509.Certificate) error {
	l, err := parsePE(data)
	if err != nil {
		return err
	}
	if l.certSize == 0 {
		return ErrUnsigned
	}
	digest, err := authenticodeDigest(data, l)
	if err != nil {
		return err
	}
	table := data[l.certVA:]
	var errs []error
	for off := 0; off+winCertHeaderSize <= len(table); {
		n := int(binary.LittleEndian.Uint32(table[off:]))
		rev := binary.LittleEndian.Uint16(table[off+4:])
		typ := binary.LittleEndian.Uint16(table[off+6:])
		if n < winCertHeaderSize || n > len(table)-off {
			return fmt.Errorf("PE certificate table: entry at offset %d has length %d, %d bytes left", l.certVA+off, n, len(table)-off)
		}
		if rev == winCertRevision && typ == winCertTypePKCS7 {
			err := verifySignedData(table[off+winCertHeaderSize:off+n], cert, authenticode.OIDSpcIndirectDataContent, func(content []byte) ([]byte, error) {
				a, err := authenticode.ParseAuthenticode(table[off+winCertHeaderSize : off+n])
				if err != nil {
					return nil, err
				}
				if !bytes.Equal(a.Digest, digest) {
					return nil, errors.New("the signed image hash is not the image's (image changed after signing)")
				}
				return content, nil
			})
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("signature at offset %d: %w", l.certVA+off, err))
		}
		off += (n + 7) &^ 7
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: no PKCS#7 Authenticode entry in the certificate table", ErrUnsigned)
	}
	return fmt.Errorf("PE image does not verify against %q: %w", cert.Subject.String(), errors.Join(errs...))
}

// peChecksum is the PE image checksum (the sum of the image's 16-bit words
// with carries folded, plus the file length; the checksum field must be
// zero), which sbsign also updates.
func peChecksum(data []byte) uint32 {
	// A uint64 holds the plain sum of 2^48 16-bit words; fold once at the
	// end (the same value as folding after each addition).
	var sum uint64
	i := 0
	for ; i+8 <= len(data); i += 8 {
		v := binary.LittleEndian.Uint64(data[i:])
		sum += v&0xffff + v>>16&0xffff + v>>32&0xffff + v>>48
	}
	for ; i+1 < len(data); i += 2 {
		sum += uint64(binary.LittleEndian.Uint16(data[i:]))
	}
	if len(data)%2 == 1 {
		sum += uint64(data[len(data)-1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint32(sum) + uint32(len(data))
}
