package logind

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// conn is one client of the bus.
type conn struct {
	s    *Server
	uc   *net.UnixConn
	pid  int32
	name string // the unique name Hello gave; empty before
	// unixFDs is what the handshake agreed.
	unixFDs bool

	wmu    sync.Mutex
	serial uint32

	rules []matchRule // under s.mu
	// subscribedAt is when the client last added a rule that selects
	// PrepareForShutdown, and signalled whether the signal went to it;
	// both under s.mu.
	subscribedAt time.Time
	signalled    bool
}

// serveConn runs one client: the handshake, then one message at a time
// until it hangs up or breaks the protocol.
func (s *Server) serveConn(uc *net.UnixConn) {
	c := &conn{s: s, uc: uc}
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = uc.Close()
	}()
	cred, err := peerCred(uc)
	if err != nil {
		s.log.Warn("system bus client refused: reading its credentials", "err", err)
		return
	}
	c.pid = cred.Pid
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()

	br := bufio.NewReaderSize(uc, 4096)
	_ = uc.SetReadDeadline(time.Now().Add(authTimeout))
	a := &authenticator{peerUID: cred.Uid, allowUID: s.opt.AllowUID, guid: s.guid}
	if err := handshake(br, uc, a); err != nil {
		s.log.Warn("system bus client refused", "pid", cred.Pid, "uid", cred.Uid, "err", err)
		return
	}
	c.unixFDs = a.unixFDs
	_ = uc.SetReadDeadline(time.Time{})
	for {
		// Fds a client sends are never received (plain reads), so the
		// kernel closes them; no call here takes one.
		m, err := dbus.DecodeMessage(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("system bus client dropped: unreadable message", "pid", c.pid, "name", c.name, "err", err)
			}
			return
		}
		if !c.handle(m) {
			return
		}
	}
}

// handshake runs the SASL exchange to BEGIN.
func handshake(br *bufio.Reader, w io.Writer, a *authenticator) error {
	nul, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("reading the handshake's first byte: %w", err)
	}
	if nul != 0 {
		return fmt.Errorf("handshake starts with %#x, not a NUL byte", nul)
	}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("reading a handshake line: %w", err)
		}
		reply, done, fail := a.step(strings.TrimRight(string(line), "\r\n"))
		if fail {
			return fmt.Errorf("handshake refused at %q", strings.TrimSpace(string(line)))
		}
		if reply != "" {
			if _, err := io.WriteString(w, reply+"\r\n"); err != nil {
				return fmt.Errorf("answering the handshake: %w", err)
			}
		}
		if done {
			return nil
		}
	}
}

