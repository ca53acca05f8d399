// Package uefidata writes and reads the UEFI variable store that EC2's
// RegisterImage takes as UefiData (`aws ec2 register-image --uefi-data`):
// the variables an instance's firmware starts with, here the Secure Boot
// keys PK, KEK and db.
//
// The format is AWS's (awslabs/python-uefivars, pyuefivars/aws.py), base64
// text of:
//
//	magic    u64 LE  "AMZNUEFI"
//	crc32c   u32 LE  CRC-32C (Castagnoli) over version and the zlib stream
//	version  u32 LE  0
//	zlib stream, compressed with a fixed preset dictionary, of:
//	  count  u64 LE
//	  count entries: name (u64 LE length, UTF-8), data (u64 LE length,
//	  bytes), GUID (16 bytes as stored in firmware), attributes (u32 LE),
//	  and when attributes hold TIME_BASED_AUTHENTICATED_WRITE_ACCESS a
//	  16-byte EFI_TIME timestamp and a digest (u64 LE length, bytes).
//
// The package is pure: no files, no clock.
package uefidata

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf8"
)

// Variable attributes (UEFI specification, GetVariable).
const (
	AttrNonVolatile                       uint32 = 0x01
	AttrBootServiceAccess                 uint32 = 0x02
	AttrRuntimeAccess                     uint32 = 0x04
	AttrTimeBasedAuthenticatedWriteAccess uint32 = 0x20

	// AttrSecureBootKey is what PK, KEK and db carry, and what
	// python-uefivars writes for them.
	AttrSecureBootKey = AttrNonVolatile | AttrBootServiceAccess | AttrRuntimeAccess | AttrTimeBasedAuthenticatedWriteAccess
)

// MaxEncodedLen is RegisterImage's limit on UefiData as the EC2 API
// reference states it (Length Constraints: Maximum length of 64000); the
// SDK's model does not carry it. Three RSA-2048 certificates take about
// 3.6 KB.
const MaxEncodedLen = 64000

// maxRawLen bounds the decompressed store, so that a small blob cannot
// claim gigabytes; a firmware variable store is at most a few hundred KiB.
const maxRawLen = 4 << 20

const (
	magic   uint64 = 0x494645554e5a4d41 // "AMZNUEFI" read as u64 LE
	version uint32 = 0
	// headerLen is magic, crc and version.
	headerLen = 8 + 4 + 4
	// digestLen is the length python-uefivars writes for an empty digest.
	digestLen = 32
)

// GUID is an EFI_GUID in the byte order firmware stores it (the first three
// fields little endian).
type GUID [16]byte

// String formats g the usual way, 8be4df61-93ca-11d2-aa0d-00e098032b8c.
func (g GUID) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(g[0:4]), binary.LittleEndian.Uint16(g[4:6]),
		binary.LittleEndian.Uint16(g[6:8]), g[8:10], g[10:16])
}

