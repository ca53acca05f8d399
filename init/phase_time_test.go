package main

import (
	"reflect"
	"testing"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/network/timesync"
)

// TestTimeSources: user data's NTP servers come first, on port 123, then
// the command line's, DHCP's and the Amazon Time Sync Service; a server
// given twice is asked once, under its first origin.
func TestTimeSources(t *testing.T) {
	b := &boot{
		cfg:  cmdline.Config{NTP: cmdline.NTP{Servers: []string{"10.0.0.5:123", "192.0.2.1:123"}}},
		node: nodeState{net: &network.Result{Addresses: []string{"10.0.2.15/24"}, NTP: []string{"10.0.2.2"}}},
	}
	got, err := b.timeSources([]string{"time.example.com", "192.0.2.1", "fd00::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []timesync.Source{
		{Addr: "time.example.com:123", Origin: timesync.OriginUserData},
		{Addr: "192.0.2.1:123", Origin: timesync.OriginUserData},
		{Addr: "[fd00::1]:123", Origin: timesync.OriginUserData},
		{Addr: "10.0.0.5:123", Origin: timesync.OriginConfig},
		{Addr: "10.0.2.2:123", Origin: timesync.OriginDHCP},
		{Addr: timesync.AmazonTimeSync4, Origin: timesync.OriginAmazon},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sources\n%+v\nwant\n%+v", got, want)
	}
	if got, _ := b.timeSources(nil); got[0].Origin != timesync.OriginConfig {
		t.Errorf("without user data's servers the command line's come first: %+v", got)
	}
}
