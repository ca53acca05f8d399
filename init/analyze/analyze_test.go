package analyze

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/golden"
	"github.com/berth-node/berth/network/timesync"
	"github.com/berth-node/berth/runtime/supervise"
	"github.com/berth-node/berth/update/status"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The recorded reports: boot.json files saved from QEMU boots of the test
// image (normal: a join; failed-join: no API server; crash-loop: a
// containerd config it refuses; kubelet-before-imports: a join with the
// imports beside kubelet's start, its registeredMs from berth's console
// line as boot.json has it after the report; secure-disk: a disk boot under
// Secure Boot, before the report had an update section; secure-disk-trial:
// the same disk booting a staged version on trial, its firmware and update
// sections as a node writes them, TestUpdateSectionsAreOfs checks), and
// BERTH-REPORT lines from older runs' console logs, before the report had
// endWall, cpu and split.
func recorded(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded reports in testdata: %v", err)
	}
	return files
}

func TestGolden(t *testing.T) {
	for _, f := range recorded(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			txt, svg := analyzed(t, b)
			checkGolden(t, filepath.Join("testdata", name+".txt"), txt)
			checkGolden(t, filepath.Join("testdata", name+".svg"), svg)
			checkSVG(t, b, svg)
		})
	}
}

// analyzed is what `berth analyze` writes for b: the text and the chart.
func analyzed(t *testing.T, b *Boot) (txt, svg []byte) {
	t.Helper()
	var tb, sb bytes.Buffer
	if err := WriteText(&tb, b); err != nil {
		t.Fatal(err)
	}
	if err := WriteSVG(&sb, b); err != nil {
		t.Fatal(err)
	}
	return tb.Bytes(), sb.Bytes()
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.Check(t, path, got, *update)
}

// svgBar is one bar of the chart as a reader of the SVG sees it.
type svgBar struct {
	class, name string
	startMs     int64
}

