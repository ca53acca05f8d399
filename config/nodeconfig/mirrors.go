package nodeconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-node/berth/internal/syntax"
)

// RegistryMirrorsAnnotation sends image pulls through pull-through caches:
// a JSON object from registry host (as image references name it, host or
// host:port, or "*" for every registry) to the mirror URLs containerd
// tries, in order, before the registry itself. Bottlerocket's
// settings.container-registry.mirrors, for fleets behind a cache, and how a
// QEMU guest reaches the test registry:
//
//	metadata:
//	  annotations:
//	    berth.dev/registry-mirrors: '{"docker.io": ["https://mirror.example.com"]}'
const RegistryMirrorsAnnotation = "berth.dev/registry-mirrors"

// AllRegistries is the registry key that applies to every registry
// without a key of its own (containerd's _default host directory).
const AllRegistries = "*"

// RegistryMirrors is one registry's mirrors.
type RegistryMirrors struct {
	// Registry is host, host:port or AllRegistries.
	Registry string
	// Endpoints are http or https URLs with a host and maybe a path, in
	// the order containerd tries them.
	Endpoints []string
}

// subError is one bad entry of the annotation's value; Sub is its path
// inside the value (`["docker.io"][0]`), appended to the annotation's.
type subError struct {
	Sub string
	Err error
}

func (e *subError) Error() string { return e.Sub + ": " + e.Err.Error() }

func (e *subError) Unwrap() error { return e.Err }

// RegistryMirrorsOf reads RegistryMirrorsAnnotation from a NodeConfig;
// none when it is absent. Errors name the field path of each bad entry.
func RegistryMirrorsOf(cfg *NodeConfig) ([]RegistryMirrors, error) {
	ann, err := Annotations(cfg)
	v, ok := ann[RegistryMirrorsAnnotation]
	if !ok {
		return nil, err
	}
	ms, merr := ParseRegistryMirrors(v)
	if merr != nil {
		merr = annotationErrors(RegistryMirrorsAnnotation, merr)
	}
	return ms, errors.Join(err, merr)
}

// annotationErrors puts each of err's problems under annotation key's
// path.
func annotationErrors(key string, err error) error {
	var out []error
	for _, e := range flatten(err) {
		out = append(out, &annotationError{Key: key, Err: e})
	}
	return errors.Join(out...)
}

// ParseRegistryMirrors parses RegistryMirrorsAnnotation's value, strictly:
// a duplicate key or mirror is an error (containerd would read the
// duplicate table as a broken hosts.toml and silently pull without
// mirrors), and so is an empty list. The result is sorted by registry;
// with an error, it holds the registries that were good.
func ParseRegistryMirrors(value string) ([]RegistryMirrors, error) {
	dec := json.NewDecoder(strings.NewReader(value))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf(`want a JSON object of registry host to a list of mirror URLs, as {"docker.io": ["https://mirror.example.com"]}; got %s`, cutMirror(value))
	}
	var out []RegistryMirrors
	var errs []error
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, fmt.Errorf("reading the JSON object: %w", err)
		}
		key := tok.(string) // json.Decoder only yields string keys inside an object
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out, fmt.Errorf("reading the JSON object at %q: %w", cutMirror(key), err)
		}
		sub := "[" + strconv.Quote(cutMirror(key)) + "]"
		if seen[key] {
			errs = append(errs, &subError{Sub: sub, Err: errors.New("registry listed twice")})
			continue
		}
		seen[key] = true
		if err := registryKey(key); err != nil {
			errs = append(errs, &subError{Sub: sub, Err: err})
			continue
		}
		eps, err := mirrorList(sub, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, RegistryMirrors{Registry: key, Endpoints: eps})
	}
	if _, err := dec.Token(); err != nil {
		return out, fmt.Errorf("reading the JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return out, errors.New("more than one JSON value")
	}
	slices.SortFunc(out, func(a, b RegistryMirrors) int { return strings.Compare(a.Registry, b.Registry) })
	return out, errors.Join(errs...)
}

// mirrorList checks one registry's list of mirror URLs.
func mirrorList(sub string, raw json.RawMessage) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || isNull(raw) {
		return nil, &subError{Sub: sub, Err: fmt.Errorf("want a list of mirror URLs, got %s", cutRaw(raw))}
	}
	if len(items) == 0 {
		return nil, &subError{Sub: sub, Err: errors.New("no mirrors: list at least one, or leave the registry out")}
	}
	return uniqueStrings(sub, items, "URL string", MirrorURL)
}

