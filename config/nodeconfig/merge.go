package nodeconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/pelletier/go-toml/v2"
)

// Merge combines documents in order with nodeadm's rules (nodeadm's
// internal/api/merge.go, which uses mergo.WithOverride):
//   - later documents win field by field, and empty values (zero strings,
//     nil slices and maps, nil pointers) do not override;
//   - slices are replaced whole, except kubelet.flags, which append
//     (kubelet gives later flags precedence, so appending is overriding);
//   - maps merge key by key; a later document's key wins, even false in
//     featureGates, so a later document can turn a gate off;
//   - kubelet.config and containerd.baseRuntimeSpec deep-merge as JSON
//     objects: nested objects merge, everything else is replaced, and
//     null does not override;
//   - containerd.config deep-merges as TOML tables. nodeadm leaves this a
//     TODO; berth does it properly.
//
// The inputs are not modified. nil documents are ignored. Merge fails only
// when two containerd.config values must be merged and one is not TOML.
func Merge(docs ...*NodeConfig) (*NodeConfig, error) {
	out := &NodeConfig{}
	for i, d := range docs {
		if d == nil {
			continue
		}
		if err := mergeInto(out, d); err != nil {
			return nil, fmt.Errorf("merging document %d: %w", i+1, err)
		}
	}
	return out, nil
}

func mergeInto(dst, src *NodeConfig) error {
	str(&dst.APIVersion, src.APIVersion)
	str(&dst.Kind, src.Kind)
	dst.Metadata = mergeRaw(dst.Metadata, src.Metadata)

	dc, sc := &dst.Spec.Cluster, &src.Spec.Cluster
	str(&dc.Name, sc.Name)
	str(&dc.APIServerEndpoint, sc.APIServerEndpoint)
	if len(sc.CertificateAuthority) > 0 {
		dc.CertificateAuthority = bytes.Clone(sc.CertificateAuthority)
	}
	str(&dc.CIDR, sc.CIDR)
	if sc.EnableOutpost != nil {
		v := *sc.EnableOutpost
		dc.EnableOutpost = &v
	}
	str(&dc.ID, sc.ID)

	dk, sk := &dst.Spec.Containerd, &src.Spec.Containerd
	switch {
	case sk.Config == "":
	case dk.Config == "":
		dk.Config = sk.Config
	default:
		merged, err := MergeTOML(dk.Config, sk.Config)
		if err != nil {
			return fmt.Errorf("spec.containerd.config: %w", err)
		}
		dk.Config = merged
	}
	dk.BaseRuntimeSpec = InlineDocument(mergeRaw(dk.BaseRuntimeSpec, sk.BaseRuntimeSpec))

	di, si := &dst.Spec.Instance, &src.Spec.Instance
	dl, sl := &di.LocalStorage, &si.LocalStorage
	str((*string)(&dl.Strategy), string(sl.Strategy))
	str(&dl.MountPath, sl.MountPath)
	replace(&dl.DisabledMounts, sl.DisabledMounts)
	di.Environment = mergeMap(di.Environment, si.Environment)
	replace(&di.Network.Nameservers, si.Network.Nameservers)
	replace(&di.Network.Domains, si.Network.Domains)

	dkl, skl := &dst.Spec.Kubelet, &src.Spec.Kubelet
	dkl.Config = InlineDocument(mergeRaw(dkl.Config, skl.Config))
	if len(skl.Flags) > 0 {
		dkl.Flags = append(append([]string(nil), dkl.Flags...), skl.Flags...)
	}
	str(&dkl.MaxPodsExpression, skl.MaxPodsExpression)

	dst.Spec.FeatureGates = mergeMap(dst.Spec.FeatureGates, src.Spec.FeatureGates)
	return nil
}

func str(dst *string, src string) {
	if src != "" {
		*dst = src
	}
}

func replace[T any](dst *[]T, src []T) {
	if len(src) > 0 {
		*dst = append([]T(nil), src...)
	}
}

func mergeMap[K comparable, V any](dst, src map[K]V) map[K]V {
	if len(src) == 0 {
		return dst
	}
	out := make(map[K]V, len(dst)+len(src))
	maps.Copy(out, dst)
	maps.Copy(out, src)
	return out
}

// mergeRaw deep-merges two JSON objects held as raw values per key.
func mergeRaw(dst, src map[string]json.RawMessage) map[string]json.RawMessage {
	if len(src) == 0 {
		return dst
	}
	out := make(map[string]json.RawMessage, len(dst)+len(src))
	maps.Copy(out, dst)
	for k, sv := range src {
		if isNull(sv) {
			continue
		}
		dv, ok := out[k]
		if !ok {
			out[k] = sv
			continue
		}
		out[k] = mergeRawValue(dv, sv)
	}
	return out
}

// mergeRawValue merges two JSON values: objects recursively, otherwise
// src replaces dst. Values that do not decode (which Parse never lets
// through) are replaced too.
func mergeRawValue(dst, src json.RawMessage) json.RawMessage {
	var d, s map[string]json.RawMessage
	if json.Unmarshal(dst, &d) != nil || json.Unmarshal(src, &s) != nil || d == nil || s == nil {
		return src
	}
	b, err := json.Marshal(mergeRaw(d, s))
	if err != nil {
		return src
	}
	return b
}

func isNull(v json.RawMessage) bool {
	return len(bytes.TrimSpace(v)) == 0 || string(bytes.TrimSpace(v)) == "null"
}

// MergeTOML deep-merges containerd TOML: tables merge key by key, any other
// value in overlay (arrays included) replaces the base's. The output is
// go-toml's encoding with keys sorted, so equal inputs give equal bytes.
func MergeTOML(base, overlay string) (string, error) {
	var b, o map[string]any
	if err := toml.Unmarshal([]byte(base), &b); err != nil {
		return "", fmt.Errorf("invalid TOML: %w", err)
	}
	if err := toml.Unmarshal([]byte(overlay), &o); err != nil {
		return "", fmt.Errorf("invalid TOML: %w", err)
	}
	merged := mergeTables(b, o)
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(merged); err != nil {
		return "", fmt.Errorf("encoding merged TOML: %w", err)
	}
	return buf.String(), nil
}

func mergeTables(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(src))
	maps.Copy(out, dst)
	for k, sv := range src {
		st, sIsTable := sv.(map[string]any)
		dt, dIsTable := out[k].(map[string]any)
		if sIsTable && dIsTable {
			out[k] = mergeTables(dt, st)
			continue
		}
		out[k] = sv
	}
	return out
}
