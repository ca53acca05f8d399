package supervise

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/plan"
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
	sock := filepath.Join(t.TempDir(), "containerd.sock")
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
	p, err := NewProber(plan.Probe{Kind: plan.ProbeContainerdVersion, Target: fakeContainerd(t, "0")})
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

	_, err = ContainerdVersion{Socket: filepath.Join(t.TempDir(), "none.sock")}.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("Check with no socket: %v, want an error naming the socket", err)
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
	p, err := NewProber(plan.Probe{Kind: plan.ProbeHTTP, Target: srv.URL + "/healthz"})
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
	if p, err := NewProber(plan.Probe{}); p != nil || err != nil {
		t.Errorf("NewProber(zero) = %v, %v; want nil, nil", p, err)
	}
	for _, bad := range []plan.Probe{{Kind: "tcp", Target: "x"}, {Kind: plan.ProbeHTTP}, {Kind: plan.ProbeContainerdVersion}} {
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
