package network

import (
	"net"
	"strings"
	"testing"
)

func mac(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }

func TestChoosePrimary(t *testing.T) {
	links := []LinkInfo{
		{Index: 5, Name: "eth1", MAC: mac("02:00:00:00:00:05"), Type: "device"},
		{Index: 1, Name: "lo", Type: "device", Loopback: true},
		{Index: 2, Name: "docker0", MAC: mac("02:00:00:00:00:02"), Type: "bridge"},
		{Index: 3, Name: "veth1", MAC: mac("02:00:00:00:00:03"), Type: "veth"},
		{Index: 6, Name: "dummy0", MAC: mac("02:00:00:00:00:06"), Type: "device", Virtual: true},
		{Index: 4, Name: "ens5", MAC: mac("02:00:00:00:00:04"), Type: "device"},
		{Index: 7, Name: "ib0", MAC: make(net.HardwareAddr, 20), Type: "device"},
	}
	for _, tc := range []struct{ want, pick string }{
		{"", "ens5"}, // lowest-index physical Ethernet
		{"eth1", "eth1"},
		{"veth1", "veth1"}, // named: taken whatever its type
		{"02:00:00:00:00:05", "eth1"},
		{"02-00-00-00-00-02", "docker0"},
	} {
		got, err := ChoosePrimary(links, tc.want)
		if err != nil || got.Name != tc.pick {
			t.Errorf("ChoosePrimary(%q) = %q, %v; want %q", tc.want, got.Name, err, tc.pick)
		}
	}
	for _, tc := range []struct{ want, msg string }{
		{"eth9", `no link named "eth9" (links: lo/device, docker0/bridge, veth1/veth, ens5/device, eth1/device, dummy0/device, ib0/device)`},
		{"02:00:00:00:00:99", "no link has MAC 02:00:00:00:00:99"},
	} {
		if _, err := ChoosePrimary(links, tc.want); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ChoosePrimary(%q) error %v, want %q", tc.want, err, tc.msg)
		}
	}
	if _, err := ChoosePrimary(links[1:5], ""); err == nil || !strings.Contains(err.Error(), "no physical Ethernet link") {
		t.Errorf("no NIC: error %v", err)
	}
	if _, err := ChoosePrimary(nil, ""); err == nil || !strings.Contains(err.Error(), "links: none") {
		t.Errorf("no links: error %v", err)
	}
}
