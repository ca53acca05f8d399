package supervise

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
	"unicode/utf8"
)

// Prober checks whether a service is ready. Check returns a short detail
// for the log (containerd's version, say) and must return by ctx's deadline.
type Prober interface {
	Check(ctx context.Context) (detail string, err error)
}

// NewProber builds the prober a plan asks for; a zero Probe means the
// service is ready as soon as it has started, and gives a nil Prober.
func NewProber(p Probe) (Prober, error) {
	switch p.Kind {
	case "":
		return nil, nil
	case ProbeContainerdVersion:
		if p.Target == "" {
			return nil, errors.New("probe containerd-version: no socket path in Target")
		}
		return ContainerdVersion{Socket: p.Target}, nil
	case ProbeHTTP:
		if p.Target == "" {
			return nil, errors.New("probe http: no URL in Target")
		}
		return HTTPGet{URL: p.Target}, nil
	}
	return nil, fmt.Errorf("probe kind %q: unknown", p.Kind)
}

// HTTPGet is ready when a GET of URL answers 200 (kubelet's healthz).
type HTTPGet struct{ URL string }

// Check implements Prober.
func (h HTTPGet) Check(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", h.URL, err)
	}
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", h.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("probe %s: %s: %q", h.URL, resp.Status, bytes.TrimSpace(body))
	}
	return fmt.Sprintf("%s %s", resp.Status, bytes.TrimSpace(body)), nil
}

// ContainerdVersion is ready when containerd's Version gRPC call answers on
// its socket: a real call, not just an accepted connection, because the
// socket is bound before containerd's services are registered.
//
// gRPC is HTTP/2 with a framed protobuf body, and the call takes an empty
// message, so this speaks it with net/http's cleartext HTTP/2 instead of
// pulling grpc-go and containerd's API modules into PID 1.
type ContainerdVersion struct{ Socket string }

// dialListening connects to the unix socket at path. The socket file
// appears at bind(2), a moment before listen(2): a connection in between
// is refused, so a refusal is retried briefly (retries times, pause
// apart; refusedRetries and refusedPause for the probe) rather than left to
// the next probe interval.
func dialListening(ctx context.Context, path string, retries int, pause time.Duration) (net.Conn, error) {
	var d net.Dialer
	for i := 0; ; i++ {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || i == retries {
			return conn, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

const (
	refusedRetries = 5
	refusedPause   = 10 * time.Millisecond
)

// versionMethod is containerd's API path for Version.Version
// (api/services/version/v1/version.proto).
const versionMethod = "/containerd.services.version.v1.Version/Version"

// Check implements Prober. Until containerd binds its socket there is
// nothing to call, so a Check first waits, within ctx, for the socket to
// appear, and calls as soon as it does: failing at once would leave the
// next try to the supervisor's ProbeInterval, on average half of it added
// to containerd's readiness and so to kubelet's start.
func (c ContainerdVersion) Check(ctx context.Context) (string, error) {
	if err := waitCreated(ctx, c.Socket); err != nil {
		return "", fmt.Errorf("probe containerd at %s: %w", c.Socket, err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols:         &protos,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialListening(ctx, c.Socket, refusedRetries, refusedPause)
		},
	}
	defer tr.CloseIdleConnections()
	// The empty request message: uncompressed, length 0.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://containerd"+versionMethod, bytes.NewReader(make([]byte, 5)))
	if err != nil {
		return "", fmt.Errorf("probe containerd at %s: %w", c.Socket, err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("probe containerd at %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("probe containerd at %s: reading reply: %w", c.Socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("probe containerd at %s: HTTP %s", c.Socket, resp.Status)
	}
	// A failed call may come "trailers-only", with its status in the headers.
	status, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if status == "" {
		status, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if status != "0" {
		return "", fmt.Errorf("probe containerd at %s: %s: grpc-status %q: %s", c.Socket, versionMethod, status, msg)
	}
	v, err := ParseVersionReply(body)
	if err != nil {
		return "", fmt.Errorf("probe containerd at %s: %w", c.Socket, err)
	}
	return "containerd " + v, nil
}

// ParseVersionReply reads containerd's VersionResponse out of one gRPC
// message frame and returns its version field (field 1).
func ParseVersionReply(b []byte) (string, error) {
	if len(b) < 5 {
		return "", fmt.Errorf("version reply: %d bytes, shorter than a gRPC frame header", len(b))
	}
	if b[0] != 0 {
		return "", fmt.Errorf("version reply: compressed frame (flag %d) not supported", b[0])
	}
	n := binary.BigEndian.Uint32(b[1:5])
	msg := b[5:]
	if uint64(n) > uint64(len(msg)) {
		return "", fmt.Errorf("version reply: frame says %d bytes, %d present", n, len(msg))
	}
	msg = msg[:n]
	version := ""
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return "", errors.New("version reply: bad field key")
		}
		msg = msg[k:]
		field, wire := key>>3, key&7
		switch wire {
		case 0:
			_, k := binary.Uvarint(msg)
			if k <= 0 {
				return "", fmt.Errorf("version reply: field %d: bad varint", field)
			}
			msg = msg[k:]
		case 1, 5:
			size := 8
			if wire == 5 {
				size = 4
			}
			if len(msg) < size {
				return "", fmt.Errorf("version reply: field %d: truncated", field)
			}
			msg = msg[size:]
		case 2:
			l, k := binary.Uvarint(msg)
			if k <= 0 || l > uint64(len(msg)-k) {
				return "", fmt.Errorf("version reply: field %d: bad length", field)
			}
			val := msg[k : k+int(l)]
			msg = msg[k+int(l):]
			if field == 1 {
				if !utf8.Valid(val) {
					return "", errors.New("version reply: version is not UTF-8")
				}
				version = string(val)
			}
		default:
			return "", fmt.Errorf("version reply: field %d: wire type %d not supported", field, wire)
		}
	}
	if version == "" {
		return "", errors.New("version reply: no version")
	}
	return version, nil
}
