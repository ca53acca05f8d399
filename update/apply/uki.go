package apply

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Section names systemd-stub reads the command line and os-release from
// (image/disk/uki adds them).
const (
	sectionCmdline = ".cmdline"
	sectionOSRel   = ".osrel"
)

// Bounds on what a UKI may make the scanner hold: its headers and section
// table must come in the first 64 KiB (objcopy's are under 1 KiB), and the
// two sections it keeps are a few hundred bytes (the kernel takes a
// command line of at most a few KiB).
const (
	maxPEHeader = 64 << 10
	maxSection  = 64 << 10
	maxSections = 96 // the PE format's limit
)

// PE machines of the architectures berth builds UKIs for.
var peMachines = map[string]uint16{"amd64": 0x8664, "arm64": 0xaa64}

// ukiInfo is what Apply reads from a UKI: the PE machine, the command
// line (.cmdline, up to its first NUL) and the os-release (.osrel).
type ukiInfo struct {
	Machine uint16
	Cmdline string
	OSRel   string
}

// errEnough stops a fetch once the scanner has what it needs.
var errEnough = errors.New("the UKI's headers and sections are read")

// ukiScanner is an io.Writer a UKI streams through: it keeps the PE
// headers until it has the section table, then only the bytes of the
// .cmdline and .osrel sections, so its memory is bounded whatever the
// UKI's size. With stop set it fails the write that completes both
// sections with errEnough, to end a fetch early.
type ukiScanner struct {
	stop    bool
	n       int64 // bytes seen
	hdr     []byte
	parsed  bool
	machine uint16
	secs    [2]section
	err     error
}

// section is one section the scanner keeps.
type section struct {
	name   string
	found  bool
	off    int64
	data   []byte
	filled int // bytes of data written so far, from its start
}

func newUKIScanner(stop bool) *ukiScanner {
	return &ukiScanner{stop: stop, secs: [2]section{{name: sectionCmdline}, {name: sectionOSRel}}}
}

func (s *ukiScanner) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	start := s.n
	s.n += int64(len(p))
	if !s.parsed {
		s.hdr = append(s.hdr, p[:min(len(p), maxPEHeader-len(s.hdr))]...)
		if err := s.parseHeaders(); err != nil {
			s.err = fmt.Errorf("reading the UKI's PE headers: %w", err)
			return 0, s.err
		}
		if !s.parsed {
			return len(p), nil
		}
		// A section may start inside the headers read so far.
		s.collect(0, s.hdr)
		s.hdr = nil
	}
	s.collect(start, p)
	if s.stop && s.complete() {
		return len(p), errEnough
	}
	return len(p), nil
}

// parseHeaders parses the DOS stub, PE signature, COFF header and section
// table once hdr holds them; it sets parsed when it has, and fails for
// what is not a PE file or puts its table past maxPEHeader.
func (s *ukiScanner) parseHeaders() error {
	h := s.hdr
	full := len(h) >= maxPEHeader
	if len(h) < 0x40 {
		if len(h) >= 2 && (h[0] != 'M' || h[1] != 'Z') {
			return errors.New("not a PE file: no MZ header")
		}
		return nil
	}
	if h[0] != 'M' || h[1] != 'Z' {
		return errors.New("not a PE file: no MZ header")
	}
	pe := int64(binary.LittleEndian.Uint32(h[0x3c:]))
	if pe+24 > maxPEHeader {
		return fmt.Errorf("PE header at byte %d: past the first %d bytes", pe, maxPEHeader)
	}
	if int64(len(h)) < pe+24 {
		return s.short(full)
	}
	if !bytes.Equal(h[pe:pe+4], []byte("PE\x00\x00")) {
		return fmt.Errorf("not a PE file: no PE signature at byte %d", pe)
	}
	machine := binary.LittleEndian.Uint16(h[pe+4:])
	nsec := int64(binary.LittleEndian.Uint16(h[pe+6:]))
	optSize := int64(binary.LittleEndian.Uint16(h[pe+20:]))
	if nsec > maxSections {
		return fmt.Errorf("%d sections: the PE format allows %d", nsec, maxSections)
	}
	table := pe + 24 + optSize
	end := table + nsec*40
	if end > maxPEHeader {
		return fmt.Errorf("section table ends at byte %d: past the first %d bytes", end, maxPEHeader)
	}
	if int64(len(h)) < end {
		return s.short(full)
	}
	for i := range nsec {
		sh := h[table+i*40 : table+(i+1)*40]
		name := string(sh[:8])
		if k := strings.IndexByte(name, 0); k >= 0 {
			name = name[:k]
		}
		vsize := int64(binary.LittleEndian.Uint32(sh[8:]))
		rawSize := int64(binary.LittleEndian.Uint32(sh[16:]))
		rawPtr := int64(binary.LittleEndian.Uint32(sh[20:]))
		for k := range s.secs {
			sec := &s.secs[k]
			if name != sec.name {
				continue
			}
			if sec.found {
				return fmt.Errorf("two %s sections", name)
			}
			// VirtualSize is the content's size; the file holds it
			// rounded up to FileAlignment (SizeOfRawData). Past the
			// file's part the loader fills zeros, where a command line
			// or os-release ends anyway.
			size := vsize
			if size == 0 || size > rawSize {
				size = rawSize
			}
			if size > maxSection {
				return fmt.Errorf("section %s of %d bytes: at most %d", name, size, maxSection)
			}
			sec.found, sec.off, sec.data = true, rawPtr, make([]byte, size)
		}
	}
	s.machine, s.parsed = machine, true
	return nil
}

