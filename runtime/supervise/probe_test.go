package supervise

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// versionReply builds a gRPC frame holding VersionResponse{version, revision}.
func versionReply(version, revision string) []byte {
	var msg []byte
	msg = append(msg, 1<<3|2)
	msg = binary.AppendUvarint(msg, uint64(len(version)))
	msg = append(msg, version...)
	msg = append(msg, 2<<3|2)
	msg = binary.AppendUvarint(msg, uint64(len(revision)))
	msg = append(msg, revision...)
	frame := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

// fakeContainerd serves the Version call the way grpc-go does: cleartext
// HTTP/2 on a unix socket, status in the trailers.
func fakeContainerd(t *testing.T, status string) string {
	t.Helper()
	return fakeContainerdAt(t, filepath.Join(t.TempDir(), "containerd.sock"), status)
}

// fakeContainerdAt is fakeContainerd bound at sock.
func fakeContainerdAt(t *testing.T, sock, status string) string {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.Method != http.MethodPost || r.URL.Path != versionMethod ||
			r.Header.Get("Content-Type") != "application/grpc" {
			t.Errorf("fake containerd got %s %s %s content-type %q; not a gRPC Version call",
				r.Proto, r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		if status == "0" {
			w.Write(versionReply("v2.2.3", "abcdef"))
		}
		w.Header().Set("Grpc-Status", status)
		w.Header().Set("Grpc-Message", "not serving")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestContainerdVersionProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := NewProber(Probe{Kind: ProbeContainerdVersion, Target: fakeContainerd(t, "0")})
	if err != nil {
		t.Fatal(err)
	}
	detail, err := p.Check(ctx)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if detail != "containerd v2.2.3" {
		t.Errorf("detail = %q, want containerd v2.2.3", detail)
	}

	_, err = ContainerdVersion{Socket: fakeContainerd(t, "14")}.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), `grpc-status "14"`) {
		t.Errorf("Check against an unavailable service: %v, want grpc-status 14", err)
	}

	// With no socket, one Check waits for it until its own deadline.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	_, err = ContainerdVersion{Socket: filepath.Join(t.TempDir(), "none.sock")}.Check(short)
	if err == nil || !strings.Contains(err.Error(), "none.sock") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Check with no socket: %v, want the deadline, naming the socket", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("Check with no socket returned after %v, before its deadline", waited)
	}

	// With no directory for the socket there is nothing to watch: the
	// error comes at once, and the supervisor's interval is the retry.
	start = time.Now()
	_, err = ContainerdVersion{Socket: filepath.Join(t.TempDir(), "missing", "containerd.sock")}.Check(ctx)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Check with no socket directory: %v, want not-exist naming the path", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("Check with no socket directory waited %v", waited)
	}
}

// A Check made before containerd binds its socket answers once it does,
// not a ProbeInterval later, and whatever the directory's other traffic.
func TestContainerdVersionProbeWaitsForSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	bound := make(chan time.Time, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		// containerd binds its ttrpc socket first, in the same directory.
		if err := os.WriteFile(sock+".ttrpc", nil, 0o600); err != nil {
			t.Error(err)
		}
		time.Sleep(50 * time.Millisecond)
		fakeContainerdAt(t, sock, "0")
		bound <- time.Now()
	}()
	start := time.Now()
	detail, err := ContainerdVersion{Socket: sock}.Check(ctx)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if detail != "containerd v2.2.3" {
		t.Errorf("detail = %q", detail)
	}
	at := <-bound
	if at.Sub(start) < 100*time.Millisecond {
		t.Errorf("socket bound %v after the Check began; the test did not make it wait", at.Sub(start))
	}
	t.Logf("answered %v after the socket was bound", time.Since(at))
}

func TestEventNamed(t *testing.T) {
	ev := func(name string, pad int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent)
		n := append([]byte(name), make([]byte, pad)...)
		binary.NativeEndian.PutUint32(b[12:16], uint32(len(n)))
		return append(b, n...)
	}
	two := append(ev("containerd.sock.ttrpc", 3), ev("containerd.sock", 1)...)
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"second of two", two, true},
		{"other name only", ev("containerd.sock.ttrpc", 3), false},
		{"prefix is not the name", ev("containerd.so", 1), false},
		{"truncated name", two[:len(two)-10], false},
		{"short header", two[:10], false},
		{"empty", nil, false},
	} {
		if got := eventNamed(c.b, "containerd.sock"); got != c.want {
			t.Errorf("%s: eventNamed = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHTTPProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !healthy.Load() {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	p, err := NewProber(Probe{Kind: ProbeHTTP, Target: srv.URL + "/healthz"})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := p.Check(ctx); err != nil || d != "200 OK ok" {
		t.Errorf("Check = %q, %v; want 200 OK ok", d, err)
	}
	healthy.Store(false)
	if _, err := p.Check(ctx); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("Check of an unhealthy server = %v, want a 500 error", err)
	}
}

func TestNewProber(t *testing.T) {
	if p, err := NewProber(Probe{}); p != nil || err != nil {
		t.Errorf("NewProber(zero) = %v, %v; want nil, nil", p, err)
	}
	for _, bad := range []Probe{{Kind: "tcp", Target: "x"}, {Kind: ProbeHTTP}, {Kind: ProbeContainerdVersion}} {
		if _, err := NewProber(bad); err == nil {
			t.Errorf("NewProber(%+v) succeeded", bad)
		}
	}
}

func TestParseVersionReply(t *testing.T) {
	if v, err := ParseVersionReply(versionReply("v2.2.3", "rev")); err != nil || v != "v2.2.3" {
		t.Errorf("ParseVersionReply = %q, %v", v, err)
	}
	for name, b := range map[string][]byte{
		"empty":      nil,
		"compressed": {1, 0, 0, 0, 0},
		"short":      {0, 0, 0, 0, 9, 1},
		"no version": {0, 0, 0, 0, 0},
		"bad length": {0, 0, 0, 0, 2, 1<<3 | 2, 50},
		"group wire": {0, 0, 0, 0, 1, 1<<3 | 3},
	} {
		if v, err := ParseVersionReply(b); err == nil {
			t.Errorf("%s: ParseVersionReply(%x) = %q, want an error", name, b, v)
		}
	}
}

func FuzzParseVersionReply(f *testing.F) {
	f.Add(versionReply("v2.2.3", "rev"))
	f.Add([]byte{0, 0, 0, 0, 3, 8, 0x96, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVersionReply(b)
		if err == nil && v == "" {
			t.Fatalf("ParseVersionReply(%x) gave an empty version and no error", b)
		}
	})
}

// A socket bound but not yet listening refuses connections; containerd's
// is like that for a moment after the file appears. The dial retries the
// refusal and connects once listen(2) has run.
func TestDialListeningRetriesRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "bound.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := dialListening(ctx, sock, refusedRetries, refusedPause); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial before listen: %v, want ECONNREFUSED after its retries", err)
	}
	if took, least := time.Since(start), refusedRetries*refusedPause; took < least {
		t.Errorf("gave up after %v, before its %d retries %v apart", took, refusedRetries, refusedPause)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		if err := unix.Listen(fd, 8); err != nil {
			t.Error(err)
		}
	}()
	// A wide window, so a slow goroutine start cannot fail the test.
	conn, err := dialListening(ctx, sock, 1000, time.Millisecond)
	if err != nil {
		t.Fatalf("dial while listen(2) comes: %v", err)
	}
	conn.Close()
}
