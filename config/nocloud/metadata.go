package nocloud

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/berth-node/berth/internal/syntax"
)

// MaxInstanceID bounds meta-data's instance-id. EC2's are 19 characters,
// Proxmox writes a 40-character hash; the value is shown in reports.
const MaxInstanceID = 255

// MetaData is what berth reads of meta-data.
type MetaData struct {
	// InstanceID is instance-id as written; "" when absent. cloud-init
	// uses it to tell a new instance from a reboot; berth shows it.
	InstanceID string `json:"instanceId,omitempty"`
	// LocalHostname is local-hostname, checked as a kernel hostname
	// (syntax.Hostname); "" when absent. When the seed gives an IPv4
	// address here, it is ip-A-B-C-D, as cloud-init makes it.
	LocalHostname string `json:"localHostname,omitempty"`
}

// metaDataKnown are meta-data keys cloud-init or the tools that write
// seeds use, which berth knows and has no use for. They are still
// reported, with why, so that nobody expects them to act.
var metaDataKnown = map[string]string{
	"hostname":           "cloud-init does not read hostname from meta-data either; use local-hostname",
	"public-keys":        "berth has no SSH server",
	"public_keys":        "berth has no SSH server",
	"dsmode":             "berth reads the seed before the network in any case",
	"seedfrom":           "berth reads no seed over the network; use berth.userdata=URL on the kernel command line",
	"network-interfaces": "berth does not read ifupdown files; put the network in network-config",
}

// ParseMetaData reads meta-data (YAML, or JSON, which is YAML). An empty
// file is no meta-data. Keys other than instance-id and local-hostname
// are ignored and returned as warnings, one listing them all; a value of
// the wrong type, or a hostname the kernel would refuse, is an error.
func ParseMetaData(data []byte) (MetaData, []Problem, error) {
	w := &walker{problemList: problemList{file: FileMetaData}}
	warn := &problemList{file: FileMetaData}
	var md MetaData
	if len(data) > MaxFileSize {
		return md, nil, Problems{{File: FileMetaData, Message: sizeMessage(len(data))}}
	}
	root, err := w.decode(data)
	if err != nil || root == nil {
		return md, nil, err
	}
	w.run(func() {
		pairs, ok := w.mapping(root, "", "a mapping of keys (instance-id: ..., local-hostname: ...)")
		if !ok {
			return
		}
		var unknown []string
		for _, p := range pairs {
			if isNull(w.resolve(p.val)) {
				continue // cloud-init treats an empty value as absent
			}
			switch p.key {
			case "instance-id":
				s, line, ok := w.scalar(p.val, p.key, "a string")
				if !ok {
					continue
				}
				if err := syntax.NoControl(s); err != nil {
					w.add(line, p.key, "%v", err)
				} else if len(s) > MaxInstanceID {
					w.add(line, p.key, "%d characters, more than %d", len(s), MaxInstanceID)
				} else {
					md.InstanceID = s
				}
			case "local-hostname":
				s, line, ok := w.scalar(p.val, p.key, "a hostname")
				if !ok {
					continue
				}
				if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
					// cloud-init's get_hostname does the same.
					s = "ip-" + strings.ReplaceAll(s, ".", "-")
					warn.add(line, p.key, "an IPv4 address; the hostname is %s, as cloud-init makes it", s)
				}
				if err := syntax.Hostname(s); err != nil {
					w.add(line, p.key, "%v", err)
				} else {
					md.LocalHostname = s
				}
			default:
				if why, ok := metaDataKnown[p.key]; ok {
					warn.add(p.line, p.key, "ignored: %s", why)
					continue
				}
				unknown = append(unknown, join("", p.key))
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			warn.add(0, "", "ignored keys berth does not use: %s", strings.Join(unknown, ", "))
		}
	})
	if err := w.err(); err != nil {
		return MetaData{}, warn.problems(), err
	}
	return md, warn.problems(), nil
}