// uniqueStrings checks each item of a JSON list: a string (described by
// what in the error) that passes check, given once. Each error names its
// item as sub[i]; the result holds the good items, in order.
func uniqueStrings(sub string, items []json.RawMessage, what string, check func(string) error) ([]string, error) {
	var out []string
	var errs []error
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", sub, i)
		var s string
		if err := json.Unmarshal(it, &s); err != nil || isNull(it) {
			errs = append(errs, &subError{Sub: at, Err: fmt.Errorf("want a %s, got %s", what, cutRaw(it))})
			continue
		}
		if err := check(s); err != nil {
			errs = append(errs, &subError{Sub: at, Err: err})
			continue
		}
		if slices.Contains(out, s) {
			errs = append(errs, &subError{Sub: at, Err: fmt.Errorf("%q listed twice", s)})
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// registryKey checks a registry as image references name it: "*", or the
// distribution reference grammar's domain (a DNS name, an IPv4 address or
// a bracketed IPv6 address, and an optional port). It becomes a directory
// name under containerd's certs.d, so nothing else may pass.
func registryKey(k string) error {
	if k == AllRegistries {
		return nil
	}
	if err := hostPort(k); err != nil {
		return fmt.Errorf("not a registry host (host or host:port, as image references name it, or %q for every registry): %w", AllRegistries, err)
	}
	return nil
}

// hostPort checks host[:port] with host a DNS name without a trailing dot,
// an IPv4 address or a bracketed IPv6 address, and port 1-65535.
func hostPort(s string) error {
	host, port := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.HasSuffix(s, "]") {
		host, port = s[:i], s[i+1:]
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' || port[0] == '+' {
			return fmt.Errorf("%q: port %q is not a number from 1 to 65535", cutMirror(s), cutMirror(port))
		}
	}
	if h, ok := strings.CutPrefix(host, "["); ok {
		h, ok = strings.CutSuffix(h, "]")
		a, err := netip.ParseAddr(h)
		if !ok || err != nil || !a.Is6() || a.Zone() != "" {
			return fmt.Errorf("%q: %q is not a bracketed IPv6 address", cutMirror(s), cutMirror(host))
		}
		return nil
	}
	if strings.HasSuffix(host, ".") {
		return fmt.Errorf("%q: a trailing dot is not allowed", cutMirror(s))
	}
	if err := syntax.DNSName(host); err != nil {
		return err
	}
	return nil
}

// MirrorURL checks one mirror endpoint: http or https (lower case), a
// host (see hostPort), an optional path, and no credentials, query or
// fragment (containerd would ignore them, so accepting them would hide a
// mistake). Only RFC 3986's characters pass, so the URL needs no escaping
// in a TOML string and cannot end a line of hosts.toml.
func MirrorURL(s string) error {
	for i := 0; i < len(s); i++ {
		if !uriByte(s[i]) {
			return fmt.Errorf("%q is not a mirror URL: %q at byte %d is not allowed in a URL (percent-encode it)", cutMirror(s), s[i], i)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a mirror URL: %w", cutMirror(s), err)
	}
	switch {
	case !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://"):
		return fmt.Errorf("%q is not a mirror URL: want an http:// or https:// URL", cutMirror(s))
	case u.Opaque != "" || u.Host == "":
		return fmt.Errorf("%q is not a mirror URL: no host", cutMirror(s))
	case u.User != nil:
		return fmt.Errorf("%q is not a mirror URL: credentials do not belong in it (containerd gets a registry's credentials from kubelet or its config)", cutMirror(s))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%q is not a mirror URL: a query or fragment is not allowed (containerd ignores them)", cutMirror(s))
	}
	if err := hostPort(u.Host); err != nil {
		return fmt.Errorf("%q is not a mirror URL: %w", cutMirror(s), err)
	}
	return nil
}

// uriByte is RFC 3986's unreserved and reserved characters and '%'.
func uriByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}

// cutMirror shortens a quoted piece of the annotation: its value may be
// kilobytes long.
func cutMirror(s string) string { return cut(s, 96) }
