// Package userdataurl reads user data from where berth.userdata= on the
// kernel command line points: an http:// or https:// URL, or a file in the
// image. It is the source after IMDS and a NoCloud seed (config/sources
// decides which is used), for a machine that has neither, as Talos's
// talos.config=URL and Bottlerocket's user-data file on bare metal.
//
// Parse is pure; Fetch reads. What comes back is user data's bytes,
// unparsed: the config phase hands them to nodeconfig as a file's (any
// format berth reads, up to userdata.MaxDecodedSize).
package userdataurl

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/berth-node/berth/config/userdata"
	"github.com/berth-node/berth/internal/syntax"
)

// CmdlineKey is the kernel command-line key; config/cmdline's list of
// known keys takes it from here.
const CmdlineKey = "berth.userdata"

// Kind is where the user data is.
type Kind string

// The kinds of location.
const (
	HTTP  Kind = "http"
	HTTPS Kind = "https"
	File  Kind = "file"
)

// Location is a parsed berth.userdata= value.
type Location struct {
	Kind Kind `json:"kind"`
	// Where is the URL or the path, as given.
	Where string `json:"where"`
}

func (l Location) String() string { return l.Where }

// Parse reads berth.userdata='s value: an http:// or https:// URL with a
// host and no credentials (the command line is readable by every process
// on the node, and is printed in boot.json), or an absolute path in the
// image. A query is allowed (a server may key its answer by it).
func Parse(v string) (Location, error) {
	switch {
	case strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://"):
		// syntax.HTTPURL is for base URLs, which take no query; a user
		// data URL may have one.
		base, _, _ := strings.Cut(v, "?")
		if err := syntax.HTTPURL(base); err != nil {
			return Location{}, fmt.Errorf("%s=: %w", CmdlineKey, err)
		}
		if _, err := url.Parse(v); err != nil {
			return Location{}, fmt.Errorf("%s=%q: %w", CmdlineKey, v, err)
		}
		k := HTTP
		if strings.HasPrefix(v, "https://") {
			k = HTTPS
		}
		return Location{Kind: k, Where: v}, nil
	case strings.HasPrefix(v, "/"):
		if err := syntax.NoControl(v); err != nil {
			return Location{}, fmt.Errorf("%s=%q: %w", CmdlineKey, v, err)
		}
		if len(v) > syntax.MaxURL {
			return Location{}, fmt.Errorf("%s=: a path of %d bytes, at most %d", CmdlineKey, len(v), syntax.MaxURL)
		}
		return Location{Kind: File, Where: v}, nil
	}
	return Location{}, fmt.Errorf("%s=%q: want an http:// or https:// URL, or an absolute path in the image", CmdlineKey, v)
}

// Options tune Fetch; the zero value is a node's.
type Options struct {
	// Client makes the requests; nil is one with the image's CAs (Go's
	// system pool: /etc/ssl/certs) and no proxy.
	Client *http.Client
	// Attempt bounds one request (default 10 s); the caller's context
	// bounds them all.
	Attempt time.Duration
	// Backoff is the first wait between attempts (default 500 ms),
	// doubled up to MaxBackoff (default 5 s).
	Backoff, MaxBackoff time.Duration
}

// Attempt is one request, for the boot report.
type Attempt struct {
	DurationMs int64  `json:"durationMs"`
	Status     int    `json:"status,omitempty"`
	Err        string `json:"error,omitempty"`
}

// Fetch reads the user data at loc. A file is read once: the image does
// not change. A URL is retried until it answers 200 or ctx ends, because
// at boot the server, or the route to it, may not be up yet; the error
// then says what the last attempt got. The attempts are returned either
// way. More than userdata.MaxDecodedSize bytes is refused.
func Fetch(ctx context.Context, log *slog.Logger, loc Location, opts Options) ([]byte, []Attempt, error) {
	if loc.Kind == File {
		data, err := readFile(loc.Where)
		if err != nil {
			return nil, nil, fmt.Errorf("%s=%s: %w", CmdlineKey, loc.Where, err)
		}
		return data, nil, nil
	}
	c := opts.Client
	if c == nil {
		c = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // the node has no proxy settings at boot
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout: 10 * time.Second,
		}}
		defer c.CloseIdleConnections()
	}
	per := cmp.Or(opts.Attempt, 10*time.Second)
	wait := cmp.Or(opts.Backoff, 500*time.Millisecond)
	maxWait := cmp.Or(opts.MaxBackoff, 5*time.Second)
	var attempts []Attempt
	var last error // the last attempt's error that was not the deadline's
	for {
		start := time.Now()
		data, status, err := get(ctx, c, loc.Where, per)
		a := Attempt{DurationMs: time.Since(start).Milliseconds(), Status: status}
		if err != nil {
			a.Err = err.Error()
		}
		attempts = append(attempts, a)
		if err == nil {
			return data, attempts, nil
		}
		if errors.Is(err, errTooBig) {
			return nil, attempts, fmt.Errorf("%s=%s: %w", CmdlineKey, loc.Where, err)
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		log.Warn("user data URL: no answer yet; retrying", "url", loc.Where, "attempt", len(attempts), "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, attempts, fmt.Errorf("%s=%s: %d attempt(s), the last answered: %w (gave up: %w)", CmdlineKey, loc.Where, len(attempts), last, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
	}
}

var errTooBig = fmt.Errorf("over the %d-byte limit (userdata.MaxDecodedSize)", userdata.MaxDecodedSize)

// get makes one request; status is the HTTP status when one came.
func get(ctx context.Context, c *http.Client, u string, per time.Duration) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, per)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, unwrapURL(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drained a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, resp.StatusCode, fmt.Errorf("HTTP %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, userdata.MaxDecodedSize+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > userdata.MaxDecodedSize {
		return nil, resp.StatusCode, errTooBig
	}
	return data, resp.StatusCode, nil
}

// unwrapURL drops url.Error's "Get \"URL\": " prefix: the caller's
// error names the URL already.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, userdata.MaxDecodedSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > userdata.MaxDecodedSize {
		return nil, errTooBig
	}
	return data, nil
}
