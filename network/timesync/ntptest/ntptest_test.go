package ntptest

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/beevik/ntp"
)

func TestAnswer(t *testing.T) {
	q := make([]byte, 48)
	q[0] = 4<<3 | 3
	binary.BigEndian.PutUint64(q[40:], 0x1122334455667788)
	now := time.Unix(1_800_000_000, 500_000_000)
	r, err := Answer(q, 2, now, now)
	if err != nil {
		t.Fatal(err)
	}
	if r[0] != 4<<3|4 || r[1] != 2 {
		t.Errorf("header % x", r[:4])
	}
	if o := binary.BigEndian.Uint64(r[24:]); o != 0x1122334455667788 {
		t.Errorf("origin %x, want the request's transmit time", o)
	}
	if x := binary.BigEndian.Uint64(r[40:]); x>>32 != 1_800_000_000+Epoch || x&0xffffffff != 1<<31 {
		t.Errorf("transmit %x", x)
	}
	if _, err := Answer(q[:47], 2, now, now); err == nil {
		t.Error("short packet: want an error")
	}
	q[0] = 4<<3 | 4
	if _, err := Answer(q, 2, now, now); err == nil {
		t.Error("server-mode packet: want an error")
	}
}

// TestServerWithClient asks a real NTP client (the library berth uses) and
// checks the offset it measures, and silence.
func TestServerWithClient(t *testing.T) {
	s, err := Start("127.0.0.1:0", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := ntp.QueryWithOptions(s.Addr(), ntp.QueryOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.ClockOffset - 3*time.Second; d.Abs() > 100*time.Millisecond || r.Stratum != 1 {
		t.Errorf("offset %s stratum %d, want 3s and 1", r.ClockOffset, r.Stratum)
	}
	s.SetSilent(true)
	if _, err := ntp.QueryWithOptions(s.Addr(), ntp.QueryOptions{Timeout: 200 * time.Millisecond}); err == nil {
		t.Error("a silent server answered")
	}
	if s.Asked() != 2 {
		t.Errorf("asked %d times, want 2", s.Asked())
	}
}
