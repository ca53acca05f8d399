package apply

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/disk"
)

// scan streams b through a scanner in chunks of size.
func scan(b []byte, chunk int, stop bool) (ukiInfo, int64, error) {
	s := newUKIScanner(stop)
	for len(b) > 0 {
		k := min(chunk, len(b))
		if _, err := s.Write(b[:k]); err != nil {
			if errors.Is(err, errEnough) {
				break
			}
			return ukiInfo{}, s.n, err
		}
		b = b[k:]
	}
	info, err := s.info()
	return info, s.n, err
}

// TestScanBuiltUKI reads UKIs image/disk/uki built with systemd's stubs
// and objcopy, for both architectures, in chunks of any size.
func TestScanBuiltUKI(t *testing.T) {
	cmd := "console=ttyS0 berth.slot=b berth.verity=sha256:" + strings.Repeat("ab", 32) + ":-:300:300"
	for _, c := range []struct {
		arch    string
		machine uint16
	}{{"amd64", pe.IMAGE_FILE_MACHINE_AMD64}, {"arm64", pe.IMAGE_FILE_MACHINE_ARM64}} {
		b := buildUKI(t, ukiSpec{arch: c.arch, cmdline: cmd, osrel: disk.OSRelease("2.0")})
		want := ukiInfo{Machine: c.machine, Cmdline: cmd, OSRel: disk.OSRelease("2.0")}
		for _, chunk := range []int{1, 7, 512, 4096, 32 << 10, len(b)} {
			got, n, err := scan(b, chunk, false)
			if err != nil || got != want || n != int64(len(b)) {
				t.Fatalf("%s in %d-byte writes: %+v after %d bytes, %v; want %+v", c.arch, chunk, got, n, err, want)
			}
			got, n, err = scan(b, chunk, true)
			if err != nil || got != want || (chunk < len(b)/2 && n >= int64(len(b))/2) {
				t.Errorf("%s, stopping early, in %d-byte writes: %+v after %d of %d bytes, %v", c.arch, chunk, got, n, len(b), err)
			}
		}
		if v, ok := osReleaseValue(want.OSRel, "VERSION_ID"); !ok || v != "2.0" {
			t.Errorf("VERSION_ID of image/disk's os-release = %q, %v", v, ok)
		}
	}
}

// peSection is a section of a PE file makePE writes.
type peSection struct {
	name  string
	data  []byte
	vsize int // len(data) when 0
}

// makePE writes a minimal PE32+ file: the DOS header, the PE signature,
// the COFF and optional headers, the section table, and each section's
// data at a 512-byte boundary.
func makePE(machine uint16, secs []peSection) []byte {
	const optSize, fileAlign = 240, 512
	align := func(n, a int) int { return (n + a - 1) / a * a }
	table := 0x40 + 4 + 20 + optSize
	hdr := align(table+40*len(secs), fileAlign)
	b := make([]byte, hdr)
	b[0], b[1] = 'M', 'Z'
	binary.LittleEndian.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	coff := b[0x44:]
	binary.LittleEndian.PutUint16(coff[0:], machine)
	binary.LittleEndian.PutUint16(coff[2:], uint16(len(secs)))
	binary.LittleEndian.PutUint16(coff[16:], optSize)
	binary.LittleEndian.PutUint16(coff[18:], 0x22)
	opt := b[0x58:]
	binary.LittleEndian.PutUint16(opt[0:], 0x20b)
	binary.LittleEndian.PutUint32(opt[32:], 4096)
	binary.LittleEndian.PutUint32(opt[36:], fileAlign)
	binary.LittleEndian.PutUint32(opt[60:], uint32(hdr))
	binary.LittleEndian.PutUint32(opt[108:], 16)
	va, ptr := 4096, hdr
	for i, s := range secs {
		sh := b[table+40*i:]
		copy(sh[:8], s.name)
		vs := s.vsize
		if vs == 0 {
			vs = len(s.data)
		}
		raw := align(len(s.data), fileAlign)
		binary.LittleEndian.PutUint32(sh[8:], uint32(vs))
		binary.LittleEndian.PutUint32(sh[12:], uint32(va))
		binary.LittleEndian.PutUint32(sh[16:], uint32(raw))
		binary.LittleEndian.PutUint32(sh[20:], uint32(ptr))
		binary.LittleEndian.PutUint32(sh[36:], 0x40000040)
		va += align(max(vs, 1), 4096)
		ptr += raw
	}
	binary.LittleEndian.PutUint32(opt[56:], uint32(va))
	for _, s := range secs {
		b = append(b, s.data...)
		b = append(b, make([]byte, align(len(s.data), fileAlign)-len(s.data))...)
	}
	return b
}