// short is what parseHeaders says when hdr ends before what it needs.
func (s *ukiScanner) short(full bool) error {
	if full {
		return fmt.Errorf("headers longer than %d bytes", maxPEHeader)
	}
	return nil
}

// collect copies what of each kept section lies in p, which starts at
// byte at of the UKI. Copies land by position, so seeing a byte twice
// is harmless.
func (s *ukiScanner) collect(at int64, p []byte) {
	for k := range s.secs {
		sec := &s.secs[k]
		if !sec.found {
			continue
		}
		lo := max(at, sec.off)
		hi := min(at+int64(len(p)), sec.off+int64(len(sec.data)))
		if lo >= hi {
			continue
		}
		copy(sec.data[lo-sec.off:], p[lo-at:hi-at])
		sec.filled = max(sec.filled, int(hi-sec.off))
	}
}

// complete says the headers and both sections are read.
func (s *ukiScanner) complete() bool {
	if !s.parsed {
		return false
	}
	for _, sec := range s.secs {
		if !sec.found || sec.filled < len(sec.data) {
			return false
		}
	}
	return true
}

// info is what the scanner found, or why it is not a UKI berth can check.
func (s *ukiScanner) info() (ukiInfo, error) {
	if s.err != nil {
		return ukiInfo{}, s.err
	}
	if !s.parsed {
		return ukiInfo{}, fmt.Errorf("not a PE file: it ends after %d bytes, inside its headers", s.n)
	}
	for _, sec := range s.secs {
		switch {
		case !sec.found:
			return ukiInfo{}, fmt.Errorf("the UKI has no %s section", sec.name)
		case sec.filled < len(sec.data):
			return ukiInfo{}, fmt.Errorf("the UKI ends at byte %d, inside its %s section (bytes %d to %d)", s.n, sec.name, sec.off, sec.off+int64(len(sec.data)))
		}
	}
	return ukiInfo{Machine: s.machine, Cmdline: strings.TrimSpace(cutNUL(s.secs[0].data)), OSRel: cutNUL(s.secs[1].data)}, nil
}

func cutNUL(b []byte) string {
	if k := bytes.IndexByte(b, 0); k >= 0 {
		b = b[:k]
	}
	return string(b)
}

// osReleaseValue is key's value in an os-release file (os-release(5)):
// KEY=VALUE lines, the value optionally in single or double quotes, with
// backslash escapes inside double quotes; comments and blank lines
// skipped. As in the shell that may source it, the last assignment wins.
// It reports whether key is assigned at all.
func osReleaseValue(text, key string) (string, bool) {
	val, found := "", false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") || k != key {
			continue
		}
		val, found = unquoteOSRelease(v), true
	}
	return val, found
}

func unquoteOSRelease(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return v[1 : len(v)-1]
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	in := v[1 : len(v)-1]
	for i := 0; i < len(in); i++ {
		if in[i] == '\\' && i+1 < len(in) && strings.IndexByte("\"\\$`", in[i+1]) >= 0 {
			i++
		}
		b.WriteByte(in[i])
	}
	return b.String()
}
