package uefidata

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"hash/adler32"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/testkeys.uefi-data")

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testVars(t testing.TB) []Variable {
	return SecureBootVariables(readFile(t, "testkeys-PK.esl"), readFile(t, "testkeys-KEK.esl"), readFile(t, "testkeys-db.esl"))
}

func TestPresetDictionary(t *testing.T) {
	d := presetDictionary()
	if len(d) != 11381 {
		t.Fatalf("dictionary is %d bytes, want 11381", len(d))
	}
	if id := adler32.Checksum(d); id != 0x6bb7d9f7 {
		t.Fatalf("dictionary id %#x, want 0x6bb7d9f7", id)
	}
}

// TestGolden pins the blob of the test keys: a change to the format
// (order, attributes, lengths) shows as a diff. Go's deflate output is
// stable across releases but not promised; if a Go upgrade changes it,
// TestGoldenDecodes still holds and -update rewrites the file.
func TestGolden(t *testing.T) {
	got, err := Encode(testVars(t))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "testkeys.uefi-data")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := bytes.TrimSpace(readFile(t, "testkeys.uefi-data"))
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode differs from %s (go test -run TestGolden -update rewrites it)\ngot  %.80s...\nwant %.80s...", golden, got, want)
	}
}

func TestGoldenDecodes(t *testing.T) {
	vars, err := Decode(readFile(t, "testkeys.uefi-data"))
	if err != nil {
		t.Fatal(err)
	}
	want := testVars(t)
	if !reflect.DeepEqual(vars, want) {
		t.Fatalf("decoded %+v\nwant %+v", vars, want)
	}
	// The fields as python-uefivars writes PK, KEK and db.
	for i, name := range []string{"PK", "KEK", "db"} {
		v := vars[i]
		if v.Name != name || v.Attributes != 0x27 {
			t.Errorf("variable %d: %s attributes %#x, want %s 0x27", i, v.Name, v.Attributes, name)
		}
	}
	if vars[0].GUID.String() != "8be4df61-93ca-11d2-aa0d-00e098032b8c" || vars[2].GUID.String() != "d719b2cb-3d3a-4596-a3bc-dad00e67656f" {
		t.Errorf("GUIDs %v %v", vars[0].GUID, vars[2].GUID)
	}
}

// TestHeaderLayout reads the blob's header by hand.
func TestHeaderLayout(t *testing.T) {
	b64, err := Encode(testVars(t))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil {
		t.Fatal(err)
	}
	if string(bin[:8]) != "AMZNUEFI" {
		t.Errorf("magic %q", bin[:8])
	}
	if crc := binary.LittleEndian.Uint32(bin[8:]); crc != crc32.Checksum(bin[12:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Errorf("crc %#x is not CRC32C of version and data", crc)
	}
	if v := binary.LittleEndian.Uint32(bin[12:]); v != 0 {
		t.Errorf("version %d", v)
	}
	// zlib header with FDICT and the dictionary's id.
	if bin[16]&0x0f != 8 || bin[17]&0x20 == 0 || binary.BigEndian.Uint32(bin[18:]) != 0x6bb7d9f7 {
		t.Errorf("zlib header % x: want deflate with preset dictionary 0x6bb7d9f7", bin[16:22])
	}
	zr, err := zlib.NewReaderDict(bytes.NewReader(bin[16:]), presetDictionary())
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	r := raw.Bytes()
	if n := binary.LittleEndian.Uint64(r); n != 3 {
		t.Fatalf("count %d", n)
	}
	// First entry: "PK", its ESL, the GUID, attributes, zero timestamp,
	// a 32-byte zero digest.
	off := 8
	if l := binary.LittleEndian.Uint64(r[off:]); l != 2 || string(r[off+8:off+10]) != "PK" {
		t.Fatalf("first name: length %d, %q", l, r[off+8:off+10])
	}
	off += 10
	esl := readFile(t, "testkeys-PK.esl")
	if l := binary.LittleEndian.Uint64(r[off:]); l != uint64(len(esl)) || !bytes.Equal(r[off+8:off+8+len(esl)], esl) {
		t.Fatalf("PK data: length %d, want the ESL's %d", l, len(esl))
	}
	off += 8 + len(esl)
	g := GlobalVariableGUID()
	if !bytes.Equal(r[off:off+16], g[:]) {
		t.Fatalf("PK GUID % x", r[off:off+16])
	}
	off += 16
	if a := binary.LittleEndian.Uint32(r[off:]); a != 0x27 {
		t.Fatalf("PK attributes %#x", a)
	}
	off += 4
	if !bytes.Equal(r[off:off+16], make([]byte, 16)) {
		t.Fatalf("PK timestamp % x", r[off:off+16])
	}
	off += 16
	if l := binary.LittleEndian.Uint64(r[off:]); l != 32 || !bytes.Equal(r[off+8:off+40], make([]byte, 32)) {
		t.Fatalf("PK digest: length %d", l)
	}
}

// TestDecodePythonUefivars reads a store AWS's own tool wrote and compares
// it with the same store as that tool's JSON.
func TestDecodePythonUefivars(t *testing.T) {
	vars, err := Decode(readFile(t, "python-uefivars-t02.aws"))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Variables []struct {
			Name, Data, GUID string
			Attr             uint32
			Timestamp        string
			Digest           string
		}
	}
	if err := json.Unmarshal(readFile(t, "python-uefivars-t02.json"), &j); err != nil {
		t.Fatal(err)
	}
	if len(vars) != len(j.Variables) || len(vars) != 23 {
		t.Fatalf("%d variables, the JSON has %d", len(vars), len(j.Variables))
	}
	for i, w := range j.Variables {
		v := vars[i]
		data, _ := hex.DecodeString(w.Data)
		if v.Name != w.Name || v.GUID.String() != w.GUID || v.Attributes != w.Attr || !bytes.Equal(v.Data, data) {
			t.Errorf("variable %d: %s %v %#x %d bytes, want %s %s %#x %d bytes", i, v.Name, v.GUID, v.Attributes, len(v.Data), w.Name, w.GUID, w.Attr, len(data))
		}
	}
	// Our encoder's output of the same store decodes to the same.
	again, err := Encode(vars)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(again)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, vars) {
		t.Fatal("re-encoded store differs")
	}
}

