// Package syntax checks strings that come from outside the node (user data,
// instance metadata, DHCP, the kernel command line) before berth writes them
// into a file or puts them on a command line. Every file berth writes is
// line-oriented somewhere (resolv.conf, the plan description, kubelet's
// argv shown one word a line), so a value with a newline in it could add a
// directive of its own: `fe80::1%x\nnameserver 6.6.6.6` as a nameserver
// would give the node a second resolver. One package holds the rules so
// that the network phase, the plan and the runtime renderers agree on what
// is a hostname, an address or a label, and so that the rules can be
// fuzzed in one place.
//
// Every check is a pure function returning nil or an error that quotes the
// offending value (%q, so a control character shows as an escape) and says
// which rule it breaks. The checks only judge, they never change a value,
// so what they accept is exactly what gets written.
package syntax

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// Limits from the RFCs and the kernel.
const (
	// MaxDNSName is the longest DNS name in presentation form, without
	// the trailing dot (RFC 1035 2.3.4: 255 octets on the wire).
	MaxDNSName = 253
	// MaxDNSLabel is the longest label (RFC 1035 2.3.4).
	MaxDNSLabel = 63
	// MaxHostname is the kernel's UTS nodename limit (__NEW_UTS_LEN).
	MaxHostname = 64
	// MaxZone is the longest IPv6 zone berth accepts: a Linux interface
	// name (IFNAMSIZ less the NUL) or an interface index.
	MaxZone = 15
)

// NoControl rejects a string holding a control character anywhere: C0
// (below 0x20: NUL, tab, CR, LF...), DEL (0x7f), C1 (U+0080 to U+009F,
// NEL among them) and the Unicode line and paragraph separators
// (U+2028, U+2029). Parsers disagree on which of these end a line, so
// none of them may reach a file. Other bytes, including invalid UTF-8, are
// left alone: they cannot split a line.
func NoControl(s string) error {
	for i, r := range s {
		if isControl(r) {
			return fmt.Errorf("%q has a control character (%U) at byte %d; control characters and line breaks are not allowed", s, r, i)
		}
	}
	return nil
}

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == '\u2028' || r == '\u2029'
}

// DNSLabel checks one RFC 1123 label: 1 to 63 characters of letters,
// digits and '-', not starting or ending with '-'. Case does not matter.
func DNSLabel(s string) error {
	if msg := labelProblem(s); msg != "" {
		return fmt.Errorf("%q is not a DNS label: %s", s, msg)
	}
	return nil
}

// labelProblem says what is wrong with one label, or "".
func labelProblem(l string) string {
	switch {
	case l == "":
		return "empty label"
	case len(l) > MaxDNSLabel:
		return fmt.Sprintf("label %q is %d characters, more than %d", l, len(l), MaxDNSLabel)
	case l[0] == '-':
		return fmt.Sprintf("label %q starts with '-'", l)
	case l[len(l)-1] == '-':
		return fmt.Sprintf("label %q ends with '-'", l)
	}
	for i, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			if r == utf8.RuneError {
				return fmt.Sprintf("label %q has a byte that is not UTF-8 at %d; only letters, digits and '-' are allowed", l, i)
			}
			if r >= utf8.RuneSelf {
				return fmt.Sprintf("label %q has %q; only ASCII letters, digits and '-' are allowed (internationalised names must be in punycode)", l, r)
			}
			return fmt.Sprintf("label %q has %q; only letters, digits and '-' are allowed", l, r)
		}
	}
	return ""
}

// DNSName checks an RFC 1123 host or domain name: labels (see DNSLabel)
// joined by dots, at most 253 characters, with one optional trailing dot
// (a fully qualified name). Case does not matter. The root "." alone is
// not a name here: nothing berth writes wants it.
func DNSName(s string) error {
	if msg := nameProblem(s, true); msg != "" {
		return fmt.Errorf("%q is not a DNS name: %s", s, msg)
	}
	return nil
}

// nameProblem says what is wrong with a DNS name, or "".
func nameProblem(s string, trailingDot bool) string {
	name := s
	if trailingDot {
		name = strings.TrimSuffix(s, ".")
	}
	switch {
	case name == "":
		return "empty name"
	case len(name) > MaxDNSName:
		return fmt.Sprintf("%d characters, more than %d", len(name), MaxDNSName)
	case !trailingDot && len(name) > 1 && strings.HasSuffix(name, ".") && !strings.HasSuffix(name, ".."):
		return "trailing dot not allowed here"
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" {
			return "empty label (a leading dot, or two dots in a row)"
		}
		if msg := labelProblem(l); msg != "" {
			return msg
		}
	}
	return ""
}

