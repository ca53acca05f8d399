package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/init/report"
)

// The demo's chart of a real run's console: well-formed SVG under the
// output directory, with the registration the console showed after the
// report.
func TestWriteChart(t *testing.T) {
	w := newConsoleWatch()
	var rep *report.Report
	var regMs int64
	for _, ev := range w.feed(readConsole(t, filepath.Join("testdata", "console.txt"))) {
		switch {
		case ev.Report != nil:
			rep = ev.Report
		case ev.m == nodeRegistered:
			regMs = ev.GuestMs
		}
	}
	if rep == nil || regMs <= 0 {
		t.Fatalf("the recorded console lacks the report (%v) or the registration (%d)", rep != nil, regMs)
	}
	dir := t.TempDir()
	path, err := writeChart(dir, rep, regMs)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "boot.svg") {
		t.Errorf("chart at %s, want boot.svg in the output directory", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	phases := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && strings.HasPrefix(a.Value, "phase") {
					phases++
				}
			}
		}
	}
	if phases != len(rep.Phases) {
		t.Errorf("%d phase bars, want %d", phases, len(rep.Phases))
	}
	if !strings.Contains(string(data), "node registered @") {
		t.Error("chart lacks the registration milestone")
	}
	if rep.RegisteredMs != 0 {
		t.Error("writeChart changed the demo's own report")
	}
}
