package kmod

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/internal/safe"
)

// TestLoadRunsIndependentModulesConcurrently: modules that do not depend on
// each other load at the same time, never more than the worker bound, and
// none before its dependencies.
func TestLoadRunsIndependentModulesConcurrently(t *testing.T) {
	for _, workers := range []int{1, 3} {
		ix := fixture(t)
		f := newFakeSysfs(t, ix, nil)
		f.hold = 30 * time.Millisecond
		s := newSession(ix, nil, f.load, map[string]bool{})
		s.workers = workers
		names := []string{"loop", "erofs", "button", "nvme", "virtio_net", "virtio_blk", "virtio_pci"}
		got, err := load(context.Background(), s, names)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ix.Resolve(names...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("workers=%d: loaded %v, want the resolve order %v", workers, got, want)
		}
		f.checkOrder()
		if workers == 1 && f.maxInFlight != 1 || workers > 1 && (f.maxInFlight < 2 || f.maxInFlight > workers) {
			t.Errorf("workers=%d: at most %d loads ran at once", workers, f.maxInFlight)
		}
	}
}

// TestLoadHonoursSoftdeps: libcrc32c's "pre: crc32c" loads every crc32c
// implementation first (through the alias), each finishing before
// libcrc32c starts, and a soft dependency that fails (crc32c_intel on a
// CPU without SSE4.2) is no error and does not stop libcrc32c.
func TestLoadHonoursSoftdeps(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	f.hold = 10 * time.Millisecond
	f.fail["crc32c_intel"] = unix.ENODEV
	s := newSession(ix, nil, f.load, map[string]bool{})
	got, err := load(context.Background(), s, []string{"xfs"})
	if err != nil {
		t.Errorf("a failed soft dependency made an error: %v", err)
	}
	if want := []string{"crc32c_generic", "libcrc32c", "xfs"}; !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	f.mu.Lock()
	seen := append([]string(nil), f.loaded...)
	f.mu.Unlock()
	if i, j := slices.Index(seen, "crc32c_generic"), slices.Index(seen, "libcrc32c"); i < 0 || j < i {
		t.Errorf("loader saw %v: crc32c_generic must finish before libcrc32c", seen)
	}

	// Asked for by name, the same module's failure is an error.
	s = newSession(ix, nil, f.load, map[string]bool{})
	if _, err := load(context.Background(), s, []string{"crc32c_intel"}); err == nil || !strings.Contains(err.Error(), "crc32c_intel") {
		t.Errorf("explicit crc32c_intel failing: err = %v, want one naming it", err)
	}
}

