package verity

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
)

const root = "4813494d137e1631bba301d5acab6e7b0c1e2f3a4b5c6d7e8f90a1b2c3d4e5f6"

// TestTable checks the exact line the kernel's verity target parses
// (Documentation/admin-guide/device-mapper/verity.rst), for the one-device
// layout berth's image uses and a separate hash device, in each mode.
func TestTable(t *testing.T) {
	for _, c := range []struct {
		p    Params
		want string
	}{
		{Params{DataDev: "259:2", HashDev: "259:2", DataBlocks: 51200, HashStartBlock: 51201, RootHash: strings.ToUpper(root), Salt: "00ff"},
			"0 409600 verity 1 259:2 259:2 4096 4096 51200 51201 sha256 " + root + " 00ff"},
		{Params{DataDev: "/dev/vda", HashDev: "/dev/vdb", DataBlocks: 1, HashStartBlock: 0, RootHash: root, Salt: "-", Mode: ModePanic},
			"0 8 verity 1 /dev/vda /dev/vdb 4096 4096 1 0 sha256 " + root + " - 1 panic_on_corruption"},
		{Params{DataDev: "8:1", HashDev: "8:2", DataBlocks: 10, RootHash: root, Salt: "ab", Mode: ModeRestart},
			"0 80 verity 1 8:1 8:2 4096 4096 10 0 sha256 " + root + " ab 1 restart_on_corruption"},
	} {
		tg, err := Table(c.p)
		if err != nil {
			t.Fatalf("%+v: %v", c.p, err)
		}
		if tg.String() != c.want {
			t.Errorf("table\n%s\nwant\n%s", tg, c.want)
		}
	}
}

func TestTableRejects(t *testing.T) {
	ok := Params{DataDev: "8:1", HashDev: "8:1", DataBlocks: 10, HashStartBlock: 10, RootHash: root, Salt: "ab"}
	if _, err := Table(ok); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Params){
		"tree over data":  func(p *Params) { p.HashStartBlock = 9 },
		"no blocks":       func(p *Params) { p.DataBlocks = 0 },
		"short root hash": func(p *Params) { p.RootHash = root[:62] },
		"non-hex root":    func(p *Params) { p.RootHash = "zz" + root[2:] },
		"odd salt":        func(p *Params) { p.Salt = "abc" },
		"empty salt":      func(p *Params) { p.Salt = "" },
		"space in dev":    func(p *Params) { p.DataDev = "8:1 x" },
		"empty hash dev":  func(p *Params) { p.HashDev = "" },
		"unknown mode":    func(p *Params) { p.Mode = "ignore_corruption" },
	} {
		p := ok
		mut(&p)
		if _, err := Table(p); err == nil {
			t.Errorf("%s: accepted %+v", name, p)
		}
	}
}

func TestParam(t *testing.T) {
	p := Param{DataBlocks: 51200, HashStartBlock: 51201, RootHash: root, Salt: "00ff"}
	s := p.String()
	if s != "sha256:"+root+":00ff:51200:51201" {
		t.Fatalf("encoded %q", s)
	}
	got, err := ParseParam(s)
	if err != nil || got != p {
		t.Fatalf("ParseParam(%q) = %+v, %v", s, got, err)
	}
	tg, err := Table(got.On("259:2"))
	if err != nil || !strings.HasPrefix(tg.String(), "0 409600 verity 1 259:2 259:2 ") {
		t.Fatalf("table %v, %v", tg, err)
	}
	for _, bad := range []string{"", "sha1:" + root + ":00:1:1", "sha256:" + root + ":00:1", "sha256:" + root + ":00:x:2",
		"sha256:" + root + ":00:5:4", "sha256:" + root + "::1:1", "sha256:" + root + ":00:1:2:3"} {
		if _, err := ParseParam(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseParam(f *testing.F) {
	f.Add("sha256:" + root + ":00ff:51200:51201")
	f.Add("sha256:" + root + ":-:1:1")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseParam(s)
		if err != nil {
			return
		}
		again, err := ParseParam(p.String())
		if err != nil || again != p {
			t.Fatalf("%q parsed to %+v, which re-parses to %+v, %v", s, p, again, err)
		}
	})
}

// failAt is a device whose reads fail with EIO from byte bad on, as a
// verity device does at a tampered block.
type failAt struct{ size, bad int64 }

func (f failAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), f.size)
	if off <= f.bad && f.bad < end {
		return 0, syscall.EIO
	}
	n := int(end - off)
	if end == f.size {
		return n, io.EOF
	}
	return n, nil
}

func TestReadAll(t *testing.T) {
	ctx := context.Background()
	if err := readAll(ctx, "dm-0", failAt{size: 3<<20 + 4096, bad: 1 << 62}); err != nil {
		t.Fatalf("clean device: %v", err)
	}
	err := readAll(ctx, "dm-0", failAt{size: 3 << 20, bad: 1<<20 + 5*4096 + 7})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != 1<<20+5*4096 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("got %v, want corruption at block %d", err, (1<<20+5*4096)/4096)
	}
	if !strings.Contains(err.Error(), "dm-verity: dm-0 is corrupted at byte 1069056 (block 261)") {
		t.Fatalf("message %q", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := readAll(cctx, "dm-0", failAt{size: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