func TestScanMadePE(t *testing.T) {
	text := peSection{".text", bytes.Repeat([]byte{0xcc}, 3000), 0}
	osrel := peSection{".osrel", []byte("ID=berth\nVERSION_ID=\"2.0\"\n"), 0}
	cmd := peSection{".cmdline", []byte("berth.slot=b quiet\n\x00junk"), 0}
	linux := peSection{".linux", bytes.Repeat([]byte{1}, 9000), 0}
	good := makePE(0x8664, []peSection{text, osrel, cmd, linux})
	if f, err := pe.NewFile(bytes.NewReader(good)); err != nil || len(f.Sections) != 4 {
		t.Fatalf("debug/pe cannot read makePE's file: %v", err)
	}
	got, _, err := scan(good, 100, true)
	if want := (ukiInfo{Machine: 0x8664, Cmdline: "berth.slot=b quiet", OSRel: string(osrel.data)}); err != nil || got != want {
		t.Fatalf("scan = %+v, %v; want %+v", got, err, want)
	}
	// VirtualSize shorter than the file's part: the content is that long.
	short := makePE(0x8664, []peSection{{".cmdline", []byte("berth.slot=b quiet"), 12}, osrel})
	if got, _, err := scan(short, 4096, false); err != nil || got.Cmdline != "berth.slot=b" {
		t.Errorf("VirtualSize 12: cmdline %q, %v", got.Cmdline, err)
	}
	// A section whose data is inside the headers read first.
	inHdr := makePE(0x8664, []peSection{osrel, cmd})
	binary.LittleEndian.PutUint32(inHdr[0x40+4+20+240+40+20:], 0x40) // .cmdline's data: the PE signature onwards
	binary.LittleEndian.PutUint32(inHdr[0x40+4+20+240+40+8:], 4)
	if got, _, err := scan(inHdr, 1<<20, false); err != nil || got.Cmdline != "PE" {
		t.Errorf("a section inside the headers: %+v, %v", got, err)
	}

	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "it ends after 0 bytes, inside its headers"},
		{"not MZ", []byte("ELF and more"), "no MZ header"},
		{"not MZ, long", append([]byte("\x7fELF"), make([]byte, 100)...), "no MZ header"},
		{"short", good[:100], "it ends after 100 bytes, inside its headers"},
		{"no PE signature", func() []byte { b := bytes.Clone(good); b[0x41] = 'X'; return b }(), "no PE signature at byte 64"},
		{"PE header far away", func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[0x3c:], 1<<20)
			return b
		}(), "PE header at byte 1048576: past the first 65536 bytes"},
		{"too many sections", func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint16(b[0x46:], 200)
			return b
		}(), "200 sections: the PE format allows 96"},
		{"table past 64 KiB", func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint16(b[0x54:], 65500)
			return b
		}(), "section table ends at byte"},
		{"no cmdline", makePE(0x8664, []peSection{text, osrel}), "no .cmdline section"},
		{"no osrel", makePE(0x8664, []peSection{cmd}), "no .osrel section"},
		{"two cmdlines", makePE(0x8664, []peSection{cmd, osrel, cmd}), "two .cmdline sections"},
		{"huge cmdline", makePE(0x8664, []peSection{{".cmdline", make([]byte, 70000), 0}, osrel}), "section .cmdline of 70000 bytes: at most 65536"},
		{"ends inside a section", good[:4100], "the UKI ends at byte 4100, inside its .cmdline section (bytes 4096 to 4120)"},
	} {
		if _, _, err := scan(c.b, 333, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

func TestOSReleaseValue(t *testing.T) {
	for _, c := range []struct {
		text, want string
		ok         bool
	}{
		{"VERSION_ID=2.0\n", "2.0", true},
		{`VERSION_ID="2.0"`, "2.0", true},
		{`VERSION_ID='2.0'`, "2.0", true},
		{`VERSION_ID="a \"b\" \\ \$c"`, `a "b" \ $c`, true},
		{"  VERSION_ID=2.0  \r\n", "2.0", true},
		{"VERSION_ID=1\nVERSION_ID=2\n", "2", true},
		{"# VERSION_ID=2.0\nID=berth", "", false},
		{"VERSION=2.0\nVERSION_ID_LIKE=3", "", false},
		{"VERSION_ID=", "", true},
		{`VERSION_ID="`, `"`, true},
		{"", "", false},
	} {
		if got, ok := osReleaseValue(c.text, "VERSION_ID"); got != c.want || ok != c.ok {
			t.Errorf("osReleaseValue(%q) = %q, %v; want %q, %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

// FuzzScanUKI: the scanner never panics, reads the same in any chunking,
// stops early with the same result, and agrees with debug/pe on every
// file both can read.
func FuzzScanUKI(f *testing.F) {
	osrel := peSection{".osrel", []byte("VERSION_ID=2.0\n"), 0}
	cmd := peSection{".cmdline", []byte("berth.slot=b"), 0}
	f.Add(makePE(0x8664, []peSection{osrel, cmd}), uint16(7))
	f.Add(makePE(0xaa64, []peSection{{".text", make([]byte, 700), 0}, cmd, osrel, {".linux", make([]byte, 1300), 0}}), uint16(512))
	f.Add(makePE(0x8664, []peSection{{".cmdline", []byte("x"), 40}, osrel}), uint16(1))
	f.Add(makePE(0x8664, []peSection{cmd, cmd}), uint16(64))
	f.Add([]byte("MZ"), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint16) {
		whole, n, err := scan(b, len(b)+1, false)
		if err == nil && n != int64(len(b)) {
			t.Fatalf("read %d of %d bytes", n, len(b))
		}
		parts, _, perr := scan(b, int(chunk%4096)+1, false)
		if (err == nil) != (perr == nil) || parts != whole {
			t.Fatalf("whole: %+v, %v; in %d-byte writes: %+v, %v", whole, err, chunk%4096+1, parts, perr)
		}
		early, _, eerr := scan(b, int(chunk%4096)+1, true)
		if (err == nil) != (eerr == nil) || early != whole {
			t.Fatalf("whole: %+v, %v; stopping early: %+v, %v", whole, err, early, eerr)
		}
		if err != nil {
			return
		}
		pf, err := pe.NewFile(bytes.NewReader(b))
		if err != nil {
			return
		}
		if pf.Machine != whole.Machine {
			t.Fatalf("machine %#x, debug/pe %#x", whole.Machine, pf.Machine)
		}
		for _, s := range pf.Sections {
			if s.Name != sectionCmdline {
				continue
			}
			d, err := s.Data()
			if err != nil {
				return
			}
			size := min(int(s.VirtualSize), len(d))
			if s.VirtualSize == 0 {
				size = len(d)
			}
			if want := strings.TrimSpace(cutNUL(d[:size])); want != whole.Cmdline {
				t.Fatalf("cmdline %q, debug/pe %q", whole.Cmdline, want)
			}
		}
	})
}

// FuzzOSReleaseValue: no panic, and a plain value reads back.
func FuzzOSReleaseValue(f *testing.F) {
	f.Add("ID=berth\nVERSION_ID=\"0.3.1\"\n", "2.0")
	f.Add("VERSION_ID='x'\n# c\n", "a b")
	f.Add(`VERSION_ID="\`, "")
	f.Fuzz(func(t *testing.T, text, v string) {
		osReleaseValue(text, "VERSION_ID")
		if strings.ContainsAny(v, "\n\r\"'\\ \t\v\f") || v == "" {
			return
		}
		if got, ok := osReleaseValue(text+"\nVERSION_ID="+v+"\n", "VERSION_ID"); !ok || got != v {
			t.Fatalf("VERSION_ID=%s after %q reads %q, %v", v, text, got, ok)
		}
	})
}
