package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHandlerNamesHost(t *testing.T) {
	rec := httptest.NewRecorder()
	handler("pod-1").ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Body.String() != "hello from berth demo pod pod-1\n" {
		t.Fatalf("got %d %q", rec.Code, rec.Body.String())
	}
}

// TestRunServesAndStops runs the server on a free port and checks it stops
// cleanly when its context ends.
func TestRunServesAndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), ln, "h") }()
	var body string
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not answer within 5s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(body, "demo pod h") {
		t.Errorf("body %q", body)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10s of cancel")
	}
}

func TestOpenFileLimits(t *testing.T) {
	in := "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n" +
		"Max open files            65536                1048576              files     \n"
	soft, hard, err := openFileLimits(strings.NewReader(in))
	if err != nil || soft != 65536 || hard != 1048576 {
		t.Fatalf("got %d/%d, %v", soft, hard, err)
	}
	if _, _, err := openFileLimits(strings.NewReader("Max cpu time unlimited unlimited seconds\n")); err == nil {
		t.Fatal("no open-files line: want an error")
	}
	if _, _, err := openFileLimits(strings.NewReader("Max open files            12x                1048576  files\n")); err == nil {
		t.Fatal("bad number: want an error")
	}
	s, h, err := openFileLimits(strings.NewReader("Max open files            unlimited          unlimited  files\n"))
	if err != nil || s != ^uint64(0) || h != ^uint64(0) {
		t.Fatalf("unlimited: got %d/%d, %v", s, h, err)
	}
}

func TestHostcheckNamesEachRow(t *testing.T) {
	ok := check("a", func() (string, error) { return "fine", nil })
	bad := check("b", func() (string, error) { return "half", errors.New("broke") })
	if !ok.OK || ok.Row != "a" || ok.Detail != "fine" {
		t.Errorf("ok row: %+v", ok)
	}
	if bad.OK || bad.Row != "b" || bad.Detail != "half: broke" {
		t.Errorf("failed row: %+v", bad)
	}
}

func TestCatFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := catFiles(&out, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "one\ntwo\n" {
		t.Errorf("cat a b = %q", out.String())
	}
	missing := filepath.Join(dir, "missing")
	err := catFiles(io.Discard, []string{a, missing})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("cat of a missing file: %v, want an error naming %s", err, missing)
	}
	if err := catFiles(io.Discard, nil); err == nil {
		t.Error("cat with no file: no error")
	}
}
