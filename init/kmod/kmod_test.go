package kmod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func fixture(t *testing.T) *Index {
	t.Helper()
	ix, err := LoadIndex("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestParseDepErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"kernel/a.ko: kernel/b.ko\nno colon here\n", "line 2"},
		{": kernel/b.ko\n", "line 1"},
		{"kernel/a.txt:\n", `"kernel/a.txt" is not a .ko file`},
		{"kernel/a.ko: b.txt\n", `dependency "b.txt" of kernel/a.ko`},
	} {
		_, err := ParseDep(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseDep(%q) error = %v, want one containing %q", c.in, err, c.want)
		}
	}
	_, err := ParseAlias(strings.NewReader("alias a b\nalias onlytwo\n"))
	if err == nil || !strings.Contains(err.Error(), "modules.alias line 2") {
		t.Errorf("ParseAlias error = %v, want one naming line 2", err)
	}
}

func TestLoadIndex(t *testing.T) {
	ix := fixture(t)
	if got, want := ix.Path("nvme-core"), filepath.Join("testdata", "kernel/drivers/nvme/host/nvme-core.ko"); got != want {
		t.Errorf("Path(nvme-core) = %q, want %q", got, want)
	}
	if ix.Path("nvme_core") != ix.Path("nvme-core") {
		t.Errorf("'-' and '_' must name the same module")
	}
	if !ix.Builtin("evdev") || ix.Builtin("loop") {
		t.Errorf("Builtin: evdev %v (want true), loop %v (want false)", ix.Builtin("evdev"), ix.Builtin("loop"))
	}
	if !reflect.DeepEqual(ix.Deps("nvme"), []string{"nvme_core"}) {
		t.Errorf("Deps(nvme) = %v", ix.Deps("nvme"))
	}
	if _, err := LoadIndex(t.TempDir()); err == nil || !strings.Contains(err.Error(), "modules.dep") {
		t.Errorf("LoadIndex of an empty dir: err = %v, want one naming modules.dep", err)
	}
}

func TestResolve(t *testing.T) {
	ix := fixture(t)
	for _, c := range []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{[]string{"virtio_net"}, []string{"failover", "net_failover", "virtio_ring", "virtio", "virtio_net"}, ""},
		// Shared dependencies come once, before their first user.
		{[]string{"virtio_net", "virtio_blk"}, []string{"failover", "net_failover", "virtio_ring", "virtio", "virtio_net", "virtio_blk"}, ""},
		{[]string{"virtio_blk", "virtio_net"}, []string{"virtio_ring", "virtio", "virtio_blk", "failover", "net_failover", "virtio_net"}, ""},
		{[]string{"nvme", "nvme-core"}, []string{"nvme_core", "nvme"}, ""},
		// Builtin modules are loaded already, as dependencies or asked for.
		{[]string{"loop", "evdev"}, []string{"loop"}, ""},
		// Soft dependencies come first, resolved through aliases: libcrc32c
		// wants "crc32c", which both implementations provide.
		{[]string{"xfs"}, []string{"crc32c_generic", "crc32c_intel", "libcrc32c", "xfs"}, ""},
		// Names may be aliases, as with modprobe.
		{[]string{"fs-erofs", "devname:loop-control"}, []string{"erofs", "loop"}, ""},
		// A cycle is cut, not followed forever.
		{[]string{"cyc_a"}, []string{"cyc_b", "cyc_a"}, ""},
		// Unknown names are reported; the rest still resolve.
		{[]string{"loop", "nosuch", "erofs"}, []string{"loop", "erofs"}, "nosuch"},
		{[]string{"broken"}, []string{"broken"}, "not_shipped (needed by broken)"},
	} {
		got, err := ix.Resolve(c.names...)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Resolve(%v) = %v, want %v", c.names, got, c.want)
		}
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("Resolve(%v): unexpected error %v", c.names, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("Resolve(%v): error %v, want one naming %q", c.names, err, c.wantErr)
		}
	}
}

