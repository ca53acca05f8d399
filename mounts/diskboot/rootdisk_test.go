package diskboot

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// blockFixture writes a class/block directory: each entry maps a device
// name to its files (relative path → content).
func blockFixture(t *testing.T, devs map[string]map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, files := range devs {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, content := range files {
			p := filepath.Join(dir, name, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// The root disk is the whole disk whose serial matches, as virtio-blk
// (<disk>/serial) or NVMe (<disk>/device/serial, space-padded) shows it;
// partitions and other disks are not.
func TestFindSerial(t *testing.T) {
	for _, c := range []struct {
		name string
		devs map[string]map[string]string
		want []string
	}{
		{"virtio", map[string]map[string]string{
			"vda":       {"serial": "berth-root\n"},
			"vdb":       {"serial": "berth-disk-0\n"},
			"nvme0n1":   {"device/serial": "berth-nvme-0        \n"},
			"nvme0n1p1": {"partition": "1\n"},
			"loop0":     {},
		}, []string{"/dev/vda"}},
		{"nvme", map[string]map[string]string{
			"nvme1n1": {"device/serial": "berth-root          \n"},
		}, []string{"/dev/nvme1n1"}},
		{"a prefix is not a match", map[string]map[string]string{
			"vda": {"serial": "berth-root-disk\n"},
		}, nil},
		{"two", map[string]map[string]string{
			"vdb": {"serial": "berth-root"},
			"vda": {"serial": "berth-root"},
		}, []string{"/dev/vda", "/dev/vdb"}},
	} {
		got, err := FindSerial(blockFixture(t, c.devs), "berth-root")
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// Without its disk, a direct-kernel boot stops with an error that names
// the serial and says how to attach the disk or boot without it; two
// disks with the serial are refused at once.
func TestWaitSerialErrors(t *testing.T) {
	ctx := context.Background()
	_, err := WaitSerial(ctx, blockFixture(t, nil), "berth-root", 100*time.Millisecond)
	if err == nil {
		t.Fatal("no disk: want an error")
	}
	for _, want := range []string{"serial berth-root", "readonly=on", "serial=berth-root", "berth.root=none"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no disk: %v; want it to say %q", err, want)
		}
	}
	two := blockFixture(t, map[string]map[string]string{"vda": {"serial": "berth-root"}, "vdb": {"serial": "berth-root"}})
	start := time.Now()
	_, err = WaitSerial(ctx, two, "berth-root", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "2 disks with serial berth-root (/dev/vda, /dev/vdb)") {
		t.Errorf("two disks: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("two disks: refused after %s; want at once", d)
	}
	if _, err := FindSerial(filepath.Join(t.TempDir(), "missing"), "berth-root"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing class/block: %v", err)
	}
}

// A root disk with malformed verity parameters is refused before any
// module is loaded or disk looked for, as a disk boot's is.
func TestRootDiskRefusesBadParam(t *testing.T) {
	loaded := false
	res, err := SwitchRoot(context.Background(), nil, Options{
		Verity: "sha256:abc", Serial: "berth-root", ClassBlock: t.TempDir(),
		LoadModules: func(context.Context, ...string) error { loaded = true; return nil },
	})
	if err == nil || !strings.Contains(err.Error(), "refusing to boot an unverifiable root") || res != nil || loaded {
		t.Errorf("err %v, result %+v, modules loaded %v; want a refusal with nothing done", err, res, loaded)
	}
}

// The verity root's readahead is raised through sysfs; a device without
// the attribute is left alone (only speed is lost).
func TestSetReadahead(t *testing.T) {
	cb := blockFixture(t, map[string]map[string]string{"dm-0": {"queue/read_ahead_kb": "128\n"}})
	setReadahead(slog.New(slog.DiscardHandler), cb, "/dev/dm-0")
	if b, _ := os.ReadFile(filepath.Join(cb, "dm-0/queue/read_ahead_kb")); string(b) != "4096" {
		t.Errorf("read_ahead_kb %q, want 4096", b)
	}
	setReadahead(slog.New(slog.DiscardHandler), cb, "/dev/dm-9")
	if _, err := os.Stat(filepath.Join(cb, "dm-9")); err == nil {
		t.Error("setReadahead made a sysfs directory for a device that has none")
	}
}
