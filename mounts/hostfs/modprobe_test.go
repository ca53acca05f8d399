package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts"
)

func TestWithoutModprobe(t *testing.T) {
	knob := filepath.Join(t.TempDir(), "modprobe")
	if err := os.WriteFile(knob, []byte("/sbin/modprobe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mounts.Mount{Source: "bpf", Target: "/sys/fs/bpf", FSType: "bpf"}
	var during string
	err := withoutModprobe(knob, m, func(mounts.Mount) error {
		b, _ := os.ReadFile(knob)
		during = string(b)
		return errors.New("mounting bpf: no such device")
	})
	if err == nil || err.Error() != "mounting bpf: no such device" {
		t.Errorf("err = %v, want the mount's own error", err)
	}
	if strings.TrimSpace(during) != "" {
		t.Errorf("the knob held %q during the mount, want it empty", during)
	}
	if b, _ := os.ReadFile(knob); string(b) != "/sbin/modprobe\n" {
		t.Errorf("the knob holds %q after, want /sbin/modprobe put back", b)
	}
}

func TestWithoutModprobeLeavesAnEmptyKnob(t *testing.T) {
	knob := filepath.Join(t.TempDir(), "modprobe")
	if err := os.WriteFile(knob, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounted := false
	if err := withoutModprobe(knob, mounts.Mount{}, func(mounts.Mount) error { mounted = true; return nil }); err != nil || !mounted {
		t.Errorf("mounted %v, err %v; want mounted", mounted, err)
	}
	if b, _ := os.ReadFile(knob); string(b) != "\n" {
		t.Errorf("knob %q: autoloading was off and must stay so", b)
	}
}

func TestWithoutModprobeNoKnob(t *testing.T) {
	mounted := false
	err := withoutModprobe(filepath.Join(t.TempDir(), "none"), mounts.Mount{}, func(mounts.Mount) error { mounted = true; return nil })
	if err != nil || !mounted {
		t.Errorf("without a knob: mounted %v, err %v; want the mount done as usual", mounted, err)
	}
}

func TestWithoutModprobeCannotRestore(t *testing.T) {
	dir := t.TempDir()
	knob := filepath.Join(dir, "modprobe")
	if err := os.WriteFile(knob, []byte("/sbin/modprobe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The mount replaces the knob with a directory: the write back fails.
	err := withoutModprobe(knob, mounts.Mount{Target: "/sys/fs/bpf"}, func(mounts.Mount) error {
		if err := os.Remove(knob); err != nil {
			return err
		}
		return os.Mkdir(knob, 0o755)
	})
	if err == nil || !strings.Contains(err.Error(), "restoring "+knob+` to "/sbin/modprobe"`) {
		t.Errorf("err = %v, want one saying the knob was not put back", err)
	}
}
