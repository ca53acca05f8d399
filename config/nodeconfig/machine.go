package nodeconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-node/berth/internal/syntax"
)

// berth's annotations for the machine itself, which nodeadm's NodeConfig
// has no fields for (AL2023 sets them from its AMI or from a script):
// Bottlerocket's settings.kernel.sysctl, settings.kernel.modules (autoload
// and allowed),
// settings.network.hostname and settings.ntp.time-servers carry over as
// these, and a NodeConfig user sets the same:
//
//	metadata:
//	  annotations:
//	    berth.dev/sysctls: '{"vm.max_map_count": "262144", "user.max_user_namespaces": "16384"}'
//	    berth.dev/kernel-modules: '["ip_vs_lc"]'
//	    berth.dev/blocked-kernel-modules: '["sctp", "udf"]'
//	    berth.dev/hostname: node-12-34
//	    berth.dev/ntp-servers: '["169.254.169.123", "time.example.com"]'
//
// init/plan decides what each means for the node (which of berth's own
// sysctls a user value may replace) and the apply phase acts.
const (
	// SysctlsAnnotation is a JSON object from kernel parameter (its
	// dotted name, or '/'-separated as under /proc/sys) to the value
	// written, a string.
	SysctlsAnnotation = "berth.dev/sysctls"
	// KernelModulesAnnotation is a JSON list of kernel modules loaded
	// before kubelet starts.
	KernelModulesAnnotation = "berth.dev/kernel-modules"
	// BlockedKernelModulesAnnotation is a JSON list of kernel modules
	// never loaded once user data is read: the kernel's requests for
	// them (or for a module that needs them) and devices' are refused.
	BlockedKernelModulesAnnotation = "berth.dev/blocked-kernel-modules"
	// HostnameAnnotation is the machine's hostname (uname -n), over the
	// one instance metadata gives. The node's name is not this: it stays
	// the private DNS name (or --hostname-override), as on Bottlerocket.
	HostnameAnnotation = "berth.dev/hostname"
	// NTPServersAnnotation is a JSON list of NTP servers (host names or
	// IP addresses, port 123) asked before the command line's, DHCP's and
	// the Amazon Time Sync Service.
	NTPServersAnnotation = "berth.dev/ntp-servers"
)

// MachineAnnotations are the machine annotations, in the order their
// problems are reported.
func MachineAnnotations() []string {
	return []string{SysctlsAnnotation, KernelModulesAnnotation, BlockedKernelModulesAnnotation, HostnameAnnotation, NTPServersAnnotation}
}

// Bounds on the machine annotations: far above any real use, low enough
// that hostile user data cannot make boot do much.
const (
	// MaxSysctls caps the keys of SysctlsAnnotation.
	MaxSysctls = 256
	// MaxSysctlValue caps one sysctl's value, in bytes (the kernel reads
	// at most a page from one write).
	MaxSysctlValue = 4096
	// MaxKernelModules caps KernelModulesAnnotation's list.
	MaxKernelModules = 64
	// MaxNTPServers caps NTPServersAnnotation's list (as berth.ntp's):
	// more would only slow the first burst.
	MaxNTPServers = 8
)

// Sysctl is one kernel parameter a user asked for.
type Sysctl struct {
	// Key is the parameter's dotted name: a '/' of the annotation's key
	// is turned into '.', as both name the same file under /proc/sys.
	Key   string
	Value string
}

// Machine is what berth's machine annotations ask for; zero fields were
// not set.
type Machine struct {
	// Sysctls are sorted by key, each key once.
	Sysctls []Sysctl
	// KernelModules are in the order given, each once.
	KernelModules []string
	// BlockedModules are in the order given, each once, none of them
	// among KernelModules.
	BlockedModules []string
	Hostname       string
	// NTPServers are host names or addresses, in the order given, each
	// once.
	NTPServers []string
}

// MachineOf reads the machine annotations of a NodeConfig. Errors name
// the field path of each bad entry, such as
// metadata.annotations["berth.dev/sysctls"]["vm.max_map_count"]; with an
// error, the result holds what was good.
func MachineOf(cfg *NodeConfig) (Machine, error) {
	ann, err := Annotations(cfg)
	m, merr := machineFrom(ann)
	return m, errors.Join(err, merr)
}

