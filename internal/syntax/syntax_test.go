package syntax

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// badCase is a value a check must refuse, and words its error must hold.
type badCase struct {
	in   string
	rule string
}

// check runs f over good (must pass) and bad (must fail with an error that
// quotes the value and contains the rule text).
func check(t *testing.T, name string, f func(string) error, good []string, bad []badCase) {
	t.Helper()
	for _, s := range good {
		if err := f(s); err != nil {
			t.Errorf("%s(%q) = %v, want nil", name, s, err)
		}
	}
	for _, b := range bad {
		err := f(b.in)
		if err == nil {
			t.Errorf("%s(%q) = nil, want an error about %q", name, b.in, b.rule)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, quote(b.in)) {
			t.Errorf("%s(%q) = %q: does not quote the value", name, b.in, msg)
		}
		if !strings.Contains(msg, b.rule) {
			t.Errorf("%s(%q) = %q, want it to say %q", name, b.in, msg, b.rule)
		}
	}
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

var (
	long63  = strings.Repeat("a", 63)
	long64  = strings.Repeat("a", 64)
	name253 = strings.Repeat(long63+".", 3) + strings.Repeat("b", 61) // 4*63+... = 253
	name254 = name253 + "c"
)

func TestLengthsOfFixtures(t *testing.T) {
	if len(name253) != 253 || len(name254) != 254 {
		t.Fatalf("fixture lengths %d %d", len(name253), len(name254))
	}
}

func TestNoControl(t *testing.T) {
	check(t, "NoControl", NoControl,
		[]string{"", "plain", "with space", "ünïcödé", "日本", "a=b,c", "\xff invalid utf-8 is not a line break", "~!@#$%^&*()"},
		[]badCase{
			{"a\nb", "control character (U+000A)"},
			{"a\rb", "U+000D"},
			{"tab\there", "U+0009"},
			{"nul\x00", "U+0000"},
			{"del\x7f", "U+007F"},
			{"nel\u0085", "U+0085"},
			{"ls\u2028", "U+2028"},
			{"ps\u2029", "U+2029"},
			{"\x1b[31mred", "U+001B"},
			{"fe80::1%x\nnameserver 6.6.6.6", "line breaks are not allowed"},
		})
}

func TestDNSLabel(t *testing.T) {
	check(t, "DNSLabel", DNSLabel,
		[]string{"a", "A", "ip-10-0-12-34", "us-west-2a", "0", "9abc", long63, "x-y-z", "UPPER"},
		[]badCase{
			{"", "empty label"},
			{long64, "more than 63"},
			{"-a", "starts with '-'"},
			{"a-", "ends with '-'"},
			{"a.b", `has '.'`},
			{"a_b", `has '_'`},
			{"a b", `has ' '`},
			{"a\nb", `has '\n'`},
			{"müller", "punycode"},
		})
}

func TestDNSName(t *testing.T) {
	check(t, "DNSName", DNSName,
		[]string{"example.com", "example.com.", "EXAMPLE.Com", "a", "ip-10-0-12-34.us-west-2.compute.internal",
			"ec2.internal", "xn--mller-kva.example", "1.2.3.4", name253, name253 + ".", long63 + ".x"},
		[]badCase{
			{"", "empty name"},
			{".", "empty name"},
			{"ex ample.com", `has ' '`},
			{"-bad.com", `label "-bad" starts with '-'`},
			{"bad-.com", `ends with '-'`},
			{"a..b", "empty label"},
			{".a", "empty label"},
			{"a.b..", "empty label"},
			{"a\nb", `has '\n'`},
			{"a.example\nnameserver 6.6.6.6", `has '\n'`},
			{"corp.example#", `has '#'`},
			{"a;b", `has ';'`},
			{"under_score.example", `has '_'`},
			{name254, "254 characters, more than 253"},
			{long64 + ".com", "more than 63"},
			{"bücher.example", "punycode"},
			{"例え.jp", "punycode"},
			{"a.b\x00", `has '\x00'`},
		})
}

func TestDNSSubdomain(t *testing.T) {
	check(t, "DNSSubdomain", DNSSubdomain,
		[]string{"cluster.local", "a", "svc.example-1.internal", name253},
		[]badCase{
			{"", "not a DNS subdomain"},
			{"cluster.local\nnameserver 6.6.6.6", "not a DNS subdomain"},
			{"Cluster.Local", "lower-case"},
			{"cluster.local.", "not a DNS subdomain"},
			{"-a.local", "not a DNS subdomain"},
			{"a..b", "not a DNS subdomain"},
			{"under_score.local", "not a DNS subdomain"},
			{name254, "at most 253"},
		})
}

func TestHostname(t *testing.T) {
	check(t, "Hostname", Hostname,
		[]string{"node-a", "node-a.example", "ip-10-0-2-15", long63, strings.Repeat("a.", 32)[:63] + "b"},
		[]badCase{
			{"", "empty name"},
			{"node.", "trailing dot not allowed"},
			{"-bad", "starts with '-'"},
			{"a_b", `has '_'`},
			{long63 + ".bb", "more than the kernel's 64"},
			{"a\nb", `'\n'`},
		})
}

func TestNodeName(t *testing.T) {
	check(t, "NodeName", NodeName,
		[]string{"i-0123456789abcdef0", "ip-10-0-12-34.us-west-2.compute.internal", "Berth-Node", name253},
		[]badCase{
			{"", "empty name"},
			{"node.example.", "trailing dot not allowed"},
			{"a b", `has ' '`},
			{"ip-10-0-0-1.a.example b.example", `has ' '`},
			{"host\n--kubeconfig=/tmp/x", `has '\n'`},
			{name254, "more than 253"},
		})
}

func TestIP(t *testing.T) {
	withZone := func(s string) error { return IP(s, true) }
	check(t, "IP(zone ok)", withZone,
		[]string{"10.0.0.2", "fd00::53", "::1", "fe80::1%eth0", "fe80::1%2", "ff02::1%eth0.100", "fe80::1%br_ex-1", "::ffff:10.0.0.1"},
		[]badCase{
			{"", "not an IP address"},
			{"one", "not an IP address"},
			{" 10.0.0.2", "not an IP address"},
			{"10.0.0.2\n", "control character"},
			{"10.0.0.256", "not an IP address"},
			{"fe80::1%x\nnameserver 6.6.6.6", "has '\\n'"},
			{"fe80::1%eth0 x", "has ' '"},
			{"fe80::1%a#b", "has '#'"},
			{"fe80::1%averyveryverylongname", "longer than 15"},
			{"fd00::1%eth0", "only allowed on a link-local address"},
			{"2001:db8::1%1", "only allowed on a link-local address"},
			{"10.0.0.1/24", "not an IP address"},
		})
	check(t, "IPNoZone", IPNoZone,
		[]string{"10.0.12.34", "2600:1f14:abc:de00:1234:5678:9abc:def0", "fe80::1"},
		[]badCase{
			{"fe80::1%eth0", "zone (%eth0) is not allowed here"},
			{"fe80::1%x\nnameserver 6.6.6.6", "not allowed here"},
			{"10.0.0.1 ", "not an IP address"},
			{"", "not an IP address"},
		})
}

func TestLabelKey(t *testing.T) {
	check(t, "LabelKey", LabelKey,
		[]string{"app", "App.Name_1", "berth.dev/version", "node.kubernetes.io/instance-type", "a", "example.com/" + long63,
			"kubernetes.io/role", "k8s.io/a-b"},
		[]badCase{
			{"", "name part must be non-empty"},
			{"/name", "prefix part must be non-empty"},
			{"Example.com/name", "prefix part"},
			{"a/b/c", "a valid label key"},
			{"-app", "name part"},
			{"app-", "name part"},
			{"ap p", "name part"},
			{"a\nb", "name part"},
			{"example.com/" + long64, "must be no more than 63"},
			{"bad_prefix/x", "prefix part"},
			{"ünï", "name part"},
		})
}

func TestLabelValue(t *testing.T) {
	check(t, "LabelValue", LabelValue,
		[]string{"", "v1", "v0.1.0", "A_b-c.D", long63},
		[]badCase{
			{"-v", "a valid label must be an empty string"},
			{"v ", "a valid label"},
			{"v\n", "a valid label"},
			{long64, "must be no more than 63"},
			{"a/b", "a valid label"},
			{"é", "a valid label"},
		})
}

func TestLabels(t *testing.T) {
	check(t, "Labels", Labels,
		[]string{"", "a=b", "a=b,c=d", "a=b, c=d", "role=", "example.com/x=y,,z=1", " a = b "},
		[]badCase{
			{"a", `"a" has no '='`},
			{"a=b,c", `"c" has no '='`},
			{"a=b\nc=d", `control character (U+000A)`},
			{"\n", `control character (U+000A)`},
			{"a b=c", "is not a label key"},
			{"a=b c", "is not a label value"},
			{"-a=b", "is not a label key"},
			{"a=" + long64, "must be no more than 63"},
		})
}

func TestTaint(t *testing.T) {
	check(t, "Taint", Taint,
		[]string{"dedicated=gpu:NoSchedule", "key:NoExecute", "example.com/k=v:PreferNoSchedule", "k=:NoSchedule"},
		[]badCase{
			{"", "exactly one ':'"},
			{"key", "exactly one ':'"},
			{"key=value", "exactly one ':'"},
			{"a:b:NoSchedule", "exactly one ':'"},
			{"key:Whatever", `effect "Whatever" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
			{"key:noschedule", "is not one of"},
			{"key:NoSchedule\n", "is not one of"},
			{"k=v=w:NoSchedule", "more than one '='"},
			{"-k:NoSchedule", "is not a label key"},
			{"k=v v:NoSchedule", "is not a label value"},
			{"k\n=v:NoSchedule", "is not a label key"},
		})
	check(t, "Taints", Taints,
		[]string{"", "a:NoSchedule", "a:NoSchedule,b=c:NoExecute"},
		[]badCase{
			{"a:NoSchedule,", "exactly one ':'"},
			{"a:NoSchedule, b:NoExecute", "is not a label key"},
			{"a:NoSchedule,b", "exactly one ':'"},
			{"\n", "control character (U+000A)"},
		})
}

func TestEnvName(t *testing.T) {
	check(t, "EnvName", EnvName,
		[]string{"PATH", "_x", "HTTPS_PROXY", "a1"},
		[]badCase{
			{"", "not an environment variable name"},
			{"1A", "not an environment variable name"},
			{"A=B", "not an environment variable name"},
			{"A B", "not an environment variable name"},
			{"A\nB", "not an environment variable name"},
			{"Ä", "not an environment variable name"},
		})
}

// hasForbidden says whether s holds something no accepted name may hold:
// a control character, a blank or a line break.
func hasForbidden(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return isControl(r) || r == ' ' }) || !utf8.ValidString(s)
}

func seed(f *testing.F, ss ...string) {
	for _, s := range ss {
		f.Add(s)
	}
}

var seeds = []string{"", "a", "example.com", "example.com.", "-bad.com", "ex ample.com", "a\nb", "fe80::1%x\nnameserver 6.6.6.6",
	"fe80::1%eth0", "10.0.0.1", "berth.dev/version", "k=v:NoSchedule", "a=b,c=d", "bücher.example", name253, name254}

func FuzzDNSName(f *testing.F) {
	seed(f, seeds...)
	f.Fuzz(func(t *testing.T, s string) {
		err := DNSName(s)
		if err != nil {
			if !strings.Contains(err.Error(), quote(s)) {
				t.Fatalf("error %q does not quote %q", err, s)
			}
			return
		}
		if hasForbidden(s) || strings.ContainsAny(s, "#;_/\\") || len(strings.TrimSuffix(s, ".")) > MaxDNSName || s == "" {
			t.Fatalf("DNSName accepted %q", s)
		}
		if Hostname(s) == nil && (len(s) > MaxHostname || strings.HasSuffix(s, ".")) {
			t.Fatalf("Hostname accepted %q", s)
		}
		for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
			if DNSLabel(l) != nil {
				t.Fatalf("DNSName accepted %q with bad label %q", s, l)
			}
		}
	})
}

func FuzzIP(f *testing.F) {
	seed(f, seeds...)
	f.Fuzz(func(t *testing.T, s string) {
		errZone, errNoZone := IP(s, true), IPNoZone(s)
		if errZone != nil && errNoZone == nil {
			t.Fatalf("%q: accepted without zones, refused with them", s)
		}
		if errZone == nil && hasForbidden(s) {
			t.Fatalf("IP accepted %q", s)
		}
		if errNoZone == nil && strings.Contains(s, "%") {
			t.Fatalf("IPNoZone accepted a zone in %q", s)
		}
	})
}

func FuzzLabels(f *testing.F) {
	seed(f, seeds...)
	f.Fuzz(func(t *testing.T, s string) {
		if LabelKey(s) == nil && (hasForbidden(s) || s == "" || strings.Count(s, "/") > 1) {
			t.Fatalf("LabelKey accepted %q", s)
		}
		if LabelValue(s) == nil && (hasForbidden(s) || len(s) > 63) {
			t.Fatalf("LabelValue accepted %q", s)
		}
		if Labels(s) == nil && strings.ContainsFunc(s, isControl) {
			t.Fatalf("Labels accepted %q", s)
		}
		if Taints(s) == nil && (hasForbidden(s) && strings.TrimSpace(s) != "") {
			t.Fatalf("Taints accepted %q", s)
		}
	})
}

func FuzzNoControl(f *testing.F) {
	seed(f, seeds...)
	f.Fuzz(func(t *testing.T, s string) {
		err := NoControl(s)
		if err == nil && (strings.ContainsAny(s, "\n\r\x00\x7f\t\v\f") || strings.ContainsFunc(s, isControl)) {
			t.Fatalf("NoControl accepted %q", s)
		}
		if err != nil && !strings.ContainsFunc(s, isControl) {
			t.Fatalf("NoControl(%q) = %v, but it holds no control character", s, err)
		}
	})
}

func TestSysctlKey(t *testing.T) {
	check(t, "SysctlKey", SysctlKey,
		[]string{"vm.max_map_count", "net.ipv4.conf.all.rp_filter", "net/ipv4/ip_forward", "net.ipv4.conf.eth-1.rp_filter", strings.Repeat("a", 128)},
		[]badCase{
			{"", "not a sysctl name"},
			{".vm", "not a sysctl name"},
			{"/proc", "not a sysctl name"},
			{"vm.", "not a sysctl name"},
			{"net/", "not a sysctl name"},
			{"kernel/../../etc", "not a sysctl name"},
			{"vm max", "not a sysctl name"},
			{"vm\nmax", "not a sysctl name"},
			{strings.Repeat("a", 129), "not a sysctl name"},
		})
}

func TestModuleName(t *testing.T) {
	check(t, "ModuleName", ModuleName,
		[]string{"sctp", "ip_vs_lc", "nf-conntrack", strings.Repeat("m", 56)},
		[]badCase{
			{"", "not a kernel module name"},
			{"../x", "not a kernel module name"},
			{"a.ko", "not a kernel module name"},
			{"a b", "not a kernel module name"},
			{strings.Repeat("m", 57), "not a kernel module name"},
		})
}

func TestTimeServer(t *testing.T) {
	check(t, "TimeServer", TimeServer,
		[]string{"169.254.169.123", "fd00:ec2::123", "time.aws.com", "ntp1"},
		[]badCase{
			{"", "not an NTP server"},
			{"0.0.0.0", "unicast"},
			{"ff02::101", "unicast"},
			{"fe80::1%eth0", "not an NTP server"},
			{"time.aws.com:123", "not an NTP server"},
			{"ntp://time.aws.com", "not an NTP server"},
			{"a\nb", "not an NTP server"},
		})
}

func TestHTTPURL(t *testing.T) {
	check(t, "HTTPURL", HTTPURL,
		[]string{"https://updates.example.com", "http://10.0.2.2:8080/repo/", "https://[fd00::1]:8443/berth/amd64", "https://example.com/a%20b"},
		[]badCase{
			{"", "want an http"},
			{"ftp://example.com", "want an http"},
			{"example.com/repo", "want an http"},
			{"https://", "no host"},
			{"https://:443/x", "no host"},
			{"https://example.com/?x=1", "query or fragment"},
			{"https://example.com/#x", "query or fragment"},
			{"https://example.com/a b", "not a URL"},
			{"https://example.com/\n", "not a URL"},
			{"https://example.com/" + strings.Repeat("a", MaxURL), "at most"},
		})
	// Credentials: refused without showing the password.
	if err := HTTPURL("https://user:s3cret@example.com/r"); err == nil || !strings.Contains(err.Error(), "credentials") ||
		strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), `"https://user:xxxxx@example.com/r"`) {
		t.Errorf("HTTPURL with a password: %v", err)
	}
}

func FuzzHTTPURL(f *testing.F) {
	for _, s := range []string{"https://example.com/r", "http://[::1]:80/", "https://u@h", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if HTTPURL(s) != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			t.Fatalf("HTTPURL accepted %q", s)
		}
		if strings.ContainsAny(s, " \n\r\t#") {
			t.Fatalf("HTTPURL accepted %q", s)
		}
	})
}