func TestMatch(t *testing.T) {
	ix := fixture(t)
	for _, c := range []struct {
		modalias string
		want     []string
	}{
		{"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00", []string{"virtio_pci"}},
		{"virtio:d00000001v00001AF4", []string{"virtio_net"}},
		{"pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02", []string{"nvme"}},
		{"acpi:LNXPWRBN:", []string{"button"}},
		{"pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00", nil},
		{"cpu:type:x86,ven0000fam0006mod003F:feature:,0000", nil},
	} {
		if got := ix.Match(c.modalias); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Match(%q) = %v, want %v", c.modalias, got, c.want)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"pci:v00001AF4d00001000sv*sd*bc*sc*i*", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00", true},
		{"pci:v00001AF4d00001000sv*sd*bc*sc*i*", "pci:v00001AF4d00001041sv00001AF4sd00000001bc02sc00i00", false},
		{"acpi*:LNXPWRBN:*", "acpi:LNXPWRBN:", true},
		{"acpi*:LNXPWRBN:*", "acpi:LNXPWRBX:", false},
		{"of:N*T*Cfoo/bar*", "of:NxTyCfoo/bar", true}, // '/' is an ordinary byte
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"usb:v*p*d*dc*dsc*dp*ic08isc0[1-6]ip50in*", "usb:v1p2d3dc0dsc0dp0ic08isc06ip50in00", true},
		{"usb:v*p*d*dc*dsc*dp*ic08isc0[1-6]ip50in*", "usb:v1p2d3dc0dsc0dp0ic08isc07ip50in00", false},
		{"x[!0-9]", "xa", true},
		{"x[!0-9]", "x5", false},
		{"x[]]", "x]", true},
		{"x[abc", "x[abc", true}, // unclosed class: literal '['
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
		{"**a**", "bab", true},
	} {
		if got := Glob(c.pattern, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// fakeSysfs is a sysfs tree in a temp dir, with a loader that records what
// it loads and can make devices appear, as bus drivers do.
type fakeSysfs struct {
	t      *testing.T
	root   string
	ix     *Index
	mu     sync.Mutex
	loaded []string
	onLoad map[string]func() // by module name
	fail   map[string]error
	// finished are the modules whose load returned; early lists loads
	// that started before a dependency had finished; inFlight and
	// maxInFlight count concurrent loads; hold, if set, is how long each
	// load takes.
	finished    map[string]bool
	early       []string
	inFlight    int
	maxInFlight int
	hold        time.Duration
}

func newFakeSysfs(t *testing.T, ix *Index, devices map[string]string) *fakeSysfs {
	f := &fakeSysfs{t: t, root: t.TempDir(), ix: ix, onLoad: map[string]func(){}, fail: map[string]error{}, finished: map[string]bool{}}
	for dir, alias := range devices {
		f.addDevice(dir, alias)
	}
	return f
}

// addDevice adds a device under devices/DIR and, as the kernel does, links
// it from its bus (or, for a class device, its class) directory, except
// for the CPU, whose modalias sits in devices/system/cpu.
func (f *fakeSysfs) addDevice(dir, modalias string) {
	p := filepath.Join(f.root, "devices", dir)
	if err := os.MkdirAll(p, 0o755); err != nil {
		f.t.Error(err)
		return
	}
	if err := os.WriteFile(filepath.Join(p, "modalias"), []byte(modalias+"\n"), 0o644); err != nil {
		f.t.Error(err)
	}
	if dir == "system/cpu" {
		return
	}
	link := filepath.Join(f.root, "bus", "fake", "devices")
	if strings.HasPrefix(modalias, "input:") {
		link = filepath.Join(f.root, "class", "input")
	}
	if err := os.MkdirAll(link, 0o755); err != nil {
		f.t.Error(err)
		return
	}
	if err := os.Symlink(p, filepath.Join(link, strings.ReplaceAll(dir, "/", "!"))); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeSysfs) load(path string) error {
	name := Name(path)
	if path != f.ix.Path(name) {
		return fmt.Errorf("fake loader got %q, not the index's path for %s", path, name)
	}
	f.mu.Lock()
	for _, d := range f.ix.Deps(name) {
		if !f.finished[d] {
			f.early = append(f.early, name+" before "+d)
		}
	}
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	time.Sleep(f.hold)
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.finished[name] = true
		f.mu.Unlock()
	}()
	if err := f.fail[name]; err != nil {
		return err
	}
	f.mu.Lock()
	f.loaded = append(f.loaded, name)
	f.mu.Unlock()
	if fn := f.onLoad[name]; fn != nil {
		fn()
	}
	return nil
}

// checkOrder fails the test if a load started before one of its
// dependencies had finished loading.
func (f *fakeSysfs) checkOrder() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.early) > 0 {
		f.t.Errorf("modules loaded before their dependencies finished: %v", f.early)
	}
}

func (f *fakeSysfs) scan() ([]string, error) { return ScanModaliases(f.root) }

// src is the fallback device source: rescanning the fake sysfs.
func (f *fakeSysfs) src() deviceSource { return newPollSource(f.scan, testPolicy.Poll) }

var qemuDevices = map[string]string{
	"pci0000:00/0000:00:00.0":      "pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00",
	"pci0000:00/0000:00:02.0":      "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
	"pci0000:00/0000:00:03.0":      "pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02",
	"LNXSYSTM:00/LNXPWRBN:00":      "acpi:LNXPWRBN:",
	"platform/serial8250":          "platform:serial8250",
	"system/cpu":                   "cpu:type:x86,ven0000fam0006mod003F:feature:,0000",
	"pci0000:00/0000:00:01.1/ata1": "", // empty modalias: ignored
}

var testPolicy = coldplugPolicy{MaxPasses: 5, Settle: 500 * time.Millisecond, Poll: 10 * time.Millisecond, Timeout: 10 * time.Second}