func peerCred(uc *net.UnixConn) (*unix.Ucred, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// reply is a method's answer: a body, or an error; closeFD is an fd the
// body passes, closed once the message is sent (the client has its copy).
type reply struct {
	body    []any
	err     *dbus.Error
	closeFD int
}

func ok(body ...any) reply { return reply{body: body, closeFD: -1} }

func fail(name, msg string) reply {
	return reply{err: dbus.NewError(name, []any{msg}), closeFD: -1}
}

func headerString(m *dbus.Message, f dbus.HeaderField) string {
	v, found := m.Headers[f]
	if !found {
		return ""
	}
	switch x := v.Value().(type) {
	case string:
		return x
	case dbus.ObjectPath:
		return string(x)
	}
	return ""
}

// handle answers one message; false ends the connection.
func (c *conn) handle(m *dbus.Message) bool {
	if m.Type != dbus.TypeMethodCall {
		// Replies and signals from a client have nowhere to go: nobody
		// on this bus calls clients.
		return true
	}
	dest := headerString(m, dbus.FieldDestination)
	path := headerString(m, dbus.FieldPath)
	iface := headerString(m, dbus.FieldInterface)
	member := headerString(m, dbus.FieldMember)
	var r reply
	if c.name == "" && !(dest == busName && member == "Hello") {
		// As dbus-daemon: Hello comes first.
		r = fail("org.freedesktop.DBus.Error.AccessDenied", "Client tried to send a message other than Hello without being registered")
		c.answer(m, r)
		return false
	}
	switch dest {
	case busName:
		r = c.busCall(path, iface, member, m.Body)
	case login1Name:
		r = c.login1Call(path, iface, member, m.Body)
	case systemd1Name:
		r = c.systemd1Call(path, iface, member, m.Body)
	default:
		r = fail("org.freedesktop.DBus.Error.ServiceUnknown", fmt.Sprintf("The name %s is not on this bus (berth serves only %s, %s and %s)", dest, busName, login1Name, systemd1Name))
	}
	c.answer(m, r)
	return true
}

// answer sends r as the reply to call, unless the caller wants none.
func (c *conn) answer(call *dbus.Message, r reply) {
	if r.closeFD >= 0 {
		defer unix.Close(r.closeFD)
	}
	if call.Flags&dbus.FlagNoReplyExpected != 0 {
		return
	}
	sender := headerString(call, dbus.FieldDestination)
	h := map[dbus.HeaderField]dbus.Variant{
		dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
		dbus.FieldSender:      dbus.MakeVariant(sender),
	}
	if c.name != "" {
		h[dbus.FieldDestination] = dbus.MakeVariant(c.name)
	}
	out := &dbus.Message{Type: dbus.TypeMethodReply, Headers: h, Body: r.body}
	if r.err != nil {
		out.Type = dbus.TypeError
		h[dbus.FieldErrorName] = dbus.MakeVariant(r.err.Name)
		out.Body = r.err.Body
	}
	if len(out.Body) > 0 {
		h[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(out.Body...))
	}
	if err := c.send(out); err != nil {
		c.s.log.Warn("answering a system bus client", "pid", c.pid, "name", c.name, "member", headerString(call, dbus.FieldMember), "err", err)
	}
}

// send encodes m with godbus and writes it with its fds. godbus's Message
// keeps its serial unexported (a Conn stamps it), so the serial is put in
// its fixed place in the encoded header: bytes 8 to 11 of every D-Bus
// message, in the message's byte order (the specification's "Message
// Format").
func (c *conn) send(m *dbus.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := m.CountFds()
	if err != nil {
		return fmt.Errorf("encoding %s: %w", m.Type, err)
	}
	if n > 0 {
		if !c.unixFDs {
			return errors.New("the client did not negotiate fd passing")
		}
		m.Headers[dbus.FieldUnixFDs] = dbus.MakeVariant(uint32(n))
	}
	var buf bytes.Buffer
	fds, err := m.EncodeToWithFDs(&buf, binary.LittleEndian)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", m.Type, err)
	}
	b := buf.Bytes()
	c.serial++
	if c.serial == 0 { // 0 is not a valid serial
		c.serial++
	}
	binary.LittleEndian.PutUint32(b[8:12], c.serial)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = c.uc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, _, err := c.uc.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("writing %s: %w", m.Type, err)
	}
	return nil
}

const (
	errUnknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
	errUnknownObject = "org.freedesktop.DBus.Error.UnknownObject"
	errInvalidArgs   = "org.freedesktop.DBus.Error.InvalidArgs"
	errNotSupported  = "org.freedesktop.DBus.Error.NotSupported"
)

func unknownMethod(iface, member string) reply {
	return fail(errUnknownMethod, fmt.Sprintf("No method %s.%s here (berth's bus serves only what kubelet calls)", iface, member))
}

// busCall answers the bus's own methods: what godbus's Connect and
// AddMatchSignal call, and the name queries a client may make first.
func (c *conn) busCall(path, iface, member string, body []any) reply {
	if iface == peerIface && member == "Ping" {
		return ok()
	}
	if iface != busName && iface != "" {
		return unknownMethod(iface, member)
	}
	var arg string
	switch member {
	case "Hello":
		if c.name != "" {
			return fail("org.freedesktop.DBus.Error.Failed", "Already handled an Hello message")
		}
		c.s.mu.Lock()
		c.s.nextConn++
		c.name = fmt.Sprintf(":1.%d", c.s.nextConn)
		c.s.mu.Unlock()
		c.s.log.Debug("system bus client registered", "pid", c.pid, "name", c.name)
		return ok(c.name)
	case "GetId":
		return ok(c.s.guid)
	case "ListNames":
		return ok([]string{busName, login1Name, systemd1Name, c.name})
	case "RequestName":
		return fail("org.freedesktop.DBus.Error.AccessDenied", "berth's system bus serves its own names only")
	}
	if err := dbus.Store(body, &arg); err != nil {
		return fail(errInvalidArgs, fmt.Sprintf("%s.%s takes one string: %v", busName, member, err))
	}
	switch member {
	case "AddMatch":
		rule, err := parseMatchRule(arg)
		if err != nil {
			return fail("org.freedesktop.DBus.Error.MatchRuleInvalid", err.Error())
		}
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		if len(c.rules) >= maxRules {
			return fail("org.freedesktop.DBus.Error.LimitsExceeded", fmt.Sprintf("more than %d match rules", maxRules))
		}
		c.rules = append(c.rules, rule)
		if rule.matches(prepareForShutdown) {
			c.subscribedAt = time.Now()
			if c.s.preparing && !c.signalled {
				c.signalled = true
				safe.Go(c.s.log, "logind late signal", func() { c.s.signalLate(c) }, nil)
			}
		}
		return ok()
	case "RemoveMatch":
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		for i, r := range c.rules {
			if r.raw == arg {
				c.rules = append(c.rules[:i], c.rules[i+1:]...)
				return ok()
			}
		}
		return fail("org.freedesktop.DBus.Error.MatchRuleNotFound", "no such match rule: "+arg)
	case "GetNameOwner", "NameHasOwner":
		owned := arg == busName || arg == login1Name || arg == systemd1Name || arg == c.name
		if member == "NameHasOwner" {
			return ok(owned)
		}
		if !owned {
			return fail("org.freedesktop.DBus.Error.NameHasNoOwner", "Could not get owner of name '"+arg+"': no such name")
		}
		// The services have no unique name of their own: the bus is them.
		return ok(arg)
	}
	return unknownMethod(iface, member)
}

