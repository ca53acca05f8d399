// Package logind serves the slice of systemd-logind, and of the D-Bus
// system bus in front of it, that kubelet's graceful node shutdown uses, so
// that kubelet drains the node by pod priority on a node with no systemd.
//
// kubelet (pkg/kubelet/nodeshutdown/systemd) connects to
// /run/dbus/system_bus_socket with godbus, says Hello, reads login1's
// InhibitDelayMaxUSec, may write /etc/systemd/logind.conf.d/99-kubelet.conf
// and ask systemd1 to KillUnit systemd-logind.service with SIGHUP so logind
// re-reads it, takes a "delay" shutdown inhibitor (an fd), subscribes to
// PrepareForShutdown with AddMatch, and closes the fd once its pods are
// down. The Server is the bus and both services in one: there is no routing
// between clients, because there is nobody else on this bus.
//
// The wire format (messages, signatures, fd indices) is godbus's; this
// package decides what to answer. The pure parts (the SASL handshake,
// match rules, logind.conf parsing, the wait bound) are apart from the
// socket code so they are table-tested and fuzzed.
//
// Left out, on purpose: name ownership by clients (RequestName is refused:
// no service but berth's lives here), message routing between clients,
// bus policy beyond "root only", introspection, activation, the
// NameOwnerChanged/NameAcquired signals (godbus does not need them), and
// every logind and systemd call kubelet does not make.
package logind

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/berth-node/berth/internal/safe"
)

// SystemBusSocket is where godbus's SystemBus() connects by default
// (/var/run/dbus/system_bus_socket, /var/run being /run on a node).
const SystemBusSocket = "/run/dbus/system_bus_socket"

// The names and objects on the bus.
const (
	busName         = "org.freedesktop.DBus"
	busPath         = dbus.ObjectPath("/org/freedesktop/DBus")
	peerIface       = "org.freedesktop.DBus.Peer"
	propsIface      = "org.freedesktop.DBus.Properties"
	login1Name      = "org.freedesktop.login1"
	login1Path      = dbus.ObjectPath("/org/freedesktop/login1")
	login1Manager   = "org.freedesktop.login1.Manager"
	systemd1Name    = "org.freedesktop.systemd1"
	systemd1Path    = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemd1Manager = "org.freedesktop.systemd1.Manager"
	logindUnit      = "systemd-logind.service"
)

const (
	// ReleaseMargin is what the wait for inhibitors adds to
	// InhibitDelayMaxSec: kubelet sets that to its shutdownGracePeriod,
	// which is all the pods' time, and still has to post the pods' and
	// the node's status after the last pod ends.
	ReleaseMargin = 10 * time.Second
	// MaxWait bounds the wait whatever the configuration says: EC2 does
	// not wait for a node longer than this either.
	MaxWait = 10 * time.Minute
	// SubscribeSettle is how old a client's subscription to
	// PrepareForShutdown must be before the signal goes to it. kubelet
	// subscribes (AddMatch) and only then hands godbus the channel the
	// signal is delivered to; a signal arriving in between is dropped in
	// kubelet, which then never releases its inhibitor, and the shutdown
	// waits out the whole bound (2m40s) for nothing. A power-off in that
	// window (CI hit it: the button 2 ms after kubelet's Inhibit) waits
	// at most this long instead. A client that subscribes while the
	// shutdown is under way gets the signal this long after it did.
	SubscribeSettle = time.Second
	// authTimeout bounds the handshake; kubelet's takes milliseconds.
	authTimeout = 10 * time.Second
	// writeTimeout bounds one message to a client: a client that does
	// not read must not hold up the shutdown.
	writeTimeout = 2 * time.Second
)

// Options configure a Server.
type Options struct {
	// Socket is the listening socket's path; empty means SystemBusSocket.
	Socket string
	// ConfFile and ConfDir are logind.conf and its drop-in directory;
	// empty means ConfFile and ConfDir.
	ConfFile, ConfDir string
	// AllowUID is the one uid let on the bus: root (0) on a node.
	AllowUID uint32
	// Margin is added to InhibitDelayMaxSec for the wait; 0 means
	// ReleaseMargin.
	Margin time.Duration
	// Settle is SubscribeSettle unless set (tests).
	Settle time.Duration
	Log    *slog.Logger
}

