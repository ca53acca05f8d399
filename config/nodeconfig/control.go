package nodeconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/internal/syntax"
)

// encodedValueProblems refuses control characters in the strings berth
// writes through an encoder: the user's kubelet config (JSON), containerd
// config (TOML, keys and values) and base runtime spec (JSON). The encoder
// escapes them, so they cannot add a line to berth's own files; but the
// components read them back unescaped and write them on: kubelet puts
// clusterDomain into every pod's resolv.conf search line, containerd
// passes runtime paths and options to runc's command line. No setting of
// either wants a control character, so none gets through, wherever it
// comes from (a NodeConfig, an AL2 script's kubelet-extra.json, Bottlerocket
// settings). kubelet's clusterDomain must moreover be what kubelet's DNS
// code takes it for, an RFC 1123 subdomain.
func encodedValueProblems(ps *problems, s *NodeConfigSpec) {
	const kc = "spec.kubelet.config"
	for _, name := range slices.Sorted(maps.Keys(s.Kubelet.Config)) {
		v, ok := decodeQuiet(s.Kubelet.Config[name])
		if !ok {
			continue // the type checks name it
		}
		path := kc + jsonKey(name)
		if err := syntax.NoControl(name); err != nil {
			ps.errorf(path, "field name: %v", err)
			continue
		}
		controlIn(ps, path, v)
		if name == "clusterDomain" {
			if d, isStr := v.(string); isStr && syntax.NoControl(d) == nil {
				if err := syntax.DNSSubdomain(d); err != nil {
					ps.errorf(path, "%v (kubelet puts it into every pod's resolv.conf search line)", err)
				}
			}
		}
	}
	const rs = "spec.containerd.baseRuntimeSpec"
	for _, name := range slices.Sorted(maps.Keys(s.Containerd.BaseRuntimeSpec)) {
		path := rs + jsonKey(name)
		if err := syntax.NoControl(name); err != nil {
			ps.errorf(path, "field name: %v", err)
			continue
		}
		if v, ok := decodeQuiet(s.Containerd.BaseRuntimeSpec[name]); ok {
			controlIn(ps, path, v)
		}
	}
	if cc := s.Containerd.Config; cc != "" {
		var m map[string]any
		if toml.Unmarshal([]byte(cc), &m) == nil { // invalid TOML is named elsewhere
			controlInTOML(ps, m, nil)
		}
	}
}

// decodeQuiet decodes JSON, numbers kept as text; a value that does not
// decode is another check's problem.
func decodeQuiet(raw json.RawMessage) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// jsonKey is a field's step in a path: .name, or ["name"] when the name
// has dots or worse.
func jsonKey(k string) string {
	if plainKey.MatchString(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// controlIn reports each key and string under path with a control
// character, one problem each.
func controlIn(ps *problems, path string, v any) {
	switch t := v.(type) {
	case string:
		if err := syntax.NoControl(t); err != nil {
			ps.errorf(path, "%v", err)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if err := syntax.NoControl(k); err != nil {
				ps.errorf(path+jsonKey(k), "key: %v", err)
				continue
			}
			controlIn(ps, path+jsonKey(k), t[k])
		}
	case []any:
		for i, e := range t {
			controlIn(ps, fmt.Sprintf("%s[%d]", path, i), e)
		}
	}
}

// controlInTOML is controlIn for the containerd config, whose problems
// all sit at spec.containerd.config and name the TOML key in the message,
// as containerd.Config's do.
func controlInTOML(ps *problems, v any, keys []string) {
	const path = "spec.containerd.config"
	switch t := v.(type) {
	case string:
		if err := syntax.NoControl(t); err != nil {
			ps.errorf(path, "value of %s: %v", tomlKeyPath(keys), err)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if err := syntax.NoControl(k); err != nil {
				ps.errorf(path, "key in %s: %v", tomlTable(keys), err)
				continue
			}
			controlInTOML(ps, t[k], append(slices.Clip(keys), k))
		}
	case []any:
		for i, e := range t {
			controlInTOML(ps, e, append(slices.Clip(keys), fmt.Sprintf("[%d]", i)))
		}
	}
}

func tomlTable(keys []string) string {
	if len(keys) == 0 {
		return "the top-level table"
	}
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = tomlKey(k)
	}
	return "table [" + strings.Join(q, ".") + "]"
}