// DNSSubdomain checks a Kubernetes DNS subdomain (RFC 1123, as
// apimachinery's IsDNS1123Subdomain has it): lower-case labels of letters,
// digits and '-' joined by dots, at most 253 characters, no trailing dot.
// kubelet's clusterDomain is one: kubelet's DNS code puts it, as it is,
// into every pod's resolv.conf search line and assumes this form.
func DNSSubdomain(s string) error {
	if errs := content.IsDNS1123Subdomain(s); len(errs) > 0 {
		return fmt.Errorf("%q is not a DNS subdomain: want lower-case letters, digits, '-' and '.', each label starting and ending with a letter or digit, at most %d characters (RFC 1123)", s, MaxDNSName)
	}
	return nil
}

// Hostname checks a name for the kernel's hostname (sethostname): an RFC
// 1123 name (see DNSName) without the trailing dot, at most 64 characters.
func Hostname(s string) error {
	if msg := nameProblem(s, false); msg != "" {
		return fmt.Errorf("%q is not a hostname: %s", s, msg)
	}
	if len(s) > MaxHostname {
		return fmt.Errorf("%q is not a hostname: %d characters, more than the kernel's %d", s, len(s), MaxHostname)
	}
	return nil
}

// NodeName checks a Kubernetes node name as kubelet takes it from
// --hostname-override: an RFC 1123 name (see DNSName) without the trailing
// dot. Upper case is accepted because kubelet lowercases the name.
func NodeName(s string) error {
	if msg := nameProblem(s, false); msg != "" {
		return fmt.Errorf("%q is not a node name: %s", s, msg)
	}
	return nil
}

// IP checks an IPv4 or IPv6 address in the form net/netip parses, with no
// surrounding space. An IPv6 zone (fe80::1%eth0) is accepted only when
// allowZone is set, only on a link-local address (elsewhere a zone means
// nothing) and only as an interface name or index: 1 to 15 letters,
// digits, '.', '-' or '_'.
func IP(s string, allowZone bool) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		// netip's message quotes the whole input again; the control check
		// first gives the clearer reason when there is one.
		if cerr := NoControl(s); cerr != nil {
			return fmt.Errorf("%q is not an IP address: %w", s, cerr)
		}
		return fmt.Errorf("%q is not an IP address: %w", s, err)
	}
	z := a.Zone()
	if z == "" {
		return nil
	}
	if !allowZone {
		return fmt.Errorf("%q: an IP address with a zone (%%%s) is not allowed here", s, z)
	}
	if !(a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast()) {
		return fmt.Errorf("%q: a zone is only allowed on a link-local address", s)
	}
	for _, r := range z {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("%q: zone %q has %q; want an interface name or index (letters, digits, '.', '-', '_')", s, z, r)
		}
	}
	if len(z) > MaxZone {
		return fmt.Errorf("%q: zone %q is longer than %d characters", s, z, MaxZone)
	}
	return nil
}

// IPNoZone checks an IP address where a zone makes no sense: node IPs,
// the cluster DNS address, nameservers that are not link-local.
func IPNoZone(s string) error { return IP(s, false) }

// LabelKey checks a Kubernetes label key (a qualified name): an optional
// DNS subdomain prefix (lower case, at most 253 characters) and '/', then
// a name of at most 63 characters matching
// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]. The rules are apimachinery's,
// so berth and the API server agree.
func LabelKey(s string) error {
	if errs := content.IsLabelKey(s); len(errs) > 0 {
		return fmt.Errorf("%q is not a label key: %s", s, strings.Join(errs, "; "))
	}
	return nil
}

// LabelValue checks a Kubernetes label value: empty, or at most 63
// characters matching the name part of LabelKey.
func LabelValue(s string) error {
	if errs := content.IsLabelValue(s); len(errs) > 0 {
		return fmt.Errorf("%q is not a label value: %s", s, strings.Join(errs, "; "))
	}
	return nil
}

// Labels checks a --node-labels value as kubelet parses it: KEY=VALUE
// pairs separated by commas, blanks around keys and values ignored, empty
// pairs skipped.
func Labels(s string) error {
	// kubelet trims line breaks too; refuse them before trimming can
	// hide them.
	if err := NoControl(s); err != nil {
		return fmt.Errorf("%q is not a node label list: %w", s, err)
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%q is not a node label list: %q has no '='; want KEY=VALUE[,KEY=VALUE...]", s, pair)
		}
		if err := LabelKey(strings.TrimSpace(k)); err != nil {
			return fmt.Errorf("%q is not a node label list: %w", s, err)
		}
		if err := LabelValue(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%q is not a node label list: %w", s, err)
		}
	}
	return nil
}

