// Package ntptest is an NTP server for tests of berth's time sync: it
// answers client requests on a UDP socket with the host's time plus an
// offset, as a stratum-N server, or stays silent when told to. The
// timesync package's host tests and the QEMU tests (the guest reaches it
// through QEMU's user network) share it. It is test code: nothing that
// ships imports it.
package ntptest

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/berth-node/berth/internal/safe"
)

// Epoch is 1900-01-01, NTP's era 0, in Unix seconds.
const Epoch = 2208988800

// Stamp is t as an NTP timestamp: seconds since 1900 and a 32-bit fraction.
func Stamp(t time.Time) uint64 {
	sec := uint64(t.Unix() + Epoch)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return sec<<32 | frac
}

// Answer is a server's reply (mode 4) to the client request q, received at
// recv and sent at xmit (both in the server's time).
func Answer(q []byte, stratum uint8, recv, xmit time.Time) ([]byte, error) {
	if len(q) < 48 {
		return nil, errors.New("short NTP packet")
	}
	if mode := q[0] & 7; mode != 3 {
		return nil, errors.New("not a client request")
	}
	var r [48]byte
	r[0] = 0<<6 | 4<<3 | 4                        // LI none, version 4, mode server
	r[1] = stratum                                // stratum
	r[2] = 6                                      // poll 64 s
	r[3] = 0xec                                   // precision 2^-20 s
	binary.BigEndian.PutUint32(r[4:], 0x00000010) // root delay, 16.16 s
	binary.BigEndian.PutUint32(r[8:], 0x00000010) // root dispersion
	copy(r[12:16], "TEST")                        // reference id
	binary.BigEndian.PutUint64(r[16:], Stamp(recv.Add(-time.Second)))
	copy(r[24:32], q[40:48]) // origin = the client's transmit time
	binary.BigEndian.PutUint64(r[32:], Stamp(recv))
	binary.BigEndian.PutUint64(r[40:], Stamp(xmit))
	return r[:], nil
}

// Server is a running test NTP server.
type Server struct {
	conn    net.PacketConn
	offset  time.Duration
	stratum uint8
	done    chan struct{}

	mu     sync.Mutex
	silent bool
	asked  int
}

// Start serves on addr (e.g. "127.0.0.1:0") until Close, answering with
// the host's time plus offset.
func Start(addr string, offset time.Duration, stratum uint8) (*Server, error) {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{conn: conn, offset: offset, stratum: stratum, done: make(chan struct{})}
	safe.Go(slog.New(slog.DiscardHandler), "ntptest", s.serve, nil)
	return s, nil
}

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, 512)
	for {
		n, peer, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		recv := time.Now().Add(s.offset)
		s.mu.Lock()
		s.asked++
		silent := s.silent
		s.mu.Unlock()
		if silent {
			continue
		}
		if r, err := Answer(buf[:n], s.stratum, recv, time.Now().Add(s.offset)); err == nil {
			_, _ = s.conn.WriteTo(r, peer)
		}
	}
}

// Addr is the server's address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// Port is the server's UDP port.
func (s *Server) Port() int { return s.conn.LocalAddr().(*net.UDPAddr).Port }

// SetSilent makes the server read requests without answering them.
func (s *Server) SetSilent(b bool) { s.mu.Lock(); s.silent = b; s.mu.Unlock() }

// Asked is how many requests arrived so far.
func (s *Server) Asked() int { s.mu.Lock(); defer s.mu.Unlock(); return s.asked }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.conn.Close()
	<-s.done
	return err
}
