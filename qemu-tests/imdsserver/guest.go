package imdsserver

import (
	"fmt"
	"net/url"
)

// QEMU's user network gives the guest this address and lets it reach the
// host's loopback at 10.0.2.2.
const (
	guestIPv4     = "10.0.2.15"
	guestHostname = "ip-10-0-2-15.us-west-2.compute.internal"
	hostFromGuest = "10.0.2.2"
)

// StartForGuest serves userData from a stand-in for the default instance
// as a QEMU user-network guest sees it, on a free host port, and returns the
// guest's kernel command-line argument pointing at it (berth.imds=...).
func StartForGuest(userData string) (arg string, stop func(), err error) {
	inst := DefaultInstance()
	inst.LocalIPv4 = guestIPv4
	inst.LocalHostname = guestHostname
	srv, err := New(Config{Instance: inst, UserData: []byte(userData)})
	if err != nil {
		return "", nil, fmt.Errorf("setting up the IMDS stand-in: %w", err)
	}
	hostURL, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("starting the IMDS stand-in: %w", err)
	}
	u, err := url.Parse(hostURL)
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("IMDS stand-in URL %q: %w", hostURL, err)
	}
	return "berth.imds=http://" + hostFromGuest + ":" + u.Port(), stop, nil
}