func TestRoundTrip(t *testing.T) {
	vars := append(testVars(t),
		Variable{Name: "BootOrder", GUID: GlobalVariableGUID(), Attributes: 7, Data: []byte{0, 0}},
		Variable{Name: "dbx", GUID: ImageSecurityDatabaseGUID(), Attributes: AttrSecureBootKey, Data: []byte{1},
			Timestamp: [16]byte{0xea, 0x07, 12, 1}, Digest: bytes.Repeat([]byte{7}, 32)},
		Variable{Name: "Empty", GUID: GUID{1}, Attributes: 3, Data: []byte{}},
	)
	b, err := Encode(vars)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(append(b, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, vars) {
		t.Fatalf("round trip\ngot  %+v\nwant %+v", got, vars)
	}
	if err := Check(b); err != nil {
		t.Fatal(err)
	}
}

func TestParseGUID(t *testing.T) {
	for _, s := range []string{"8be4df61-93ca-11d2-aa0d-00e098032b8c", "d719b2cb-3d3a-4596-a3bc-dad00e67656f"} {
		g, err := ParseGUID(s)
		if err != nil || g.String() != s {
			t.Errorf("ParseGUID(%s) = %v, %v", s, g, err)
		}
	}
	if g, _ := ParseGUID("8be4df61-93ca-11d2-aa0d-00e098032b8c"); g != GlobalVariableGUID() {
		t.Errorf("byte order: % x", g[:])
	}
	for _, s := range []string{"", "8be4df61", "8be4df61-93ca-11d2-aa0d-00e098032b8z", "8be4df6193ca11d2aa0d00e098032b8c"} {
		if _, err := ParseGUID(s); err == nil {
			t.Errorf("ParseGUID(%q) took it", s)
		}
	}
}

// wrap builds a blob around a raw variable store, as Encode would.
func wrap(t *testing.T, raw []byte, ver uint32) []byte {
	t.Helper()
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevelDict(&z, 9, presetDictionary())
	zw.Write(raw)
	zw.Close()
	return frame(append(binary.LittleEndian.AppendUint32(nil, ver), z.Bytes()...))
}

// frame adds magic and CRC to version‖payload and encodes it.
func frame(body []byte) []byte {
	bin := binary.LittleEndian.AppendUint64(nil, magic)
	bin = binary.LittleEndian.AppendUint32(bin, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	bin = append(bin, body...)
	return []byte(base64.StdEncoding.EncodeToString(bin))
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(testVars(t))
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := base64.StdEncoding.DecodeString(string(good))
	enc := func(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }
	mutate := func(off int, v byte) []byte {
		c := bytes.Clone(bin)
		c[off] ^= v
		return enc(c)
	}
	// A store of one entry, cut short inside its data.
	var raw bytes.Buffer
	raw.Write(binary.LittleEndian.AppendUint64(nil, 1))
	raw.Write(binary.LittleEndian.AppendUint64(nil, 2))
	raw.WriteString("PK")
	raw.Write(binary.LittleEndian.AppendUint64(nil, 100))
	raw.Write(make([]byte, 40))
	full := testVars(t)[:1]
	fullRaw := func() []byte {
		b, _ := Encode(full)
		d, _ := base64.StdEncoding.DecodeString(string(b))
		zr, _ := zlib.NewReaderDict(bytes.NewReader(d[16:]), presetDictionary())
		var o bytes.Buffer
		o.ReadFrom(zr)
		return o.Bytes()
	}()

	for _, tc := range []struct {
		name string
		in   []byte
		is   error
		says string
	}{
		{"not base64", []byte("AMZN!!!"), ErrBase64, "not base64"},
		{"short", enc([]byte("AMZNUEFI")), ErrTruncated, "8 bytes"},
		{"magic", mutate(0, 1), ErrMagic, "AMZNUEFI"},
		{"crc", mutate(len(bin)-1, 0x40), ErrCRC, "CRC32C mismatch"},
		{"version", wrap(t, fullRaw, 1), ErrVersion, "version 1"},
		{"zlib header", frame(append(binary.LittleEndian.AppendUint32(nil, 0), "not zlib at all"...)), ErrZlib, "zlib"},
		{"zlib data", frame(append(binary.LittleEndian.AppendUint32(nil, 0), bin[16:len(bin)-20]...)), ErrZlib, "zlib"},
		{"truncated entry", wrap(t, raw.Bytes(), 0), ErrTruncated, "variable 0 (PK) data at offset 26: 100 bytes needed, 40 left"},
		{"count", wrap(t, binary.LittleEndian.AppendUint64(nil, 1<<40), 0), ErrTruncated, "1099511627776 variables announced"},
		{"trailing", wrap(t, append(bytes.Clone(fullRaw), 1, 2, 3), 0), nil, "3 bytes after the last of 1 variables"},
		{"attributes cut", wrap(t, fullRaw[:len(fullRaw)-60], 0), ErrTruncated, "variable 0 (PK) attributes at offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.in)
			if err == nil {
				t.Fatal("decoded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if err := Check(tc.in); err == nil {
				t.Error("Check took it")
			}
		})
	}
}

func TestCheckLimit(t *testing.T) {
	big := make([]byte, 50000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32()) // incompressible
	}
	_, err := Encode([]Variable{{Name: "Big", GUID: GUID{1}, Attributes: 7, Data: big}})
	if err == nil || !strings.Contains(err.Error(), "over RegisterImage's limit of 64000") {
		t.Fatalf("Encode of a store over the limit: %v", err)
	}
	long := bytes.Repeat([]byte("A"), MaxEncodedLen+4)
	if err := Check(long); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Check of %d bytes: %v", len(long), err)
	}
}