// systemd1Call answers KillUnit(systemd-logind.service, _, SIGHUP), the
// one systemd call kubelet makes, with what logind does on SIGHUP.
func (c *conn) systemd1Call(path, iface, member string, body []any) reply {
	if path != string(systemd1Path) {
		return fail(errUnknownObject, "no object "+path)
	}
	if iface == peerIface && member == "Ping" {
		return ok()
	}
	if iface != systemd1Manager || member != "KillUnit" {
		return unknownMethod(iface, member)
	}
	var unit, who string
	var sig int32
	if err := dbus.Store(body, &unit, &who, &sig); err != nil {
		return fail(errInvalidArgs, fmt.Sprintf("KillUnit takes (ssi): %v", err))
	}
	if unit != logindUnit {
		return fail("org.freedesktop.systemd1.NoSuchUnit", "Unit "+unit+" not loaded (berth runs no systemd units)")
	}
	if sig != int32(unix.SIGHUP) {
		return fail(errNotSupported, fmt.Sprintf("berth's logind takes SIGHUP (reload) only, not signal %d", sig))
	}
	d := c.s.reload()
	c.s.log.Info("logind configuration reloaded", "pid", c.pid, "inhibit_delay_max", d.String(), "wait_bound", waitBound(d, c.s.opt.Margin).String())
	return ok()
}

// login1Call answers the login1 Manager: Inhibit and its properties.
func (c *conn) login1Call(path, iface, member string, body []any) reply {
	if path != string(login1Path) {
		return fail(errUnknownObject, "no object "+path)
	}
	switch {
	case iface == peerIface && member == "Ping":
		return ok()
	case iface == propsIface && member == "Get":
		var pi, name string
		if err := dbus.Store(body, &pi, &name); err != nil {
			return fail(errInvalidArgs, fmt.Sprintf("Get takes (ss): %v", err))
		}
		if pi != login1Manager {
			return fail("org.freedesktop.DBus.Error.UnknownInterface", "no interface "+pi)
		}
		v, found := c.s.properties()[name]
		if !found {
			return fail("org.freedesktop.DBus.Error.UnknownProperty", "no property "+name+" (berth serves "+strings.Join(propertyNames, ", ")+")")
		}
		return ok(v)
	case iface == propsIface && member == "GetAll":
		var pi string
		if err := dbus.Store(body, &pi); err != nil {
			return fail(errInvalidArgs, fmt.Sprintf("GetAll takes (s): %v", err))
		}
		if pi != login1Manager {
			return ok(map[string]dbus.Variant{})
		}
		return ok(c.s.properties())
	case iface == propsIface && member == "Set":
		return fail("org.freedesktop.DBus.Error.PropertyReadOnly", "login1's properties are read-only")
	case iface == login1Manager && member == "Inhibit":
		var what, who, why, mode string
		if err := dbus.Store(body, &what, &who, &why, &mode); err != nil {
			return fail(errInvalidArgs, fmt.Sprintf("Inhibit takes (ssss): %v", err))
		}
		if !c.unixFDs {
			return fail(errNotSupported, "Inhibit returns an fd: negotiate fd passing first")
		}
		return c.s.inhibit(c.pid, what, who, why, mode)
	}
	return unknownMethod(iface, member)
}
