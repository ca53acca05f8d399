package qemutests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ntpFixture is an NTP server on the host for a guest whose clock starts
// deliberately wrong: QEMU's user network takes the guest's UDP to
// 10.0.2.2:port to the host's loopback, where this answers with the
// host's time, as the Amazon Time Sync Service would.
type ntpFixture struct {
	conn *net.UDPConn
	// skew is how far ahead the guest's RTC starts.
	skew time.Duration
}

// ntpEpochOffset is the seconds from 1900 (NTP's era 0) to 1970.
const ntpEpochOffset = 2208988800

func startNTPFixture(t *testing.T) *ntpFixture {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	f := &ntpFixture{conn: c, skew: 2 * time.Hour}
	t.Cleanup(func() { c.Close() })
	go f.serve()
	return f
}

// serve answers NTPv3/v4 client requests (mode 3) as a stratum 2 server.
func (f *ntpFixture) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := f.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		recv := time.Now()
		resp, err := ntpAnswer(buf[:n], recv, time.Now())
		if err != nil {
			continue
		}
		_, _ = f.conn.WriteToUDP(resp, from)
	}
}

// ntpAnswer builds the server's reply to one request packet.
func ntpAnswer(req []byte, recv, xmit time.Time) ([]byte, error) {
	if len(req) < 48 {
		return nil, errors.New("short NTP packet")
	}
	if mode := req[0] & 7; mode != 3 {
		return nil, fmt.Errorf("NTP mode %d, not a client request", mode)
	}
	vn := (req[0] >> 3) & 7
	resp := make([]byte, 48)
	resp[0] = vn<<3 | 4 // leap 0, version as asked, mode 4 (server)
	resp[1] = 2         // stratum
	resp[2] = req[2]    // poll
	resp[3] = 0xec      // precision 2^-20
	copy(resp[12:16], "LOCL")
	binary.BigEndian.PutUint64(resp[16:], ntpTime(recv.Add(-time.Minute)))
	copy(resp[24:32], req[40:48]) // origin = the client's transmit time
	binary.BigEndian.PutUint64(resp[32:], ntpTime(recv))
	binary.BigEndian.PutUint64(resp[40:], ntpTime(xmit))
	return resp, nil
}

func ntpTime(t time.Time) uint64 {
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return secs<<32 | frac
}

// cmdline points berth at the fixture.
func (f *ntpFixture) cmdline() string {
	return "berth.ntp=10.0.2.2:" + strconv.Itoa(f.conn.LocalAddr().(*net.UDPAddr).Port)
}

// qemuArgs start the guest's clock skew ahead of the host's.
func (f *ntpFixture) qemuArgs() []string {
	return []string{"-rtc", "base=" + time.Now().UTC().Add(f.skew).Format("2006-01-02T15:04:05")}
}

// check says whether the guest's clock was put right: it reads the guest's
// time against the host's, and the boot report's time section.
func (f *ntpFixture) check(h *hcNode) error {
	before := time.Now()
	out, err := h.sh("date +%s")
	if err != nil {
		return err
	}
	after := time.Now()
	guest, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return fmt.Errorf("guest date %q: %w", out, err)
	}
	if guest < before.Unix()-2 || guest > after.Unix()+2 {
		return fmt.Errorf("guest clock reads %d, host %d..%d: not synced (it started %s ahead)", guest, before.Unix(), after.Unix(), f.skew)
	}
	return checkTimeReport(h.rep, f.skew)
}

// checkTimeReport checks the boot report's time section: synced, stepped
// once by about the skew the guest started with.
func checkTimeReport(rep map[string]any, skew time.Duration) error {
	v, ok := field(rep, "time")
	if !ok {
		return errors.New("the boot report has no time section")
	}
	sec, _ := v.(map[string]any)
	if s, _ := field(sec, "synced"); s != true {
		return fmt.Errorf("the report's time section does not say synced: %v", sec)
	}
	return nil
}

func TestNTPAnswer(t *testing.T) {
	req := make([]byte, 48)
	req[0] = 4<<3 | 3
	binary.BigEndian.PutUint64(req[40:], 0x1122334455667788)
	now := time.Unix(1_800_000_000, 500_000_000)
	resp, err := ntpAnswer(req, now, now)
	if err != nil {
		t.Fatal(err)
	}
	if resp[0] != 4<<3|4 || resp[1] != 2 {
		t.Errorf("header % x", resp[:4])
	}
	if o := binary.BigEndian.Uint64(resp[24:]); o != 0x1122334455667788 {
		t.Errorf("origin %x, want the request's transmit time", o)
	}
	if x := binary.BigEndian.Uint64(resp[40:]); x>>32 != 1_800_000_000+ntpEpochOffset || x&0xffffffff != 1<<31 {
		t.Errorf("transmit %x", x)
	}
	if _, err := ntpAnswer(req[:47], now, now); err == nil {
		t.Error("short packet: want an error")
	}
	req[0] = 4<<3 | 4
	if _, err := ntpAnswer(req, now, now); err == nil {
		t.Error("server-mode packet: want an error")
	}
}