// checkSVG: the chart is well-formed XML, has one bar per phase, service
// and image import, and the bars are in start order.
func checkSVG(t *testing.T, b *Boot, svg []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var bars []svgBar
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
		}
		if se.Name.Local != "rect" {
			continue
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		class, _, _ := strings.Cut(attr["class"], " ")
		switch Kind(class) {
		case KindPhase, KindService, KindImage:
			ms, err := strconv.ParseInt(attr["data-start-ms"], 10, 64)
			if err != nil {
				t.Fatalf("bar %v has no data-start-ms: %v", attr, err)
			}
			bars = append(bars, svgBar{class: class, name: attr["data-name"], startMs: ms})
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	count := func(k Kind) int {
		n := 0
		for _, x := range bars {
			if x.class == string(k) {
				n++
			}
		}
		return n
	}
	if got, want := count(KindPhase), len(b.Report.Phases); got != want {
		t.Errorf("%d phase bars, want one per phase (%d)", got, want)
	}
	var services, images int
	if s := b.Services; s != nil {
		for _, sv := range s.Services {
			if _, _, ok := b.serviceStart(sv.Name); ok {
				services++
			}
		}
		images = len(s.Images)
	}
	if got := count(KindService); got != services {
		t.Errorf("%d service bars, want one per started service (%d)", got, services)
	}
	if got := count(KindImage); got != images {
		t.Errorf("%d image bars, want one per import (%d)", got, images)
	}
	if !slices.IsSortedFunc(bars, func(x, y svgBar) int { return int(x.startMs - y.startMs) }) {
		t.Errorf("bars not in start order: %+v", bars)
	}
}

// Waits that overlap count once, and only inside berth's part of boot.
func TestSplitCountsOverlapsOnce(t *testing.T) {
	b := &Boot{Report: &report.Report{KernelToInitMs: 100, EndMs: 1100,
		Phases: []report.Phase{{Name: "services", StartMs: 200, DurationMs: 900}}}}
	b.Time = &timesync.Status{}
	b.Services = &report.Services{
		KernelToKubeletMs: 700,
		Services: []supervise.Status{
			{Name: "containerd", StartedAt: time.Unix(100, 0), ReadyMs: 300},   // 300..600
			{Name: "kubelet", StartedAt: time.Unix(100, 400e6), ReadyMs: 1000}, // 700..1700, past the end
		},
		Images: []report.ImageImport{{Name: "pause", StartMs: 500, DurationMs: 150, Imported: true}}, // 500..650: overlaps containerd
	}
	got := Split(b)
	// ntp 200..300, containerd 300..600, import ..650, kubelet 700..1100.
	if got.WaitMs != 450+400 || got.BerthMs != 1000-850 {
		t.Errorf("Split = own %d, waits %d; want own 150, waits 850: %+v", got.BerthMs, got.WaitMs, got.Waits)
	}
	var names []string
	for _, w := range got.Waits {
		names = append(names, w.Name)
	}
	if want := []string{"ntp", "containerd ready", "import pause", "kubelet ready"}; !slices.Equal(names, want) {
		t.Errorf("waits %v, want %v", names, want)
	}
}

// A recorded NTP wait beside containerd's start is taken as recorded, not
// derived, and is on the chain to kubelet's exec only when it ends last.
func TestTimeWaitBesideContainerd(t *testing.T) {
	boot := func(ntpMs int64) *Boot {
		b := &Boot{Report: &report.Report{KernelToInitMs: 100, EndMs: 1500,
			Phases: []report.Phase{{Name: "apply", StartMs: 100, DurationMs: 100}, {Name: "services", StartMs: 200, DurationMs: 1300}}}}
		b.Time = &timesync.Status{}
		b.Services = &report.Services{
			Services: []supervise.Status{
				{Name: "containerd", StartedAt: time.Unix(100, 0), ReadyMs: 300}, // 200..500
				{Name: "kubelet", StartedAt: time.Unix(100, 0).Add(time.Duration(max(300, ntpMs)) * time.Millisecond), ReadyMs: 500},
			},
		}
		b.Services.KernelToKubeletMs = 200 + max(300, ntpMs)
		b.Services.TimeWait = &report.TimeWait{StartMs: 200, DurationMs: ntpMs}
		return b
	}
	chain := func(b *Boot) []string {
		var names []string
		for _, l := range Chains(b)[0].Links {
			names = append(names, l.Name)
		}
		return names
	}
	quick := boot(30)
	var ntp *report.Span
	for _, w := range Waits(quick) {
		if w.Name == WaitNTP {
			ntp = &w
		}
	}
	if ntp == nil || ntp.StartMs != 200 || ntp.DurationMs != 30 || ntp.Derived {
		t.Errorf("ntp wait %+v, want the recorded 200+30 ms, not derived", ntp)
	}
	if got := chain(quick); slices.Contains(got, "first NTP sync") || !slices.Contains(got, "containerd") {
		t.Errorf("chain to kubelet exec %v: a quick sync is beside containerd, not on it", got)
	}
	if got := chain(boot(900)); !slices.Contains(got, "first NTP sync") || slices.Contains(got, "containerd") {
		t.Errorf("chain to kubelet exec %v: a slow sync (ends after containerd is ready) is what kubelet waited for", got)
	}
}

// The chain picks, before each point, the step that ended last.
func TestChainTo(t *testing.T) {
	cands := []Bar{
		{Name: "kernel", DurationMs: 100},
		{Name: "a", StartMs: 100, DurationMs: 50},
		{Name: "b", StartMs: 150, DurationMs: 400}, // ends 550
		{Name: "c", StartMs: 160, DurationMs: 100}, // ends 260: beside b, not on the chain
		{Name: "d", StartMs: 560, DurationMs: 40},  // ends 600
		{Name: "late", StartMs: 700, DurationMs: 10},
	}
	var got []string
	links := chainTo(cands, 620)
	for _, l := range links {
		got = append(got, l.Name)
	}
	if want := []string{"kernel", "a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("chain %v, want %v", got, want)
	}
	if links[2].GapMs != 10 || links[3].GapMs != 20 {
		t.Errorf("gaps %+v, want 10 ms after b and 20 ms after d", links)
	}
}

// The recorded reports are schema 1 (before schemaVersion). Each one,
// upgraded and written again by the writer's own encoder as schema 2,
// analyzes to the very same text and chart: berth analyze reads both.
func TestSchema2AnalyzesLikeSchema1(t *testing.T) {
	for _, f := range recorded(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		old, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := old.Report.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(v2), `"schemaVersion":2`) {
			t.Fatalf("%s re-encoded without schemaVersion 2: %s", f, v2)
		}
		b, err := Decode(v2)
		if err != nil {
			t.Fatalf("%s as schema 2: %v", f, err)
		}
		txt, svg := analyzed(t, b)
		base := strings.TrimSuffix(f, ".json")
		for _, g := range []struct {
			ext string
			got []byte
		}{{".txt", txt}, {".svg", svg}} {
			want, err := os.ReadFile(base + g.ext)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(g.got, want) {
				t.Errorf("%s as schema 2 analyzes differently from %s", f, base+g.ext)
			}
		}
	}
}

