package uevent

import (
	"context"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Event
		ok   bool
	}{
		{"add@/devices/pci0000:00/0000:00:02.0/virtio0\x00ACTION=add\x00DEVPATH=/devices/pci0000:00/0000:00:02.0/virtio0\x00SUBSYSTEM=virtio\x00MODALIAS=virtio:d00000001v00001AF4\x00SEQNUM=1234\x00",
			Event{Action: "add", DevPath: "/devices/pci0000:00/0000:00:02.0/virtio0", Subsystem: "virtio", Modalias: "virtio:d00000001v00001AF4"}, true},
		{"remove@/devices/virtual/block/loop0\x00ACTION=remove\x00DEVPATH=/devices/virtual/block/loop0\x00", Event{Action: "remove", DevPath: "/devices/virtual/block/loop0"}, true},
		{"add@/devices/pci0000:00/0000:00:05.0/nvme/nvme1/nvme1n1/nvme1n1p2\x00ACTION=add\x00SUBSYSTEM=block\x00MAJOR=259\x00MINOR=3\x00DEVNAME=nvme1n1p2\x00DEVTYPE=partition\x00PARTN=2\x00",
			Event{Action: "add", DevPath: "/devices/pci0000:00/0000:00:05.0/nvme/nvme1/nvme1n1/nvme1n1p2", Subsystem: "block", DevName: "nvme1n1p2", DevType: "partition"}, true},
		{"libudev\x00\xfe\xed\xca\xfe", Event{}, false},
		{"", Event{}, false},
		{"@/x\x00", Event{}, false},
	} {
		got, ok := Parse([]byte(c.in))
		if ok != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParse: uevents come from the kernel, but the parser must not panic
// whatever a datagram holds, and an event it accepts has an action and a
// device path.
func FuzzParse(f *testing.F) {
	f.Add([]byte("add@/devices/x\x00ACTION=add\x00MODALIAS=pci:v1\x00"))
	f.Add([]byte("remove@/devices/x/block/nvme0n1\x00SUBSYSTEM=block\x00DEVNAME=nvme0n1\x00DEVTYPE=disk\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, ok := Parse(b)
		if ok && (ev.Action == "" || ev.DevPath == "") {
			t.Fatalf("accepted %q as %+v", b, ev)
		}
	})
}

// TestReceiveDeadline opens the real socket (any user may listen to the
// kernel's group) and checks that waiting on it honours its deadline and
// its context.
func TestReceiveDeadline(t *testing.T) {
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Receive(context.Background(), start.Add(100*time.Millisecond), func(Event) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Receive waited %v for a 100 ms deadline", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := c.Receive(ctx, start.Add(time.Hour), func(Event) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Receive waited %v for a context of 100 ms", took)
	}
}
