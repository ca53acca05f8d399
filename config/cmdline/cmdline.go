// Package cmdline parses the kernel command line (/proc/cmdline) with the
// kernel's own quoting rules and decodes berth's `berth.*` keys into a typed
// Config. It is pure: reading the file is the caller's one line.
//
// berth's keys (anything else under `berth.` draws a warning naming the key):
//
//	berth.onfail=reboot|reboot:N|halt|poweroff|stay
//	    What PID 1 does after a fatal boot error, once the error and the
//	    BERTH-REPORT line are on the console. reboot waits N seconds (30 when
//	    N is left out) and reboots; halt stops the CPUs (the console stays
//	    readable); poweroff powers the machine off; stay keeps berth running
//	    (power button and signals still work). Default: reboot:30.
//	berth.root=PATH
//	    A read-only root image inside the initramfs that berth loop-mounts
//	    and switches to before any service starts, for an image built with
//	    its root there (mkimage -root-in-initramfs, or an older image).
//	    Without the key, an image whose manifest names a root disk
//	    (root.serial, root.verity: what make image builds) takes its root
//	    from that disk, root.erofs attached read-only with that serial,
//	    behind dm-verity; an image whose manifest names none loop-mounts
//	    /root.erofs. berth.root=none stays on the initramfs (tests, rescue).
//	berth.verity=sha256:ROOTHASH:SALT:DATABLOCKS:HASHSTARTBLOCK
//	    Disk boot (make disk): the root is the root slot partition
//	    (berth-root-a or berth-root-b, on the boot disk) holding the erofs
//	    image followed by its dm-verity hash tree whose top block hashes
//	    to ROOTHASH: berth reads that block of each slot (at
//	    HASHSTARTBLOCK) and takes the slot that matches, slot a when both
//	    do. It sets up a verity device over it with these parameters
//	    (4096-byte blocks), reads it whole once, and switches to it;
//	    berth.root is then ignored. The image build appends it to the
//	    UKI's command line. A malformed value, no slot holding this root
//	    (the error names each slot and what it holds) or a block that does
//	    not match the hash stops the boot: berth never boots a root it
//	    cannot verify.
//	berth.slot=a|b
//	    Disk boot, optional: the root slot the root is in. The image build
//	    does not seal it (a release's one UKI boots from either slot); an
//	    older image's UKI has it, and berth then boots that slot only if
//	    it holds berth.verity='s root, and stops the boot otherwise.
//	berth.loglevel=debug|info|warn|error
//	    Lowest level printed on the console and /dev/kmsg. Default info.
//	berth.exec="PROG ARG..."
//	    Test and debugging hook, may repeat: after boot berth runs each
//	    command in order, stdout and stderr on the console, and logs
//	    `hook exited cmd=PROG code=N signal=S` when it ends. Arguments split
//	    on blanks; single quotes group words ('a b' is one argument).
//	berth.debugshell=TTY
//	    When /bin/sh exists (test images only), run it on /dev/TTY (for
//	    example ttyS1) as a session leader with TTY as its controlling
//	    terminal, and start it again when it exits. Inert on production
//	    images, which ship no shell.
//	berth.imds=URL|off
//	    Where IMDS lives (default: EC2's http://169.254.169.254, then
//	    http://[fd00:ec2::254]); off skips IMDS: no instance metadata and
//	    no user data, for appliances and tests configured from the image.
//	berth.config=PATH[,PATH]
//	    Extra NodeConfig files in the image, read after user data; may repeat.
//	berth.userdata=URL|PATH
//	    User data from an http:// or https:// URL (retried until it
//	    answers or the config phase's deadline), or from a file in the
//	    image, on a machine that is not an EC2 instance and has no NoCloud
//	    seed (config/sources: IMDS, then the seed, then this). See the
//	    userdataurl package.
//	berth.net=dhcp|static|off, berth.ip=ADDR/LEN, berth.gw=ADDR,
//	berth.dns=ADDR[,ADDR], berth.mtu=N, berth.iface=NAME|MAC,
//	berth.hostname=NAME, berth.ipv6=..., berth.net.timeout=DURATION
//	    The network: see the network package's ParseConfig. Default: DHCP
//	    on the first Ethernet link. A bad value is ignored with a warning
//	    naming the key; the other keys still apply.
//	berth.ntp=HOST[:PORT][,HOST[:PORT]...]|off
//	    NTP servers to ask before DHCP's and the Amazon Time Sync Service
//	    (169.254.169.123, fd00:ec2::123); HOST is an IP address (IPv6 in
//	    brackets when a port follows) or a DNS name, PORT defaults to 123.
//	    off leaves the clock alone. A bad entry is named in a warning and
//	    the whole key is ignored.
package cmdline

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/network"
)