// TestNeverReadyQuotesWhatTheRunDiedOf: a service caught running again
// after failed runs is noted with what its last failed run died of, not
// the error its new run has just logged at every start.
func TestNeverReadyQuotesWhatTheRunDiedOf(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "crash-loop.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	const noise = `time="2026-11-30T00:03:08Z" level=error msg="failed to load cni during init"`
	const why = "containerd: failed to get listener for debug endpoint: listen unix /proc/x.sock: bind: no such file or directory"
	i := slices.IndexFunc(b.Services.Services, func(s supervise.Status) bool { return s.Name == "containerd" })
	if i < 0 {
		t.Fatal("crash-loop.json has no containerd")
	}
	s := &b.Services.Services[i]
	s.State, s.LastErrorLine, s.ExitErrorLine = supervise.StateRunning, noise, why
	bars := Bars(b)
	j := slices.IndexFunc(bars, func(x Bar) bool { return x.Name == "containerd" })
	if j < 0 {
		t.Fatalf("no containerd bar in %+v", bars)
	}
	if want := "never ready: running, 10 restarts: " + why; bars[j].Note != want || !bars[j].Failed {
		t.Errorf("containerd's bar: failed=%v note %q, want failed, %q", bars[j].Failed, bars[j].Note, want)
	}
}

// Decode takes boot.json or a console log, and says which it wanted.
func TestDecodeConsoleLog(t *testing.T) {
	log := "[    1.0] berth: starting\r\n   22.011 BERTH-REPORT {\"version\":\"a\",\"phases\":[]}\n   40.000 BERTH-REPORT {\"version\":\"b\",\"phases\":[],\"endMs\":9}\nmore\n"
	b, err := Decode([]byte(log))
	if err != nil || b.Report.Version != "b" || b.Report.EndMs != 9 {
		t.Errorf("Decode(console log) = %+v, %v; want the last report", b, err)
	}
	if _, err := Decode([]byte("hello")); err == nil || !strings.Contains(err.Error(), "BERTH-REPORT") {
		t.Errorf("Decode(junk) error = %v", err)
	}
	if _, err := Decode([]byte(`{"services": 3}`)); err == nil || !strings.Contains(err.Error(), "Report.services") {
		t.Errorf("Decode(bad section) error = %v", err)
	}
}

// FuzzDecode: a report file is outside input. Decoding must not panic, and
// whatever decodes must analyze and draw as well-formed XML.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"normal.json", "crash-loop.json", "fatal-root.json"} {
		if data, err := os.ReadFile(filepath.Join("testdata", p)); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"phases":[{"name":"<&>","startMs":-5,"durationMs":-1}],"endMs":-3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data)
		if err != nil {
			return
		}
		if err := WriteText(io.Discard, b); err != nil {
			t.Fatal(err)
		}
		var svg bytes.Buffer
		if err := WriteSVG(&svg, b); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&svg)
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("SVG not well-formed: %v", err)
			}
		}
	})
}

// A report with absurd times still draws, on a bounded axis.
func TestSVGAbsurdTimes(t *testing.T) {
	for _, end := range []int64{-5, 0, 1 << 62} {
		b := &Boot{Report: &report.Report{EndMs: end, Phases: []report.Phase{{Name: "early", StartMs: end, DurationMs: end}}}}
		var buf bytes.Buffer
		if err := WriteSVG(&buf, b); err != nil {
			t.Fatal(err)
		}
		checkSVG(t, b, buf.Bytes())
	}
}

// FuzzEsc: escaped text reads back, in an element and an attribute, as
// the text itself, with what XML cannot carry replaced as encoding/xml
// replaces it.
func FuzzEsc(f *testing.F) {
	f.Add("plain")
	f.Add(`<a href="x">&amp;'</a>` + "\x00\x1b\r\n\t\xff\ufffe")
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		if err := xml.EscapeText(&want, []byte(s)); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Attr string `xml:"a,attr"`
			Text string `xml:",chardata"`
		}
		doc := `<x a="` + esc(s) + `">` + esc(s) + `</x>`
		if err := xml.Unmarshal([]byte(doc), &got); err != nil {
			t.Fatalf("%q escaped to %q, which is not XML: %v", s, esc(s), err)
		}
		var back struct {
			Text string `xml:",chardata"`
		}
		if err := xml.Unmarshal([]byte("<x>"+want.String()+"</x>"), &back); err != nil {
			t.Fatal(err)
		}
		if got.Text != back.Text || got.Attr != back.Text {
			t.Fatalf("%q: text %q attr %q, want %q as encoding/xml gives", s, got.Text, got.Attr, back.Text)
		}
	})
}

