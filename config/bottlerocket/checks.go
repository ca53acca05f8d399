package bottlerocket

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-node/berth/internal/syntax"
)

// The checks of single values. Each returns nil or an error that quotes
// the value (clipped) and says which rule it breaks. Where Bottlerocket's
// settings model has a rule, the check is that rule or, where kubelet is
// stricter, kubelet's; where the value goes on kubelet's command line,
// the check is the one nodeconfig makes of the same flag (package
// syntax), so that what this package accepts nodeconfig accepts too.

// Patterns compiled once; read-only after init.
var (
	// clusterNameRE is Bottlerocket's KubernetesClusterName (EKS's rule).
	clusterNameRE = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)
	// bootstrapTokenRE is a Kubernetes bootstrap token.
	bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	// durationRE is Bottlerocket's KubernetesDurationValue: hours,
	// minutes, seconds, milliseconds, each optional, in that order.
	durationRE = regexp.MustCompile(`^(([0-9]+\.)?[0-9]+h)?(([0-9]+\.)?[0-9]+m)?(([0-9]+\.)?[0-9]+s)?(([0-9]+\.)?[0-9]+ms)?$`)
	// quantityRE is a Kubernetes resource quantity as
	// resource.ParseQuantity reads it: a signed decimal, then a binary
	// (Ki..Ei) or decimal (n, u, m, k, M..E) suffix or an exponent.
	// Bottlerocket's pattern takes a little more ("1.2.3"), which kubelet
	// would then refuse.
	quantityRE = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$`)
	// cpuSetRE is the kernel's cpuset list format (0,3-5,8).
	cpuSetRE = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)
	// unsafeSysctlRE is a sysctl name, or a prefix ending in '*', as
	// kubelet's allowedUnsafeSysctls takes them.
	unsafeSysctlRE = regexp.MustCompile(`^[a-zA-Z0-9./_-]+\*?$`)
)

// evictionSignals are Bottlerocket's KubernetesEvictionKey values.
var evictionSignals = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}

// noControl rejects control characters (syntax.NoControl's set), quoting
// the value clipped.
func noControl(s string) error {
	for i, c := range s {
		if isControl(c) {
			return fmt.Errorf("%s has a control character (%U) at byte %d; control characters and line breaks are not allowed", quoteClipped(s), c, i)
		}
	}
	return nil
}

// isControl is C0, DEL, C1 and the Unicode line and paragraph
// separators, as package syntax counts them.
func isControl(c rune) bool {
	return c < 0x20 || c == 0x7f || c >= 0x80 && c <= 0x9f || c == '\u2028' || c == '\u2029'
}

// oneOf accepts exactly the given values.
func oneOf(values ...string) func(string) error {
	return func(s string) error {
		if slices.Contains(values, s) {
			return nil
		}
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = strconv.Quote(v)
		}
		return fmt.Errorf("want one of %s, got %s", strings.Join(quoted, ", "), quoteClipped(s))
	}
}

func noSpace(s string) error {
	if s == "" || strings.ContainsAny(s, " \t") {
		return fmt.Errorf("want a value without blanks, got %s", quoteClipped(s))
	}
	return nil
}

func httpsURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || strings.ContainsAny(s, " \t") {
		return fmt.Errorf("want an https URL (https://HOST[:PORT][/PATH]), got %s", quoteClipped(s))
	}
	return nil
}

// updateURL checks an update repository URL as berth's annotation takes
// it (syntax.HTTPURL).
func updateURL(s string) error { return syntax.HTTPURL(s) }

// urlHost is the host of an https URL already checked, or "".
func urlHost(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func clusterName(s string) error {
	if !clusterNameRE.MatchString(s) {
		return fmt.Errorf("want a cluster name (a letter or digit, then up to 99 letters, digits, '-' or '_'), got %s", quoteClipped(s))
	}
	return nil
}

func bootstrapToken(s string) error {
	// Never quote it: a token is a secret even when malformed.
	if !bootstrapTokenRE.MatchString(s) {
		return fmt.Errorf("not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	return nil
}

func duration(s string) error {
	if s == "" || !durationRE.MatchString(s) {
		return fmt.Errorf("want a duration such as 30s, 5m or 1h30m, got %s", quoteClipped(s))
	}
	return nil
}

func quantity(s string) error {
	if !quantityRE.MatchString(s) {
		return fmt.Errorf("want a Kubernetes quantity such as 100m, 512Mi or 1G, got %s", quoteClipped(s))
	}
	return nil
}

// threshold is an eviction threshold: a percentage below 100, or a
// quantity.
func threshold(s string) error {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f >= 100 {
			return fmt.Errorf("want a percentage from 0%% to below 100%%, got %s", quoteClipped(s))
		}
		return nil
	}
	if err := quantity(s); err != nil {
		return fmt.Errorf("want a percentage (10%%) or a quantity (500Mi), got %s", quoteClipped(s))
	}
	return nil
}

func evictionSignal(s string) error { return oneOf(evictionSignals...)(s) }

func cpuSet(s string) error {
	if !cpuSetRE.MatchString(s) {
		return fmt.Errorf("want a CPU list such as 0,3-5,8, got %s", quoteClipped(s))
	}
	return nil
}

func unsafeSysctl(s string) error {
	if !unsafeSysctlRE.MatchString(s) {
		return fmt.Errorf("want a sysctl name or a prefix ending in '*', got %s", quoteClipped(s))
	}
	return nil
}

func sysctlKey(s string) error  { return syntax.SysctlKey(s) }
func moduleName(s string) error { return syntax.ModuleName(s) }

// sysctlValue is a value written to /proc/sys: not empty (that would
// leave the key as it was while saying it was set), at most
// MaxSysctlValue bytes.
func sysctlValue(s string) error {
	switch {
	case s == "":
		return errors.New("empty value: leave the key out to keep the kernel's or berth's")
	case len(s) > MaxSysctlValue:
		return fmt.Errorf("value of %d bytes, more than %d", len(s), MaxSysctlValue)
	}
	return nil
}

func ipNoZone(s string) error    { return syntax.IPNoZone(s) }
func ipMaybeZone(s string) error { return syntax.IP(s, true) }
func dnsName(s string) error     { return syntax.DNSName(s) }

// clusterDomain is kubelet's clusterDomain, which kubelet's DNS code
// writes into every pod's resolv.conf search line: an RFC 1123 subdomain
// (nodeconfig holds a NodeConfig's to the same rule).
func clusterDomain(s string) error { return syntax.DNSSubdomain(s) }
func hostname(s string) error      { return syntax.Hostname(s) }
func nodeName(s string) error      { return syntax.NodeName(s) }
func labelKey(s string) error      { return syntax.LabelKey(s) }
func labelValue(s string) error    { return syntax.LabelValue(s) }
func taintSyntax(s string) error   { return syntax.Taint(s) }

// timeServer is a hostname or an IP address: chrony's server line takes
// the value as it is, so a URL would never work.
func timeServer(s string) error { return syntax.TimeServer(s) }

// registryHost is a registry as image references name it: host or
// host:port (an IPv6 address in brackets), or "*" for every registry.
func registryHost(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s is not a registry host (HOST, HOST:PORT, or \"*\" for every registry): %s", quoteClipped(s), why)
	}
	if s == "*" {
		return nil
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("no ']' after an IPv6 address")
		}
		host, port = s[1:end], s[end+1:]
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Zone() != "" {
			return bad("want an IPv6 address without a zone in brackets")
		}
		if port != "" && port[0] != ':' {
			return bad("want ':' and a port after ']'")
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(s, ":") {
			return bad("empty port")
		}
	} else {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			host, port = s[:i], s[i+1:]
			if port == "" {
				return bad("empty port")
			}
		}
		if syntax.IPNoZone(host) != nil {
			if err := syntax.DNSName(host); err != nil {
				return bad(err.Error())
			}
		}
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("port %s: want 1 to 65535", quoteClipped(port)))
		}
	}
	return nil
}

// mirrorURL is an http or https URL with a host.
func mirrorURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(s, " \t") {
		return fmt.Errorf("%s is not a mirror URL: want an http:// or https:// URL", quoteClipped(s))
	}
	return nil
}

// proxyURL is an HTTPS proxy as Bottlerocket takes it: host:port, or a
// URL.
func proxyURL(s string) error {
	full := s
	if !strings.Contains(s, "://") {
		full = "http://" + s
	}
	u, err := url.Parse(full)
	if err != nil || u.Host == "" || strings.ContainsAny(s, " \t,") {
		return fmt.Errorf("want a proxy as HOST[:PORT] or a URL, got %s", quoteClipped(s))
	}
	return nil
}

// noProxyEntry is one no-proxy entry: the entries are joined with commas.
func noProxyEntry(s string) error {
	if s == "" || strings.ContainsAny(s, " \t,") {
		return fmt.Errorf("want a host, domain or address without blanks or commas, got %s", quoteClipped(s))
	}
	return nil
}

// decodeCA decodes cluster-certificate: base64 (line breaks allowed, as
// Go's decoder skips them) of a PEM bundle holding at least one
// certificate. It does not parse the certificates: nodeconfig judges the
// bundle as it judges a NodeConfig's.
func decodeCA(s string) ([]byte, error) {
	ca, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not base64 (%w): want the cluster's CA bundle in PEM, base64-encoded, as DescribeCluster's certificateAuthority.data", err)
	}
	for rest := ca; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("the base64 decodes to no PEM CERTIFICATE block: want the cluster's CA bundle in PEM, base64-encoded")
		}
		if b.Type == "CERTIFICATE" {
			return ca, nil
		}
	}
}