// Param is one word of the command line: `key`, `key=value` or
// `key="quoted value"` with the quotes removed as the kernel removes them.
type Param struct {
	Key      string
	Value    string
	HasValue bool
}

// Cmdline is the parsed command line, in order, repeats kept.
type Cmdline struct {
	Params []Param
}

// Parse splits a command line the way the kernel's next_arg() does: words
// end at unquoted whitespace, a double quote toggles quoting anywhere in a
// word, the first '=' splits key from value, and one pair of quotes around
// the value (or around the whole word) is dropped. Everything after a bare
// "--" belongs to init's argv, not to the kernel, and is kept as params too.
func Parse(s string) *Cmdline {
	c := &Cmdline{}
	for {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
		if s == "" {
			return c
		}
		var p Param
		p, s = nextArg(s)
		c.Params = append(c.Params, p)
	}
}

func nextArg(args string) (Param, string) {
	quoted := false
	if args[0] == '"' {
		args = args[1:]
		quoted = true
	}
	inQuote := quoted
	// 0 means "no '=' yet", exactly as in the kernel, so a word starting
	// with '=' splits at its second '=' if any.
	equals := 0
	i := 0
	for ; i < len(args); i++ {
		ch := args[i]
		if isSpace(ch) && !inQuote {
			break
		}
		if equals == 0 && ch == '=' {
			equals = i
		}
		if ch == '"' {
			inQuote = !inQuote
		}
	}
	word, rest := args[:i], args[i:]
	var p Param
	if equals == 0 {
		p.Key = word
	} else {
		p.Key = word[:equals]
		p.Value = word[equals+1:]
		p.HasValue = true
		if strings.HasPrefix(p.Value, `"`) {
			p.Value = strings.TrimSuffix(p.Value[1:], `"`)
			quoted = false // the trailing quote is already gone
		}
	}
	if quoted {
		if p.HasValue {
			p.Value = strings.TrimSuffix(p.Value, `"`)
		} else {
			p.Key = strings.TrimSuffix(p.Key, `"`)
		}
	}
	return p, rest
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// Get returns the value of the last occurrence of key, as the kernel lets a
// later parameter override an earlier one.
func (c *Cmdline) Get(key string) (string, bool) {
	for i := len(c.Params) - 1; i >= 0; i-- {
		if c.Params[i].Key == key {
			return c.Params[i].Value, true
		}
	}
	return "", false
}

// All returns every value given for key, in order.
func (c *Cmdline) All(key string) []string {
	var out []string
	for _, p := range c.Params {
		if p.Key == key {
			out = append(out, p.Value)
		}
	}
	return out
}

// Has reports whether key appears at all, with or without a value.
func (c *Cmdline) Has(key string) bool {
	_, ok := c.Get(key)
	return ok
}

// Action is what to do after a fatal boot error.
type Action string

// The berth.onfail actions.
const (
	Reboot   Action = "reboot"
	Halt     Action = "halt"
	PowerOff Action = "poweroff"
	Stay     Action = "stay"
)

// DefaultRebootDelay is how long berth shows a fatal error before rebooting
// when berth.onfail does not say: long enough to read it on a console.
const DefaultRebootDelay = 30 * time.Second

// OnFail is the fatal boot error policy.
type OnFail struct {
	Action Action
	// Delay before acting; only reboot uses it.
	Delay time.Duration
}

func (o OnFail) String() string {
	if o.Action == Reboot {
		return fmt.Sprintf("reboot:%d", int(o.Delay/time.Second))
	}
	return string(o.Action)
}

// ParseOnFail decodes a berth.onfail value.
func ParseOnFail(s string) (OnFail, error) {
	name, arg, hasArg := strings.Cut(s, ":")
	switch Action(name) {
	case Reboot:
		if !hasArg {
			return OnFail{Action: Reboot, Delay: DefaultRebootDelay}, nil
		}
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 86400 {
			return OnFail{}, fmt.Errorf("berth.onfail=%q: the delay after reboot: must be whole seconds from 0 to 86400", s)
		}
		return OnFail{Action: Reboot, Delay: time.Duration(n) * time.Second}, nil
	case Halt, PowerOff, Stay:
		if hasArg {
			return OnFail{}, fmt.Errorf("berth.onfail=%q: only reboot takes a delay", s)
		}
		return OnFail{Action: Action(name)}, nil
	}
	return OnFail{}, fmt.Errorf("berth.onfail=%q: want reboot, reboot:N, halt, poweroff or stay", s)
}

// DefaultRoot is the root image berth loop-mounts when berth.root is unset
// and the manifest names no root disk.
const DefaultRoot = "/root.erofs"

// Config is what berth's keys ask for, defaults filled in.
type Config struct {
	OnFail OnFail
	// Root is the root image path; empty means berth.root=none.
	Root string
	// RootSet says a valid berth.root= chose Root. A malformed value is
	// warned about and left unset, so the manifest's root disk still wins
	// over the default path.
	RootSet    bool
	LogLevel   slog.Level
	Exec       [][]string
	DebugShell string
	NTP        NTP
}

// NTP is berth.ntp.
type NTP struct {
	// Off: no time sync at all.
	Off bool
	// Servers are host:port, in the order given.
	Servers []string
}

// maxNTPServers bounds berth.ntp: more would only slow the first burst.
const maxNTPServers = 8

// ParseNTP decodes a berth.ntp value; an error names the entry at fault.
func ParseNTP(v string) (NTP, error) {
	if v == "off" {
		return NTP{Off: true}, nil
	}
	if v == "" {
		return NTP{}, fmt.Errorf("berth.ntp=%q: want HOST[:PORT],... or off", v)
	}
	entries := strings.Split(v, ",")
	if len(entries) > maxNTPServers {
		return NTP{}, fmt.Errorf("berth.ntp=%q: %d servers, at most %d", v, len(entries), maxNTPServers)
	}
	var out NTP
	for i, e := range entries {
		addr, err := ntpServer(e)
		if err != nil {
			return NTP{}, fmt.Errorf("berth.ntp=%q: entry %d %q: %w", v, i+1, e, err)
		}
		out.Servers = append(out.Servers, addr)
	}
	return out, nil
}

// ntpServer checks one berth.ntp entry and returns it as host:port.
func ntpServer(e string) (string, error) {
	if e == "" {
		return "", fmt.Errorf("empty")
	}
	host, port := e, "123"
	if a, err := netip.ParseAddr(e); err == nil {
		// A bare IPv6 address: its colons are not a port.
		host = a.String()
	} else if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, p
	} else if strings.ContainsAny(e, ":[]") {
		return "", fmt.Errorf("want HOST, HOST:PORT, IPV6 or [IPV6]:PORT: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q: want 1 to 65535", port)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			return "", fmt.Errorf("address %s: want a unicast address without a zone", host)
		}
		return netip.AddrPortFrom(a, uint16(n)).String(), nil
	}
	if err := syntax.DNSName(host); err != nil {
		return "", fmt.Errorf("want an IP address or a DNS name: %w", err)
	}
	return net.JoinHostPort(host, port), nil
}