// machineFrom reads the machine annotations of an annotations map.
func machineFrom(ann map[string]string) (Machine, error) {
	var errs []error
	var m Machine
	parse := map[string]func(string) error{
		SysctlsAnnotation: func(v string) (err error) {
			m.Sysctls, err = ParseSysctls(v)
			return err
		},
		KernelModulesAnnotation: func(v string) (err error) {
			m.KernelModules, err = parseNames(v, "kernel module", MaxKernelModules, syntax.ModuleName)
			return err
		},
		BlockedKernelModulesAnnotation: func(v string) (err error) {
			m.BlockedModules, err = parseNames(v, "kernel module", MaxKernelModules, syntax.ModuleName)
			return err
		},
		HostnameAnnotation: func(v string) error {
			if err := syntax.Hostname(v); err != nil {
				return err
			}
			m.Hostname = v
			return nil
		},
		NTPServersAnnotation: func(v string) (err error) {
			m.NTPServers, err = parseNames(v, "NTP server", MaxNTPServers, syntax.TimeServer)
			return err
		},
	}
	for _, key := range MachineAnnotations() {
		if v, ok := ann[key]; ok {
			if err := parse[key](v); err != nil {
				errs = append(errs, annotationErrors(key, err))
			}
		}
	}
	for i, b := range m.BlockedModules {
		if slices.Contains(m.KernelModules, b) {
			errs = append(errs, annotationErrors(BlockedKernelModulesAnnotation, &subError{Sub: fmt.Sprintf("[%d]", i),
				Err: fmt.Errorf("%q is also in %s: a module cannot be both loaded and blocked", b, KernelModulesAnnotation)}))
		}
	}
	return m, errors.Join(errs...)
}

// ParseSysctls parses SysctlsAnnotation's value, strictly: each key a
// sysctl name (syntax.SysctlKey) given once ("net/ipv4/ip_forward" and
// "net.ipv4.ip_forward" are the same key), each value a non-empty string
// without control characters, at most MaxSysctlValue bytes. The result
// is sorted by key; with an error, it holds the keys that were good.
func ParseSysctls(value string) ([]Sysctl, error) {
	dec := json.NewDecoder(strings.NewReader(value))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf(`want a JSON object of sysctl name to value, as {"vm.max_map_count": "262144"}; got %s`, cut(value, 96))
	}
	var out []Sysctl
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
			return out, fmt.Errorf("reading the JSON object at %q: %w", cut(key, 96), err)
		}
		sub := "[" + strconv.Quote(cut(key, 96)) + "]"
		if len(seen) == MaxSysctls {
			return out, &subError{Sub: sub, Err: fmt.Errorf("more than %d sysctls", MaxSysctls)}
		}
		if err := syntax.SysctlKey(key); err != nil {
			errs = append(errs, &subError{Sub: sub, Err: err})
			continue
		}
		canon := strings.ReplaceAll(key, "/", ".")
		if seen[canon] {
			errs = append(errs, &subError{Sub: sub, Err: fmt.Errorf("%s given twice", canon)})
			continue
		}
		seen[canon] = true
		var v string
		switch {
		case json.Unmarshal(raw, &v) != nil || isNull(raw):
			// Bottlerocket takes only strings, and a number's form
			// (1e3, 1.0) is not what the kernel reads.
			errs = append(errs, &subError{Sub: sub, Err: fmt.Errorf("want the value as a string (\"1\", not 1), got %s", cutRaw(raw))})
			continue
		case v == "":
			errs = append(errs, &subError{Sub: sub, Err: errors.New("empty value: leave the key out to keep the kernel's or berth's")})
			continue
		case len(v) > MaxSysctlValue:
			errs = append(errs, &subError{Sub: sub, Err: fmt.Errorf("value of %d bytes, more than %d", len(v), MaxSysctlValue)})
			continue
		}
		if err := syntax.NoControl(v); err != nil {
			errs = append(errs, &subError{Sub: sub, Err: err})
			continue
		}
		out = append(out, Sysctl{Key: canon, Value: v})
	}
	if _, err := dec.Token(); err != nil {
		return out, fmt.Errorf("reading the JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return out, errors.New("more than one JSON value")
	}
	slices.SortFunc(out, func(a, b Sysctl) int { return strings.Compare(a.Key, b.Key) })
	return out, errors.Join(errs...)
}

// parseNames parses a JSON list of at most max strings, each passing
// check and given once.
func parseNames(value, what string, max int, check func(string) error) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(value), &items); err != nil || items == nil {
		return nil, fmt.Errorf(`want a JSON list of %ss, as ["a", "b"]; got %s`, what, cut(value, 96))
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no %ss: list at least one, or leave the annotation out", what)
	}
	if len(items) > max {
		return nil, fmt.Errorf("%d %ss, at most %d", len(items), what, max)
	}
	return uniqueStrings("", items, what+" as a string", check)
}
