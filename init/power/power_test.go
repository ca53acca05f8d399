package power

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		sig  os.Signal
		mode Mode
		ok   bool
	}{
		{unix.SIGTERM, PowerOff, true},
		{unix.SIGINT, Reboot, true},
		{unix.SIGPWR, PowerOff, true},
		{unix.SIGHUP, 0, false},
		{unix.SIGUSR1, 0, false},
	}
	for _, tt := range tests {
		req, ok := Decide(tt.sig)
		if ok != tt.ok || (ok && req.Mode != tt.mode) || (ok && req.Reason == "") {
			t.Errorf("Decide(%v) = %+v, %v; want mode %v, %v", tt.sig, req, ok, tt.mode, tt.ok)
		}
	}
	if PowerOff.String() != "poweroff" || Reboot.String() != "reboot" || Halt.String() != "halt" {
		t.Error("Mode names changed; the console lines and tests rely on them")
	}
}

// TestSignalsRun sends this test process a real SIGTERM and expects a
// poweroff request out of Run.
func TestSignalsRun(t *testing.T) {
	s := NotifySignals()
	out := make(chan Request, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go s.Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), out)
	if err := unix.Kill(os.Getpid(), unix.SIGHUP); err != nil { // logged, ignored
		t.Fatal(err)
	}
	if err := unix.Kill(os.Getpid(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-out:
		if req.Mode != PowerOff || req.Reason != "SIGTERM" {
			t.Errorf("request = %+v, want poweroff for SIGTERM", req)
		}
	case <-ctx.Done():
		t.Fatal("no request within 10s of SIGTERM")
	}
}

// acpiMsg builds a netlink datagram as the kernel's acpi_bus_generate_netlink_event does.
func acpiMsg(family uint16, class, bus string, typ, data uint32) []byte {
	ev := make([]byte, acpiEventSize)
	copy(ev[0:20], class)
	copy(ev[20:35], bus)
	binary.NativeEndian.PutUint32(ev[36:40], typ)
	binary.NativeEndian.PutUint32(ev[40:44], data)
	attr := make([]byte, nlaHdrLen, nlaHdrLen+len(ev))
	binary.NativeEndian.PutUint16(attr[0:2], uint16(nlaHdrLen+len(ev)))
	binary.NativeEndian.PutUint16(attr[2:4], acpiAttrEvent)
	attr = append(attr, ev...)
	msg := make([]byte, nlmsgHdrLen+genlHdrLen, nlmsgHdrLen+genlHdrLen+len(attr))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(nlmsgHdrLen+genlHdrLen+len(attr)))
	binary.NativeEndian.PutUint16(msg[4:6], family)
	msg[nlmsgHdrLen] = 1 // ACPI_GENL_CMD_EVENT
	msg[nlmsgHdrLen+1] = 1
	return append(msg, attr...)
}

func TestParseACPIMessages(t *testing.T) {
	const fam = 0x17
	b := acpiMsg(fam, "button/power", "LNXPWRBN:00", 0x80, 1)
	b = append(b, acpiMsg(0x99, "button/power", "other family", 0x80, 1)...)
	b = append(b, acpiMsg(fam, "ac_adapter", "ACPI0003:00", 0x80, 0)...)
	got, err := ParseACPIMessages(b, fam)
	if err != nil {
		t.Fatal(err)
	}
	want := []ACPIEvent{
		{DeviceClass: "button/power", BusID: "LNXPWRBN:00", Type: 0x80, Data: 1},
		{DeviceClass: "ac_adapter", BusID: "ACPI0003:00", Type: 0x80, Data: 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if !got[0].IsPowerButton() || got[1].IsPowerButton() {
		t.Error("IsPowerButton wrong")
	}
	if (ACPIEvent{DeviceClass: "button/sleep"}).IsPowerButton() {
		t.Error("sleep button taken for power button")
	}
}

func TestParseACPIMessagesMalformed(t *testing.T) {
	const fam = 0x17
	good := acpiMsg(fam, "button/power", "LNXPWRBN:00", 0x80, 1)
	cases := map[string][]byte{
		"short header":     good[:10],
		"length too big":   append([]byte{0xff, 0xff, 0, 0}, good[4:]...),
		"length too small": append([]byte{4, 0, 0, 0}, good[4:]...),
		"short event":      fixLen(good[:len(good)-8], fam),
	}
	for name, b := range cases {
		if _, err := ParseACPIMessages(b, fam); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// fixLen rewrites the netlink and attribute lengths of a cut message so
// only the event payload is short.
func fixLen(b []byte, fam uint16) []byte {
	b = append([]byte(nil), b...)
	binary.NativeEndian.PutUint32(b[0:4], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[nlmsgHdrLen+genlHdrLen:], uint16(len(b)-nlmsgHdrLen-genlHdrLen))
	return b
}

// FuzzParseACPIMessages: netlink datagrams are outside input; no panic,
// and only events of the given family come out.
func FuzzParseACPIMessages(f *testing.F) {
	f.Add(acpiMsg(0x17, "button/power", "LNXPWRBN:00", 0x80, 1), uint16(0x17))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, fam uint16) {
		evs, _ := ParseACPIMessages(b, fam)
		for _, ev := range evs {
			if len(ev.DeviceClass) > 20 || len(ev.BusID) > 15 {
				t.Fatalf("event fields overran their arrays: %+v", ev)
			}
		}
	})
}
