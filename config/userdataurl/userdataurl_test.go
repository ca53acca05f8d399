package userdataurl

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/config/userdata"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Location
		err  string
	}{
		{"http://10.0.2.2:8080/node-1.yaml", Location{HTTP, "http://10.0.2.2:8080/node-1.yaml"}, ""},
		{"https://config.example.com/u?node=a", Location{HTTPS, "https://config.example.com/u?node=a"}, ""},
		{"/etc/berth/user-data", Location{File, "/etc/berth/user-data"}, ""},
		{"", Location{}, "want an http:// or https:// URL, or an absolute path"},
		{"ftp://x/y", Location{}, "want an http:// or https:// URL"},
		{"etc/user-data", Location{}, "absolute path"},
		{"http:///nohost", Location{}, "no host"},
		{"https://user:secret@example.com/u", Location{}, "credentials do not belong"},
		{"/etc/\x01", Location{}, "berth.userdata="},
		{"http://example.com/a b", Location{}, "not a URL"},
	} {
		got, err := Parse(c.in)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Parse(%q): error %v, want one saying %q", c.in, err, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q): the error shows the password: %v", c.in, err)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

var fast = Options{Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Attempt: time.Second}

// A server that is not ready yet is asked again until it answers.
func TestFetchRetriesUntilOK(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("apiVersion: node.eks.aws/v1alpha1\n"))
	}))
	defer srv.Close()
	loc, err := Parse(srv.URL + "/u")
	if err != nil {
		t.Fatal(err)
	}
	data, attempts, err := Fetch(context.Background(), quiet(), loc, fast)
	if err != nil || string(data) != "apiVersion: node.eks.aws/v1alpha1\n" {
		t.Fatalf("Fetch = %q, %v", data, err)
	}
	if len(attempts) != 3 || attempts[0].Status != 503 || attempts[2].Status != 200 || attempts[0].Err == "" {
		t.Errorf("attempts %+v, want two 503s then a 200", attempts)
	}
}

// A URL that never answers 200 fails once the context ends, naming the
// URL and the last answer.
func TestFetchGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	loc, _ := Parse(srv.URL + "/missing")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, attempts, err := Fetch(ctx, quiet(), loc, fast)
	if err == nil || !strings.Contains(err.Error(), "berth.userdata="+srv.URL+"/missing") || !strings.Contains(err.Error(), "404") ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v: want the URL, the 404 and the deadline", err)
	}
	if len(attempts) < 2 {
		t.Errorf("%d attempts, want retries", len(attempts))
	}
}

// Over the size limit is refused at once: asking again gets the same.
func TestFetchTooBig(t *testing.T) {
	big := bytes.Repeat([]byte("x"), userdata.MaxDecodedSize+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(big) }))
	defer srv.Close()
	loc, _ := Parse(srv.URL)
	_, attempts, err := Fetch(context.Background(), quiet(), loc, fast)
	if err == nil || !strings.Contains(err.Error(), "limit") || len(attempts) != 1 {
		t.Errorf("err %v after %d attempts: want the limit, once", err, len(attempts))
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Fetch(context.Background(), quiet(), Location{File, p}, fast); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("big file: err %v, want the limit", err)
	}
}

func TestFetchHTTPSAndFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("tls")) }))
	defer srv.Close()
	loc, _ := Parse(srv.URL)
	if loc.Kind != HTTPS {
		t.Fatalf("kind %s", loc.Kind)
	}
	opts := fast
	opts.Client = srv.Client() // trusts the test server's CA, as the image's bundle would a real one
	if data, _, err := Fetch(context.Background(), quiet(), loc, opts); err != nil || string(data) != "tls" {
		t.Errorf("https: %q, %v", data, err)
	}
	// Without the CA: refused, and the error says why.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, _, err := Fetch(ctx, quiet(), loc, fast); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("https with an unknown CA: %v, want a certificate error", err)
	}

	p := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(p, []byte("file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, attempts, err := Fetch(context.Background(), quiet(), Location{File, p}, fast); err != nil || string(data) != "file" || attempts != nil {
		t.Errorf("file: %q, %v, %v", data, attempts, err)
	}
	if _, _, err := Fetch(context.Background(), quiet(), Location{File, p + ".none"}, fast); err == nil || !strings.Contains(err.Error(), "berth.userdata="+p+".none") {
		t.Errorf("missing file: %v, want the key and path", err)
	}
}