// TestLoadDeadline: a module whose init never returns does not hold boot
// past the context's deadline; the error names it.
func TestLoadDeadline(t *testing.T) {
	ix := fixture(t)
	release := make(chan struct{})
	defer close(release)
	stuck := func(path string) error {
		if Name(path) == "loop" {
			<-release
		}
		return nil
	}
	s := newSession(ix, nil, stuck, map[string]bool{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	got, err := load(ctx, s, []string{"loop", "erofs"})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("load took %v past a 100 ms deadline", took)
	}
	if !reflect.DeepEqual(got, []string{"erofs"}) {
		t.Errorf("loaded %v, want [erofs]", got)
	}
	if err == nil || !strings.Contains(err.Error(), "loading module loop: still loading") {
		t.Errorf("err = %v, want one saying loop was still loading", err)
	}
}

func TestParseSoftdep(t *testing.T) {
	got, err := ParseSoftdep(strings.NewReader("# c\nsoftdep libcrc32c pre: crc32c\nsoftdep a-b pre: x y post: z\nsoftdep c post: d\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Softdep{{Module: "libcrc32c", Pre: []string{"crc32c"}}, {Module: "a_b", Pre: []string{"x", "y"}, Post: []string{"z"}}, {Module: "c", Post: []string{"d"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSoftdep = %+v, want %+v", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{"softdep a\n", "line 1"},
		{"\nsoftdep a b c\n", `line 2: "b" comes before`},
		{"alias a pre: b\n", "line 1"},
		{"softdep pre: a\n", "line 1"},
	} {
		if _, err := ParseSoftdep(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSoftdep(%q) error = %v, want one containing %q", c.in, err, c.want)
		}
	}
}

// chanSource is a device source fed by the test, as the kernel feeds the
// uevent socket.
type chanSource struct {
	present []string
	events  chan string
}

func (c *chanSource) Scan() ([]string, error) { return c.present, nil }

// Added, like the uevent socket, returns queued events even when the
// deadline has passed.
func (c *chanSource) Added(ctx context.Context, deadline time.Time) ([]string, error) {
	drain := func(out []string) []string {
		for {
			select {
			case e := <-c.events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	if out := drain(nil); len(out) > 0 {
		return out, nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case e := <-c.events:
		return drain([]string{e}), nil
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, nil
	}
}

// TestColdplugFollowsUevents: a device announced by a uevent while its bus
// driver loads is followed at once (no settle wait), events that want no
// new module do not end the wait early, and coldplug ends one settle time
// after the last pass.
func TestColdplugFollowsUevents(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	src := &chanSource{events: make(chan string, 8)}
	for _, d := range qemuDevices {
		src.present = append(src.present, d)
	}
	f.onLoad["virtio_pci"] = func() {
		src.events <- "block:nomodule"
		src.events <- "virtio:d00000001v00001AF4"
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	f.onLoad["virtio_net"] = func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(50 * time.Millisecond) // an asynchronous probe
			src.events <- "virtio:d00000002v00001AF4"
		}()
	}
	p := testPolicy
	// Long enough that a loaded machine's loading time cannot blur one
	// settle time into the three a wait per pass would take.
	p.Settle = 1500 * time.Millisecond
	s := newSession(ix, nil, f.load, map[string]bool{})
	start := time.Now()
	got, err := coldplug(context.Background(), s, src, p)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"button", "nvme_core", "nvme", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_ring", "virtio", "virtio_pci",
		"failover", "net_failover", "virtio_net", "virtio_blk"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	f.checkOrder()
	// Three passes, then one settle time with no event; a wait per pass
	// would take three.
	if took < p.Settle || took >= 2*p.Settle {
		t.Errorf("coldplug took %v; want one settle time (%v) plus loading", took, p.Settle)
	}
}

// TestScanModaliases: devices are found through their bus and class links
// and the CPU's modalias; empty modaliases are left out.
func TestScanModaliases(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, qemuDevices)
	f.addDevice("LNXSYSTM:00/LNXPWRBN:00/input/input2", "input:b0019v0000p0001e0000-e0,1,k74,ramlsfw")
	// A device dir no bus links to (a kobject, not a device) is no device.
	if err := os.MkdirAll(filepath.Join(f.root, "devices", "virtual", "kobj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.root, "devices", "virtual", "kobj", "modalias"), []byte("nobus:x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ScanModaliases(f.root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"acpi:LNXPWRBN:",
		"cpu:type:x86,ven0000fam0006mod003F:feature:,0000",
		"input:b0019v0000p0001e0000-e0,1,k74,ramlsfw",
		"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
		"pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02",
		"pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00",
		"platform:serial8250",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ScanModaliases = %q\nwant %q", got, want)
	}
}

// TestUeventSocket opens the real uevent socket (any user may listen to
// the kernel's group) and checks that waiting on it honours its deadline.
func TestUeventSocket(t *testing.T) {
	u, err := openUevents(func() ([]string, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	start := time.Now()
	if _, err := u.Added(context.Background(), start.Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Added waited %v for a 100 ms deadline", took)
	}
}

// TestLoadAndColdplug: the preload modules load first (while sysfs is
// scanned), then the devices' modules; a module both preloaded and wanted
// by a device loads once; a missing preload module is an error that does
// not stop the rest.
func TestLoadAndColdplug(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, qemuDevices)
	f.onLoad["virtio_pci"] = func() { f.addDevice("pci0000:00/0000:00:02.0/virtio0", "virtio:d00000001v00001AF4") }
	s := newSession(ix, nil, f.load, map[string]bool{})
	got, err := loadAndColdplug(context.Background(), s, f.src(), testPolicy, []string{"loop", "erofs", "virtio_pci", "no-such"})
	want := []string{
		"loop", "erofs", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_ring", "virtio", "virtio_pci", // preload
		"button", "nvme_core", "nvme", // pass 1: virtio_pci is there already
		"failover", "net_failover", "virtio_net", // pass 2
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v\nwant %v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "preload: ") || !strings.Contains(err.Error(), "no-such") {
		t.Errorf("err = %v, want a preload error naming no-such", err)
	}
	f.checkOrder()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.loaded) != len(want) {
		t.Errorf("loader called %d times (%v), want %d: each module once", len(f.loaded), f.loaded, len(want))
	}
}

// TestHotplug: devices present when it starts (added after the coldplug)
// and devices announced later get their modules, each batch reported;
// it returns nil soon after its context ends.
func TestHotplug(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	src := &chanSource{present: []string{"acpi:LNXPWRBN:"}, events: make(chan string, 8)}
	s := newSession(ix, nil, f.load, map[string]bool{})
	batches := make(chan []string, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	// virtio_net needs failover, which is blocked: it is never loaded.
	blocked := func(m string) bool { return m == "failover" }
	// A panic in hotplug comes back as its error, failing the test by name.
	safe.Go(slog.New(slog.DiscardHandler), "hotplug", func() { errc <- hotplug(ctx, s, src, blocked, func(m []string) { batches <- m }) },
		func(p *safe.Panic) { errc <- p })
	next := func() []string {
		t.Helper()
		select {
		case b := <-batches:
			return b
		case <-time.After(5 * time.Second):
			t.Fatal("no batch reported within 5 s")
			return nil
		}
	}
	if b := next(); !reflect.DeepEqual(b, []string{"button"}) {
		t.Errorf("first batch %v, want [button] (the device present at start)", b)
	}
	src.events <- "virtio:d00000001v00001AF4" // virtio_net: blocked
	src.events <- "virtio:d00000002v00001AF4"
	if b := next(); !reflect.DeepEqual(b, []string{"virtio_ring", "virtio", "virtio_blk"}) {
		t.Errorf("second batch %v, want virtio_blk after its dependencies, and no virtio_net", b)
	}
	if err := s.failed["virtio_net"]; err == nil || !strings.Contains(err.Error(), "blocked by user data (failover)") {
		t.Errorf("virtio_net: %v, want blocked by user data", err)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("hotplug returned %v after its context ended, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hotplug still running 5 s after its context ended")
	}
	f.checkOrder()
}

// TestColdplugNoSettle: with no settle time, devices whose uevents are
// queued when a pass ends are still followed, and coldplug does not wait
// after the last pass.
func TestColdplugNoSettle(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	src := &chanSource{present: []string{"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"}, events: make(chan string, 8)}
	f.onLoad["virtio_pci"] = func() { src.events <- "virtio:d00000001v00001AF4" }
	p := testPolicy
	p.Settle = 0
	s := newSession(ix, nil, f.load, map[string]bool{})
	start := time.Now()
	got, err := coldplug(context.Background(), s, src, p)
	if err != nil {
		t.Fatal(err)
	}
	if got[len(got)-1] != "virtio_net" {
		t.Errorf("loaded %v, want virtio_net last", got)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("coldplug with no settle took %v", took)
	}
}
