package logind

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// The server half of D-Bus's SASL handshake, for the one mechanism a
// system bus offers: EXTERNAL, where the kernel's SO_PEERCRED is the proof
// and the client's claimed uid must agree with it. Pure: one line in, one
// line out, so every path is a table test and the fuzzer's.
//
// Left out: DBUS_COOKIE_SHA1 and ANONYMOUS (a system bus offers neither),
// and any uid but root (the bus exists for kubelet, which runs as root;
// there is no polkit to ask).

type authState int

const (
	authWaitAuth  authState = iota // before an accepted AUTH
	authWaitData                   // AUTH EXTERNAL sent without an identity
	authWaitBegin                  // OK sent; NEGOTIATE_UNIX_FD or BEGIN next
	authDone
)

// maxAuthLines bounds the handshake: a client that loops through
// REJECTED/AUTH forever is cut off.
const maxAuthLines = 16

// authenticator is one connection's handshake state.
type authenticator struct {
	peerUID uint32 // from SO_PEERCRED
	// allowUID is the one uid let in: root on a node.
	allowUID uint32
	guid     string // the server's GUID, sent in OK
	state    authState
	lines    int
	// unixFDs is true once the client asked for fd passing; the Inhibit
	// reply carries an fd, so a client without it cannot take an
	// inhibitor.
	unixFDs bool
}

// step answers one handshake line (without its CR LF). reply is what to
// send back ("" for nothing); done means BEGIN was accepted and the
// message stream starts; fail means the connection must be closed.
func (a *authenticator) step(line string) (reply string, done, fail bool) {
	a.lines++
	if a.lines > maxAuthLines {
		return "", false, true
	}
	cmd, arg, _ := strings.Cut(line, " ")
	switch a.state {
	case authWaitAuth:
		switch cmd {
		case "AUTH":
			mech, data, hasData := strings.Cut(arg, " ")
			if mech != "EXTERNAL" {
				return "REJECTED EXTERNAL", false, false
			}
			if !hasData {
				a.state = authWaitData
				return "DATA", false, false
			}
			return a.external(data), false, false
		case "BEGIN":
			return "", false, true
		case "CANCEL", "ERROR":
			return "REJECTED EXTERNAL", false, false
		}
		return "ERROR unknown command", false, false
	case authWaitData:
		switch cmd {
		case "DATA":
			return a.external(arg), false, false
		case "BEGIN":
			return "", false, true
		case "CANCEL", "ERROR":
			a.state = authWaitAuth
			return "REJECTED EXTERNAL", false, false
		}
		return "ERROR expected DATA", false, false
	case authWaitBegin:
		switch cmd {
		case "BEGIN":
			if arg != "" {
				return "ERROR", false, false
			}
			a.state = authDone
			return "", true, false
		case "NEGOTIATE_UNIX_FD":
			a.unixFDs = true
			return "AGREE_UNIX_FD", false, false
		case "CANCEL", "ERROR":
			a.state = authWaitAuth
			a.unixFDs = false
			return "REJECTED EXTERNAL", false, false
		}
		return "ERROR expected BEGIN", false, false
	}
	return "", false, true
}

// external checks EXTERNAL's identity: the hex-encoded decimal uid the
// client claims (empty means "whatever the socket says") against the
// peer's uid, and that uid against the one allowed (root on a node).
func (a *authenticator) external(hexUID string) string {
	uid := a.peerUID
	if hexUID != "" {
		b, err := hex.DecodeString(hexUID)
		if err != nil {
			a.state = authWaitAuth
			return "REJECTED EXTERNAL"
		}
		n, err := strconv.ParseUint(string(b), 10, 32)
		if err != nil || uint32(n) != a.peerUID {
			a.state = authWaitAuth
			return "REJECTED EXTERNAL"
		}
		uid = uint32(n)
	}
	if uid != a.allowUID {
		a.state = authWaitAuth
		return "REJECTED EXTERNAL"
	}
	a.state = authWaitBegin
	return "OK " + a.guid
}