// ParseGUID reads the usual text form of a GUID.
func ParseGUID(s string) (GUID, error) {
	var g GUID
	parts := strings.Split(s, "-")
	if len(parts) != 5 || len(parts[0]) != 8 || len(parts[1]) != 4 || len(parts[2]) != 4 || len(parts[3]) != 4 || len(parts[4]) != 12 {
		return g, fmt.Errorf("GUID %q: want the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	raw, err := hex.DecodeString(strings.Join(parts, ""))
	if err != nil {
		return g, fmt.Errorf("GUID %q: %w", s, err)
	}
	// The first three fields are stored little endian.
	g[0], g[1], g[2], g[3] = raw[3], raw[2], raw[1], raw[0]
	g[4], g[5] = raw[5], raw[4]
	g[6], g[7] = raw[7], raw[6]
	copy(g[8:], raw[8:])
	return g, nil
}

// GlobalVariableGUID is EFI_GLOBAL_VARIABLE, the namespace of PK and KEK.
func GlobalVariableGUID() GUID {
	return GUID{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}
}

// ImageSecurityDatabaseGUID is EFI_IMAGE_SECURITY_DATABASE_GUID, the
// namespace of db and dbx.
func ImageSecurityDatabaseGUID() GUID {
	return GUID{0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f}
}

// Variable is one UEFI variable of the store.
type Variable struct {
	Name       string
	GUID       GUID
	Attributes uint32
	Data       []byte
	// Timestamp and Digest exist only for time-based authenticated
	// variables. A zero Timestamp and a nil Digest are written as
	// python-uefivars writes "none": 16 and 32 zero bytes; Decode gives
	// them back as zero and nil.
	Timestamp [16]byte
	Digest    []byte
}

// SecureBootVariables are the PK, KEK and db variables holding the given
// EFI signature lists, in that order, with the attributes firmware gives
// them: what `uefivars -i none -o aws -P PK.esl -K KEK.esl --db db.esl`
// writes (AWS's documented way to make UefiData).
func SecureBootVariables(pkESL, kekESL, dbESL []byte) []Variable {
	return []Variable{
		{Name: "PK", GUID: GlobalVariableGUID(), Attributes: AttrSecureBootKey, Data: pkESL},
		{Name: "KEK", GUID: GlobalVariableGUID(), Attributes: AttrSecureBootKey, Data: kekESL},
		{Name: "db", GUID: ImageSecurityDatabaseGUID(), Attributes: AttrSecureBootKey, Data: dbESL},
	}
}

// Encode writes vars as EC2's UefiData: base64 text, no newline.
func Encode(vars []Variable) ([]byte, error) {
	var raw bytes.Buffer
	putU64(&raw, uint64(len(vars)))
	for i, v := range vars {
		if !utf8.ValidString(v.Name) || v.Name == "" {
			return nil, fmt.Errorf("uefi-data: variable %d: name %q is empty or not UTF-8", i, v.Name)
		}
		putData(&raw, []byte(v.Name))
		putData(&raw, v.Data)
		raw.Write(v.GUID[:])
		putU32(&raw, v.Attributes)
		if v.Attributes&AttrTimeBasedAuthenticatedWriteAccess != 0 {
			raw.Write(v.Timestamp[:])
			d := v.Digest
			if d == nil {
				d = make([]byte, digestLen)
			}
			putData(&raw, d)
		}
	}

	var z bytes.Buffer
	zw, err := zlib.NewWriterLevelDict(&z, zlib.BestCompression, presetDictionary())
	if err != nil {
		return nil, fmt.Errorf("uefi-data: zlib: %w", err)
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, fmt.Errorf("uefi-data: zlib: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("uefi-data: zlib: %w", err)
	}

	var body bytes.Buffer
	putU32(&body, version)
	body.Write(z.Bytes())

	var bin bytes.Buffer
	putU64(&bin, magic)
	putU32(&bin, crc32.Checksum(body.Bytes(), crc32.MakeTable(crc32.Castagnoli)))
	bin.Write(body.Bytes())

	out := make([]byte, base64.StdEncoding.EncodedLen(bin.Len()))
	base64.StdEncoding.Encode(out, bin.Bytes())
	if len(out) > MaxEncodedLen {
		return nil, fmt.Errorf("uefi-data: %d bytes of base64, over RegisterImage's limit of %d", len(out), MaxEncodedLen)
	}
	return out, nil
}

// Errors Decode wraps, for callers that tell them apart.
var (
	ErrBase64    = errors.New("not base64")
	ErrMagic     = errors.New("bad magic")
	ErrCRC       = errors.New("CRC32C mismatch")
	ErrVersion   = errors.New("unsupported version")
	ErrZlib      = errors.New("zlib stream")
	ErrTruncated = errors.New("truncated")
	ErrTooLarge  = errors.New("too large")
)

// Decode reads EC2's UefiData (base64 text; surrounding white space, as a
// file's final newline, is ignored). Its errors say what is wrong and, for
// the variable list, at which offset of the decompressed store.
func Decode(b64 []byte) ([]Variable, error) {
	text := bytes.TrimSpace(b64)
	bin := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(bin, text)
	if err != nil {
		return nil, fmt.Errorf("uefi-data: %w: %v", ErrBase64, err)
	}
	bin = bin[:n]
	if len(bin) < headerLen {
		return nil, fmt.Errorf("uefi-data: %w: %d bytes, the header alone is %d", ErrTruncated, len(bin), headerLen)
	}
	if m := binary.LittleEndian.Uint64(bin[0:8]); m != magic {
		return nil, fmt.Errorf("uefi-data: %w: %q, want \"AMZNUEFI\"", ErrMagic, bin[0:8])
	}
	want := binary.LittleEndian.Uint32(bin[8:12])
	if got := crc32.Checksum(bin[12:], crc32.MakeTable(crc32.Castagnoli)); got != want {
		return nil, fmt.Errorf("uefi-data: %w: header says %#08x, the data's is %#08x (data cut short or altered?)", ErrCRC, want, got)
	}
	if v := binary.LittleEndian.Uint32(bin[12:16]); v != version {
		return nil, fmt.Errorf("uefi-data: %w %d, want %d", ErrVersion, v, version)
	}
	zr, err := zlib.NewReaderDict(bytes.NewReader(bin[headerLen:]), presetDictionary())
	if err != nil {
		return nil, fmt.Errorf("uefi-data: %w at byte %d: %v", ErrZlib, headerLen, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxRawLen+1))
	if err != nil {
		return nil, fmt.Errorf("uefi-data: %w: %v", ErrZlib, err)
	}
	if len(raw) > maxRawLen {
		return nil, fmt.Errorf("uefi-data: %w: the variable store decompresses to over %d bytes", ErrTooLarge, maxRawLen)
	}
	return parseStore(raw)
}

// parseStore reads the decompressed variable list.
func parseStore(raw []byte) ([]Variable, error) {
	r := reader{b: raw}
	count, err := r.u64("variable count")
	if err != nil {
		return nil, err
	}
	// Each entry takes at least two lengths, a GUID and attributes.
	const minEntry = 8 + 8 + 16 + 4
	if count > uint64(len(raw)-r.off)/minEntry {
		return nil, fmt.Errorf("uefi-data: %w: %d variables announced, the store has room for at most %d", ErrTruncated, count, uint64(len(raw)-r.off)/minEntry)
	}
	vars := make([]Variable, 0, count)
	for i := uint64(0); i < count; i++ {
		var v Variable
		at := r.off
		name, err := r.data(fmt.Sprintf("variable %d name", i))
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(name) || len(name) == 0 {
			return nil, fmt.Errorf("uefi-data: variable %d at offset %d: name %q is empty or not UTF-8", i, at, name)
		}
		v.Name = string(name)
		what := fmt.Sprintf("variable %d (%s)", i, v.Name)
		if v.Data, err = r.data(what + " data"); err != nil {
			return nil, err
		}
		g, err := r.bytes(16, what+" GUID")
		if err != nil {
			return nil, err
		}
		copy(v.GUID[:], g)
		if v.Attributes, err = r.u32(what + " attributes"); err != nil {
			return nil, err
		}
		if v.Attributes&AttrTimeBasedAuthenticatedWriteAccess != 0 {
			ts, err := r.bytes(16, what+" timestamp")
			if err != nil {
				return nil, err
			}
			copy(v.Timestamp[:], ts)
			d, err := r.data(what + " digest")
			if err != nil {
				return nil, err
			}
			if !(len(d) == digestLen && bytes.Equal(d, make([]byte, digestLen))) {
				v.Digest = d
			}
		}
		vars = append(vars, v)
	}
	if r.off != len(raw) {
		return nil, fmt.Errorf("uefi-data: %d bytes after the last of %d variables, at offset %d", len(raw)-r.off, count, r.off)
	}
	return vars, nil
}

// Check says whether b64 is UefiData that RegisterImage would take: within
// its length limit, and a store that decodes. It is what an EC2 stand-in
// calls on RegisterImage's UefiData parameter.
func Check(b64 []byte) error {
	if len(b64) > MaxEncodedLen {
		return fmt.Errorf("uefi-data: %w: %d bytes, RegisterImage takes at most %d", ErrTooLarge, len(b64), MaxEncodedLen)
	}
	_, err := Decode(b64)
	return err
}

type reader struct {
	b   []byte
	off int
}

func (r *reader) bytes(n uint64, what string) ([]byte, error) {
	if n > uint64(len(r.b)-r.off) {
		return nil, fmt.Errorf("uefi-data: %w: %s at offset %d: %d bytes needed, %d left", ErrTruncated, what, r.off, n, len(r.b)-r.off)
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) data(what string) ([]byte, error) {
	at := r.off
	n, err := r.u64(what + " length")
	if err != nil {
		return nil, err
	}
	b, err := r.bytes(n, what)
	if err != nil {
		return nil, fmt.Errorf("%w (its length field is at offset %d)", err, at)
	}
	return b, nil
}

func putU64(b *bytes.Buffer, v uint64) { b.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func putU32(b *bytes.Buffer, v uint32) { b.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func putData(b *bytes.Buffer, d []byte) {
	putU64(b, uint64(len(d)))
	b.Write(d)
}