// Imports one after the other share a lane; one that starts before the
// lane is free gets the next; phases and services keep a row each.
func TestRows(t *testing.T) {
	bars := []Bar{
		{Name: "services", Kind: KindPhase, StartMs: 0, DurationMs: 1000},
		{Name: "containerd", Kind: KindService, StartMs: 10, DurationMs: 300},
		{Name: "pause", Kind: KindImage, StartMs: 310, DurationMs: 100}, // lane 1
		{Name: "kubelet", Kind: KindService, StartMs: 320, DurationMs: 600},
		{Name: "demo", Kind: KindImage, StartMs: 350, DurationMs: 200},    // overlaps pause: lane 2
		{Name: "busybox", Kind: KindImage, StartMs: 410, DurationMs: 100}, // lane 1 is free again
		{Name: "coredns", Kind: KindImage, StartMs: 560, DurationMs: 10},  // both free: lane 1
	}
	rowOf, first, n := Rows(bars)
	if want := []int{0, 1, 2, 3, 4, 2, 2}; !slices.Equal(rowOf, want) {
		t.Errorf("rows %v, want %v", rowOf, want)
	}
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(first, want) || n != 5 {
		t.Errorf("first bars %v of %d rows, want %v of 5", first, n, want)
	}
}

// A recorded update section is what update/status makes of the same
// report's firmware section and root slot: the fixture is one a node can
// write, not an invention.
func TestUpdateSectionsAreOfs(t *testing.T) {
	n := 0
	for _, f := range recorded(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		u := b.Report.Update
		if u == nil {
			continue
		}
		n++
		want := status.Of(status.Facts{Firmware: b.Report.Firmware, Slot: u.Slot, SlotBy: u.SlotBy, Version: u.Version})
		want.LastUpdate = u.LastUpdate
		if *u != want {
			t.Errorf("%s: update section %+v, but update/status makes %+v of its firmware", f, *u, want)
		}
		if root, ok := b.Report.Root.(map[string]any); ok {
			v, _ := root["verity"].(map[string]any)
			if slot, _ := v["slot"].(string); slot != u.Slot {
				t.Errorf("%s: update slot %q, root.verity.slot %q", f, u.Slot, slot)
			}
			if by, _ := v["slotBy"].(string); by != u.SlotBy {
				t.Errorf("%s: update slotBy %q, root.verity.slotBy %q", f, u.SlotBy, by)
			}
		}
	}
	if n == 0 {
		t.Fatal("no recorded report has an update section")
	}
}

// The version line for each kind of boot the update section describes.
func TestUpdateLine(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 9, 52, 0, time.UTC)
	for name, c := range map[string]struct {
		u    *status.Status
		want string
	}{
		"report before the section": {nil, ""},
		"good": {&status.Status{Version: "0.3.1", Slot: "a", Boot: status.BootSystemdBoot, Entry: "berth-0.3.1.efi", State: "good"},
			"version: 0.3.1, slot a; entry berth-0.3.1.efi (good)"},
		"last try": {&status.Status{Version: "0.3.2", Slot: "b", Boot: status.BootSystemdBoot, Entry: "berth-0.3.2+0-3.efi", State: "bad",
			Trial: true, TriesDone: 3},
			"version: 0.3.2, slot b; entry berth-0.3.2+0-3.efi (trial: 0 tries left, 3 done)"},
		"direct kernel": {&status.Status{Version: "0.3.1", Boot: status.BootDirect},
			"version: 0.3.1, slot -; direct kernel boot, no boot counting"},
		"UEFI, another loader": {&status.Status{Boot: status.BootUEFI, Slot: "a"},
			"version: -, slot a; not started by systemd-boot, no boot counting"},
		"unreadable entry": {&status.Status{Version: "0.3.1", Boot: status.BootSystemdBoot, Error: "booted entry: LoaderEntrySelected \"x.efi\": not a berth UKI\nsecond line"},
			"version: 0.3.1, slot -; booted entry: LoaderEntrySelected \"x.efi\": not a berth UKI"},
		"after a rollback": {&status.Status{Version: "0.3.1", Slot: "a", Boot: status.BootSystemdBoot, Entry: "berth-0.3.1.efi", State: "good",
			LastUpdate: &status.LastUpdate{Result: "reverted", Reason: "Node not Ready within 10m0s", From: "0.3.1", To: "0.3.2", At: at}},
			"version: 0.3.1, slot a; entry berth-0.3.1.efi (good); last update 0.3.1 → 0.3.2: reverted (Node not Ready within 10m0s) at 2026-11-24T02:09:52Z"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := updateLine(c.u); got != c.want {
				t.Errorf("updateLine =\n %q\nwant\n %q", got, c.want)
			}
		})
	}
}