// The keys this package decodes itself; the others belong to the package
// that reads them (knownKeys).
const (
	KeyOnFail     = "berth.onfail"
	KeyRoot       = "berth.root"
	KeyLogLevel   = "berth.loglevel"
	KeyExec       = "berth.exec"
	KeyDebugShell = "berth.debugshell"
	KeyNTP        = "berth.ntp"
)

// knownKeys is every berth.* key, each from its owner, so that the
// unknown-key warning can never disagree with the code that reads a key.
func knownKeys() []string {
	return []string{
		KeyOnFail, KeyRoot, KeyLogLevel, KeyExec, KeyDebugShell, KeyNTP,
		verity.ParamKey, partition.SlotKey, imds.CmdlineKey, nodeconfig.CmdlineConfigKey, userdataurl.CmdlineKey,
		network.KeyNet, network.KeyIP, network.KeyGateway, network.KeyDNS, network.KeyMTU, network.KeyIface,
		network.KeyHostname, network.KeyIPv6, network.KeyTimeout,
	}
}

// isKnown reports whether key is one of berth's keys, for the unknown-key
// warning.
func isKnown(key string) bool { return slices.Contains(knownKeys(), key) }

// Decode reads berth's keys from c. A bad value keeps the default and
// comes back as a warning, as does an unknown berth.* key: a typo on the
// command line must not stop a node from booting.
func Decode(c *Cmdline) (Config, []string) {
	cfg := Config{
		OnFail:   OnFail{Action: Reboot, Delay: DefaultRebootDelay},
		Root:     DefaultRoot,
		LogLevel: slog.LevelInfo,
	}
	var warns []string
	for _, p := range c.Params {
		if strings.HasPrefix(p.Key, "berth.") && !isKnown(p.Key) {
			warns = append(warns, fmt.Sprintf("unknown kernel command line key %q ignored", p.Key))
		}
	}
	if v, ok := c.Get(KeyOnFail); ok {
		o, err := ParseOnFail(v)
		if err != nil {
			warns = append(warns, err.Error()+"; using "+cfg.OnFail.String())
		} else {
			cfg.OnFail = o
		}
	}
	if v, ok := c.Get(KeyRoot); ok {
		switch {
		case v == "none":
			cfg.Root, cfg.RootSet = "", true
		case strings.HasPrefix(v, "/") && syntax.NoControl(v) == nil:
			cfg.Root, cfg.RootSet = v, true
		default:
			warns = append(warns, fmt.Sprintf("berth.root=%q: want an absolute path (no control characters) or none; ignored (the manifest's root disk, else %s)", v, cfg.Root))
		}
	}
	if v, ok := c.Get(KeyLogLevel); ok {
		var l slog.Level
		if err := l.UnmarshalText([]byte(v)); err != nil {
			warns = append(warns, fmt.Sprintf("berth.loglevel=%q: want debug, info, warn or error; using info", v))
		} else {
			cfg.LogLevel = l
		}
	}
	for _, v := range c.All(KeyExec) {
		argv, err := SplitWords(v)
		if err != nil || len(argv) == 0 {
			warns = append(warns, fmt.Sprintf("berth.exec=%q: want a command; ignored", v))
			continue
		}
		// Words are logged one a line when the hook runs and ends.
		if i := slices.IndexFunc(argv, func(w string) bool { return syntax.NoControl(w) != nil }); i >= 0 {
			warns = append(warns, fmt.Sprintf("berth.exec=%q: word %d has a control character; ignored", v, i))
			continue
		}
		cfg.Exec = append(cfg.Exec, argv)
	}
	if v, ok := c.Get(KeyDebugShell); ok {
		if v == "" || strings.ContainsAny(v, "/. ") || syntax.NoControl(v) != nil {
			warns = append(warns, fmt.Sprintf("berth.debugshell=%q: want a tty name under /dev such as ttyS1; ignored", v))
		} else {
			cfg.DebugShell = v
		}
	}
	if v, ok := c.Get(KeyNTP); ok {
		n, err := ParseNTP(v)
		if err != nil {
			warns = append(warns, err.Error()+"; ignored")
		} else {
			cfg.NTP = n
		}
	}
	return cfg, warns
}

// SplitWords splits a berth.exec value into argv: blanks separate words and
// single quotes group them, since the kernel's double quotes are already
// spent on the value as a whole. There is no escaping.
func SplitWords(s string) ([]string, error) {
	var (
		out     []string
		cur     strings.Builder
		inWord  bool
		inQuote bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			inQuote = !inQuote
			inWord = true
		case isSpace(ch) && !inQuote:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated single quote in %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
