package kmod

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeRequestsFrom(t *testing.T) {
	dir := t.TempDir()
	knob := filepath.Join(dir, "knob")
	if err := os.WriteFile(knob, []byte("/sbin/modprobe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "berth")
	if err := os.WriteFile(exe, []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "run", "berth", "modprobe")
	// Twice: a second boot step (or a restart) replaces the link.
	for i := 0; i < 2; i++ {
		if err := ServeRequestsFrom(knob, link, exe); err != nil {
			t.Fatalf("ServeRequestsFrom: %v", err)
		}
	}
	if got, err := os.Readlink(link); err != nil || got != exe {
		t.Errorf("link -> %q (%v), want %s", got, err, exe)
	}
	if filepath.Base(link) != "modprobe" {
		t.Errorf("link %s: berth knows it is modprobe by that base name", link)
	}
	if b, _ := os.ReadFile(knob); string(b) != link+"\n" {
		t.Errorf("knob %q, want %s", b, link)
	}
}

func TestServeRequestsFromLeavesTheKnobWhenTheLinkDangles(t *testing.T) {
	dir := t.TempDir()
	knob := filepath.Join(dir, "knob")
	if err := os.WriteFile(knob, []byte("/sbin/modprobe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ServeRequestsFrom(knob, filepath.Join(dir, "modprobe"), filepath.Join(dir, "no-such-exe"))
	if err == nil || !strings.Contains(err.Error(), "resolves") {
		t.Errorf("err = %v, want the dangling link named", err)
	}
	if b, _ := os.ReadFile(knob); string(b) != "/sbin/modprobe\n" {
		t.Errorf("knob %q changed though the link does not resolve", b)
	}
}
