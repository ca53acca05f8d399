package prefetch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	// More than one buffer, and not a multiple of it.
	if err := os.WriteFile(big, make([]byte, 2*bufSize+123), 0o755); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("abc"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	res, err := Files(context.Background(), nil, []string{big, missing, small})
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	if len(res.Files) != 3 {
		t.Fatalf("got %d files, want 3: %+v", len(res.Files), res.Files)
	}
	if f := res.Files[0]; f.Path != big || f.Bytes != 2*bufSize+123 || f.Missing || f.Error != "" {
		t.Errorf("big: %+v", f)
	}
	if f := res.Files[1]; !f.Missing || f.Bytes != 0 || f.Error != "" {
		t.Errorf("missing: %+v, want missing and no error", f)
	}
	if f := res.Files[2]; f.Bytes != 3 {
		t.Errorf("small: %+v", f)
	}
	if res.Bytes != 2*bufSize+126 {
		t.Errorf("total %d bytes, want %d", res.Bytes, 2*bufSize+126)
	}
}

func TestFilesUnreadable(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory opens but does not read.
	res, err := Files(context.Background(), nil, []string{dir, ok})
	if err == nil || !strings.Contains(err.Error(), "prefetching "+dir) {
		t.Fatalf("err = %v, want one naming %s", err, dir)
	}
	if res.Files[0].Error == "" || res.Files[1].Bytes != 1 {
		t.Errorf("files %+v: want the directory failed and the next file read", res.Files)
	}
}

func TestFilesStopsWithContext(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Files(ctx, nil, []string{p, p})
	if err == nil || len(res.Files) != 0 {
		t.Errorf("after cancel: files %+v, err %v; want none read and an error", res.Files, err)
	}
}