// Server is the bus endpoint and its login1 and systemd1 objects.
type Server struct {
	opt  Options
	log  *slog.Logger
	ln   *net.UnixListener
	guid string

	mu            sync.Mutex
	delay         time.Duration
	conns         map[*conn]struct{}
	nextConn      uint64
	inhibitors    map[uint64]*inhibitor
	nextInhibitor uint64
	preparing     bool
	closed        bool
}

// Listen reads logind's configuration and opens the socket (replacing a
// stale one). Serve then answers on it.
func Listen(opt Options) (*Server, error) {
	if opt.Socket == "" {
		opt.Socket = SystemBusSocket
	}
	if opt.ConfFile == "" {
		opt.ConfFile = ConfFile
	}
	if opt.ConfDir == "" {
		opt.ConfDir = ConfDir
	}
	if opt.Margin == 0 {
		opt.Margin = ReleaseMargin
	}
	if opt.Settle == 0 {
		opt.Settle = SubscribeSettle
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	var g [16]byte
	if _, err := rand.Read(g[:]); err != nil {
		return nil, fmt.Errorf("making the bus GUID: %w", err)
	}
	s := &Server{
		opt:        opt,
		log:        opt.Log,
		guid:       hex.EncodeToString(g[:]),
		conns:      map[*conn]struct{}{},
		inhibitors: map[uint64]*inhibitor{},
	}
	s.reload()
	if err := os.MkdirAll(filepath.Dir(opt.Socket), 0o755); err != nil {
		return nil, fmt.Errorf("creating the system bus directory %s: %w", filepath.Dir(opt.Socket), err)
	}
	if err := os.Remove(opt.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale system bus socket %s: %w", opt.Socket, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: opt.Socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on the system bus socket %s: %w", opt.Socket, err)
	}
	// Only root may talk to the bus; the handshake checks it again.
	if err := os.Chmod(opt.Socket, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("restricting the system bus socket %s: %w", opt.Socket, err)
	}
	s.ln = ln
	return s, nil
}

// Serve accepts clients until ctx ends or Close is called; each client is
// served on its own goroutine.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting on the system bus socket %s: %w", s.opt.Socket, err)
		}
		safe.Go(s.log, "system bus client", func() { s.serveConn(c) }, nil)
	}
}

// Close stops accepting, drops every client and lets go of every
// inhibitor. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	inhs := make([]*inhibitor, 0, len(s.inhibitors))
	for _, i := range s.inhibitors {
		inhs = append(inhs, i)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	for _, c := range conns {
		_ = c.uc.Close()
	}
	for _, i := range inhs {
		_ = i.r.Close()
	}
	return err
}

// reload re-reads InhibitDelayMaxSec, as logind does on SIGHUP. A bad file
// keeps what the good ones say, and is logged.
func (s *Server) reload() time.Duration {
	d, err := LoadInhibitDelay(s.opt.ConfFile, s.opt.ConfDir)
	if err != nil {
		s.log.Warn("reading logind's configuration; using what the readable files say", "inhibit_delay_max", d.String(), "err", err)
	}
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
	return d
}

// InhibitDelayMax is the effective InhibitDelayMaxSec.
func (s *Server) InhibitDelayMax() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delay
}

// WaitBound is how long PrepareForShutdown waits for inhibitors now.
func (s *Server) WaitBound() time.Duration {
	return waitBound(s.InhibitDelayMax(), s.opt.Margin)
}

// waitBound is InhibitDelayMaxSec plus the margin, at most MaxWait.
func waitBound(delay, margin time.Duration) time.Duration {
	if delay >= MaxWait || margin >= MaxWait || delay+margin >= MaxWait {
		return MaxWait
	}
	return delay + margin
}