func TestEncodeRejectsBadName(t *testing.T) {
	for _, name := range []string{"", "\xff"} {
		if _, err := Encode([]Variable{{Name: name, Attributes: 7}}); err == nil {
			t.Errorf("Encode took name %q", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	good, err := Encode(testVars(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(readFile(f, "python-uefivars-t02.aws"))
	f.Add([]byte(""))
	f.Add([]byte("QU1aTlVFRkk="))
	small, _ := Encode([]Variable{{Name: "X", GUID: GUID{1}, Attributes: AttrSecureBootKey, Data: []byte{1, 2}}})
	f.Add(small)
	f.Fuzz(func(t *testing.T, in []byte) {
		vars, err := Decode(in)
		if err != nil {
			return
		}
		// Whatever decodes encodes again to the same variables.
		b, err := Encode(vars)
		if err != nil {
			if strings.Contains(err.Error(), "limit") {
				return
			}
			t.Fatalf("decoded store does not encode: %v", err)
		}
		back, err := Decode(b)
		if err != nil {
			t.Fatalf("re-encoded store does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(vars)) {
			t.Fatal("re-encoded store differs")
		}
	})
}

// normalize makes empty and nil data alike.
func normalize(vs []Variable) []Variable {
	out := make([]Variable, len(vs))
	for i, v := range vs {
		if len(v.Data) == 0 {
			v.Data = nil
		}
		out[i] = v
	}
	return out
}