// taintEffects are the effects the API server accepts on a node taint.
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// Taint checks one node taint as kubelet's --register-with-taints parses
// it: KEY[=VALUE]:EFFECT, KEY a label key, VALUE a label value, EFFECT one
// of NoSchedule, PreferNoSchedule, NoExecute. kubelet would take a taint
// without an effect, but the API server refuses to register the node.
func Taint(s string) error {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(effect, ":") {
		return fmt.Errorf("%q is not a taint: want KEY[=VALUE]:EFFECT with exactly one ':'", s)
	}
	switch effect {
	case taintEffects[0], taintEffects[1], taintEffects[2]:
	default:
		return fmt.Errorf("%q is not a taint: effect %q is not one of %s", s, effect, strings.Join(taintEffects, ", "))
	}
	k, v, hasValue := strings.Cut(kv, "=")
	if err := LabelKey(k); err != nil {
		return fmt.Errorf("taint %q: %w", s, err)
	}
	if hasValue {
		if strings.Contains(v, "=") {
			return fmt.Errorf("%q is not a taint: more than one '='", s)
		}
		if err := LabelValue(v); err != nil {
			return fmt.Errorf("taint %q: %w", s, err)
		}
	}
	return nil
}

// Taints checks a --register-with-taints value: taints (see Taint)
// separated by commas, as kubelet splits it (no blanks allowed). Empty is
// no taints.
func Taints(s string) error {
	if err := NoControl(s); err != nil {
		return fmt.Errorf("%q is not a taint list: %w", s, err)
	}
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, t := range strings.Split(s, ",") {
		if err := Taint(t); err != nil {
			return fmt.Errorf("%q is not a taint list: %w", s, err)
		}
	}
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnvName checks an environment variable name: [A-Za-z_][A-Za-z0-9_]*.
// A name with '=' in it would change which variable the value lands in.
func EnvName(s string) error {
	if !envNameRE.MatchString(s) {
		return fmt.Errorf("%q is not an environment variable name: want [A-Za-z_][A-Za-z0-9_]*", s)
	}
	return nil
}

var (
	// sysctlKeyRE is Bottlerocket's SysctlKey.
	sysctlKeyRE = regexp.MustCompile(`^[a-zA-Z0-9./_-]{1,128}$`)
	// moduleNameRE is Bottlerocket's KmodKey (the kernel's 56-byte
	// MODULE_NAME_LEN on 64-bit hosts).
	moduleNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,56}$`)
)

// SysctlKey checks a kernel parameter's name as Bottlerocket's
// settings.kernel.sysctl takes it: up to 128 of a-z, A-Z, 0-9, '.', '/',
// '_' and '-', not starting with '.' or '/', and no "..". It becomes a
// path under /proc/sys, so nothing that climbs out of it may pass.
func SysctlKey(s string) error {
	if !sysctlKeyRE.MatchString(s) || strings.Contains(s, "..") || s[0] == '.' || s[0] == '/' || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "/") {
		return fmt.Errorf("%q is not a sysctl name: want up to 128 of a-z, A-Z, 0-9, '.', '/', '_', '-', not starting or ending with '.' or '/', no \"..\"", s)
	}
	return nil
}

// ModuleName checks a kernel module's name: up to 56 of a-z, A-Z, 0-9,
// '_' and '-' (Bottlerocket's KmodKey; the kernel's MODULE_NAME_LEN).
func ModuleName(s string) error {
	if !moduleNameRE.MatchString(s) {
		return fmt.Errorf("%q is not a kernel module name: want up to 56 of a-z, A-Z, 0-9, '_', '-'", s)
	}
	return nil
}

// TimeServer checks an NTP server as Bottlerocket's
// settings.ntp.time-servers and chrony's server lines take it: a DNS name
// (see DNSName) or a unicast IP address without a zone, and no port.
func TimeServer(s string) error {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("%q is not an NTP server: want a unicast address without a zone", s)
		}
		return nil
	}
	if msg := nameProblem(s, false); msg != "" {
		return fmt.Errorf("%q is not an NTP server: want a hostname or an IP address (%s)", s, msg)
	}
	return nil
}

// MaxURL bounds a URL berth takes from outside: far longer than any real
// repository or endpoint URL.
const MaxURL = 2048

// HTTPURL checks a base URL berth fetches from (an update repository): an
// http:// or https:// URL with a host, no credentials (they would be
// shown wherever the URL is; the error quotes the URL with its password
// redacted), no query or fragment (a base URL gets paths appended), no
// control characters or spaces, at most MaxURL bytes.
func HTTPURL(s string) error {
	if len(s) > MaxURL {
		return fmt.Errorf("%q is not a URL berth takes: %d bytes, at most %d", s, len(s), MaxURL)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q is not a URL: %q at byte %d (percent-encode it)", s, c, i)
		}
	}
	if err := NoControl(s); err != nil {
		return err
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %w", s, err)
	case !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://"):
		return fmt.Errorf("%q: want an http:// or https:// URL", s)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host", s)
	case u.User != nil:
		// The one error that does not quote the value: it holds a secret.
		return fmt.Errorf("%q: credentials do not belong in the URL", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#"):
		return fmt.Errorf("%q: a query or fragment is not allowed in a base URL", s)
	}
	return nil
}
