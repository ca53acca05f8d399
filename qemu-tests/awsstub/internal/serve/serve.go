// Package serve runs an http.Handler on a listener for the stand-ins, with
// the same Start contract as imdsserver: a base URL and an idempotent stop.
package serve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Start serves h on addr ("127.0.0.1:0" picks a free port); with tlsCfg it
// serves HTTPS. stop closes the listener and waits for the serve loop.
func Start(name, addr string, h http.Handler, tlsCfg *tls.Config, log *slog.Logger) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s: listening on %s: %w", name, addr, err)
	}
	scheme := "http"
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
		scheme = "https"
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("stand-in stopped", "name", name, "addr", ln.Addr().String(), "err", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// Close, not Shutdown: a stand-in owes idle clients no graceful
			// goodbye, and Shutdown would wait on their spare connections.
			_ = hs.Close()
			<-done
		})
	}
	return scheme + "://" + ln.Addr().String(), stop, nil
}

// Discard returns l, or a logger that drops everything when l is nil.
func Discard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Request is one entry in a stand-in's request log.
type Request struct {
	Method string
	Path   string
	Status int
	// Code is the AWS error code answered, empty on success.
	Code string
}

// Log is a bounded, concurrency-safe request log.
type Log struct {
	mu   sync.Mutex
	reqs []Request
}

// Add appends r, dropping the oldest entries past 10000.
func (l *Log) Add(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reqs) >= 10000 {
		l.reqs = l.reqs[1:]
	}
	l.reqs = append(l.reqs, r)
}

// All returns a copy of the log.
func (l *Log) All() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.reqs...)
}