// TestColdplugFollowsNewDevices checks that devices behind a bus driver
// (virtio-net behind virtio_pci) are found in a later pass, and that every
// module comes after its dependencies, each once.
func TestColdplugFollowsNewDevices(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, qemuDevices)
	f.onLoad["virtio_pci"] = func() { f.addDevice("pci0000:00/0000:00:02.0/virtio0", "virtio:d00000001v00001AF4") }
	s := newSession(ix, nil, f.load, map[string]bool{"loop": true})
	got, err := coldplug(context.Background(), s, f.src(), testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// pass 1, modules sorted: button, nvme, virtio_pci, each after its deps
		"button", "nvme_core", "nvme", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_ring", "virtio", "virtio_pci",
		// pass 2: the virtio device virtio_pci revealed
		"failover", "net_failover", "virtio_net",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	// Loads run concurrently, so the loader sees them in any order that
	// respects dependencies, each once.
	seen := append([]string(nil), f.loaded...)
	sort.Strings(seen)
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	if !reflect.DeepEqual(seen, sorted) {
		t.Errorf("loader saw %v, want each of %v once", f.loaded, want)
	}
	f.checkOrder()
}

// TestColdplugWaitsForLateDevices: a bus driver whose devices appear only
// after finit_module returned (asynchronous probe) is still followed.
func TestColdplugWaitsForLateDevices(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, qemuDevices)
	var wg sync.WaitGroup
	defer wg.Wait()
	f.onLoad["virtio_pci"] = func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(150 * time.Millisecond)
			f.addDevice("pci0000:00/0000:00:02.0/virtio0", "virtio:d00000002v00001AF4")
		}()
	}
	s := newSession(ix, nil, f.load, map[string]bool{})
	got, err := coldplug(context.Background(), s, f.src(), testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if got[len(got)-1] != "virtio_blk" {
		t.Errorf("loaded %v, want virtio_blk last (its device appeared 150 ms after virtio_pci loaded)", got)
	}
}

// TestColdplugFailuresDoNotStopOthers: a failing dependency skips its users
// only; an already-loaded module (EEXIST) is no error and not reported.
func TestColdplugFailuresDoNotStopOthers(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, qemuDevices)
	f.fail["nvme_core"] = unix.ENOEXEC
	f.fail["button"] = unix.EEXIST
	s := newSession(ix, nil, f.load, map[string]bool{})
	got, err := coldplug(context.Background(), s, f.src(), testPolicy)
	want := []string{"virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_ring", "virtio", "virtio_pci"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	if err == nil {
		t.Fatal("no error for a failing module")
	}
	for _, w := range []string{"loading module nvme_core from testdata/kernel/drivers/nvme/host/nvme-core.ko: exec format error",
		"loading module nvme: skipped, its dependency nvme_core failed"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "button") {
		t.Errorf("EEXIST reported as an error: %v", err)
	}
}

// TestColdplugIsBounded: a chain of drivers that keeps revealing devices
// stops after MaxPasses with an error that names what was left.
func TestColdplugIsBounded(t *testing.T) {
	var deps []DepEntry
	var aliases []Alias
	for i := 0; i < 10; i++ {
		deps = append(deps, DepEntry{Path: fmt.Sprintf("kernel/m%d.ko", i)})
		aliases = append(aliases, Alias{Pattern: fmt.Sprintf("chain:%d", i), Module: fmt.Sprintf("m%d", i)})
	}
	ix := NewIndex("/x", deps, aliases, nil)
	f := newFakeSysfs(t, ix, map[string]string{"c0": "chain:0"})
	for i := 0; i < 9; i++ {
		next := i + 1
		f.onLoad[fmt.Sprintf("m%d", i)] = func() { f.addDevice(fmt.Sprintf("c%d", next), fmt.Sprintf("chain:%d", next)) }
	}
	s := newSession(ix, nil, f.load, map[string]bool{})
	p := testPolicy
	p.MaxPasses = 3
	got, err := coldplug(context.Background(), s, f.src(), p)
	if !reflect.DeepEqual(got, []string{"m0", "m1", "m2"}) {
		t.Errorf("loaded %v, want m0 m1 m2", got)
	}
	if err == nil || !strings.Contains(err.Error(), "after 3 passes: m3") {
		t.Errorf("error %v, want one saying m3 is left after 3 passes", err)
	}
}

func TestLoadReportsMissingAndLoadsTheRest(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	s := newSession(ix, nil, f.load, map[string]bool{"erofs": true})
	got, err := load(context.Background(), s, []string{"loop", "erofs", "evdev", "no-such-module"})
	if !reflect.DeepEqual(got, []string{"loop"}) {
		t.Errorf("loaded %v, want [loop] (erofs present, evdev builtin)", got)
	}
	if err == nil || !strings.Contains(err.Error(), "no-such-module") {
		t.Errorf("error %v, want one naming no-such-module", err)
	}
}

func TestLoadStopsOnContext(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	s := newSession(ix, nil, f.load, map[string]bool{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := load(ctx, s, []string{"loop"})
	if len(got) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("load with a cancelled context = %v, %v", got, err)
	}
}

func TestScanModaliasesMissingSysfs(t *testing.T) {
	if _, err := ScanModaliases(filepath.Join(t.TempDir(), "nosys")); err == nil || !strings.Contains(err.Error(), "nosys") {
		t.Errorf("err = %v, want one naming the devices dir", err)
	}
}
