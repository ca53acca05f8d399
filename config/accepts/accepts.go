// Package accepts describes what an image's kubelet and containerd accept
// in the configuration berth writes for them: kubelet's flags and their
// value types, its feature gates, config API versions, TLS cipher suites
// and versions, eviction signals and KubeletConfiguration's fields;
// containerd's config versions, config.toml's keys and the base runtime
// spec's fields, each with its type. The image build generates it from the
// same Go modules the binaries are built from (components/kubeaccepts,
// components/containerdaccepts) and records it in the image manifest, so
// validation follows the shipped binaries instead of a hand-typed list.
// This package only holds and reads the data; nodeconfig judges with it.
package accepts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// Accepts is the generated description; either half may be missing (an
// image built before it was recorded has neither).
type Accepts struct {
	Kubelet    *Kubelet    `json:"kubelet,omitempty"`
	Containerd *Containerd `json:"containerd,omitempty"`
}

// Kubelet is what one kubelet version accepts.
type Kubelet struct {
	// Version is the k8s.io/kubernetes module version kubelet is built from.
	Version string `json:"version"`
	// Flags are kubelet's command-line flags by name, without dashes.
	Flags map[string]Flag `json:"flags"`
	// FeatureGates are the gates registered in kubelet, by name.
	FeatureGates map[string]Gate `json:"featureGates"`
	// ConfigAPIVersions are the apiVersion values a KubeletConfiguration
	// (config file or drop-in) may have.
	ConfigAPIVersions []string `json:"configAPIVersions"`
	// Config is KubeletConfiguration's schema, by JSON field name.
	Config *Type `json:"config"`
	// TLSCipherSuites and TLSVersions are the names tlsCipherSuites and
	// tlsMinVersion take.
	TLSCipherSuites []string `json:"tlsCipherSuites"`
	TLSVersions     []string `json:"tlsVersions"`
	// EvictionSignals are the signals eviction thresholds may name.
	EvictionSignals []string `json:"evictionSignals"`
	// ReservableResources are the resources kubeReserved and
	// systemReserved may name.
	ReservableResources []string `json:"reservableResources"`
}

// Flag is one kubelet flag.
type Flag struct {
	// Type is the flag value's type as pflag names it (bool, int32,
	// duration, mapStringBool, ...).
	Type string `json:"type"`
	// Value is the Go type of the flag's value (%T), which tells value
	// syntaxes of one Type apart (mapStringString is k=v,... for
	// --node-labels and k<v,... for --eviction-hard).
	Value string `json:"value"`
	// Shorthand is the one-letter form (-v), if any.
	Shorthand string `json:"shorthand,omitempty"`
	// NoOptDefVal is the value of the flag given without one ("true" for
	// a bool flag); empty when the flag needs a value.
	NoOptDefVal string `json:"noOptDefVal,omitempty"`
}

// Gate is one feature gate as the kubelet version has it.
type Gate struct {
	Default       bool   `json:"default"`
	LockToDefault bool   `json:"lockToDefault,omitempty"`
	PreRelease    string `json:"preRelease,omitempty"`
}

// Containerd is what one containerd version accepts.
type Containerd struct {
	// Version is the containerd module version.
	Version string `json:"version"`
	// ConfigVersions are the config.toml versions it reads.
	ConfigVersions []int `json:"configVersions"`
	// Config is config.toml's schema in the newest version's layout, with
	// the CRI plugins' sections under plugins.
	Config *Type `json:"config"`
	// RuntimeSpec is the OCI runtime spec's schema, which the base
	// runtime spec file is decoded into.
	RuntimeSpec *Type `json:"runtimeSpec"`
	// RuntimeOptions are the schemas a CRI runtime's options table is
	// decoded into, by the runtime's runtime_type (runc's for
	// io.containerd.runc.v2): containerd decodes them only when it starts
	// a container. Absent from data generated before it was recorded.
	RuntimeOptions map[string]*Type `json:"runtimeOptions,omitempty"`
}

// Kinds of Type.
const (
	KindBool     = "bool"
	KindString   = "string"
	KindFloat    = "float"
	KindDuration = "duration" // a string time.ParseDuration reads
	KindQuantity = "quantity" // a Kubernetes resource quantity, string or number
	KindObject   = "object"   // Fields
	KindMap      = "map"      // string keys, values of Elem
	KindList     = "list"     // elements of Elem
	KindAny      = "any"      // anything (raw JSON, interfaces)
	// Integer kinds are int8 ... int64 and uint8 ... uint64, by bits.
)

// Type is the schema of one value.
type Type struct {
	Kind   string           `json:"kind"`
	Fields map[string]*Type `json:"fields,omitempty"`
	Elem   *Type            `json:"elem,omitempty"`
}

// Field is the type of the field name of an object type, or nil.
func (t *Type) Field(name string) *Type {
	if t == nil || t.Kind != KindObject {
		return nil
	}
	return t.Fields[name]
}

// IntBits reports whether the kind is an integer kind, with its size and
// sign.
func (t *Type) IntBits() (bits int, signed, ok bool) {
	if t == nil {
		return 0, false, false
	}
	var n int
	if _, err := fmt.Sscanf(t.Kind, "int%d", &n); err == nil && fmt.Sprintf("int%d", n) == t.Kind {
		return n, true, true
	}
	if _, err := fmt.Sscanf(t.Kind, "uint%d", &n); err == nil && fmt.Sprintf("uint%d", n) == t.Kind {
		return n, false, true
	}
	return 0, false, false
}

// Load reads a file the generators wrote.
func Load(path string) (*Accepts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading what the components accept: %w", err)
	}
	a, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// Parse decodes what the generators wrote, strictly: a field the
// generators write and this package does not know is drift between the
// two, and would be dropped unread.
func Parse(b []byte) (*Accepts, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var a Accepts
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("decoding what the components accept: %w", err)
	}
	return &a, nil
}

// Merge adds b's halves to a; a half both have is an error (two kubelets).
func (a *Accepts) Merge(b *Accepts) error {
	if b.Kubelet != nil {
		if a.Kubelet != nil {
			return fmt.Errorf("merging what the components accept: kubelet %s and %s", a.Kubelet.Version, b.Kubelet.Version)
		}
		a.Kubelet = b.Kubelet
	}
	if b.Containerd != nil {
		if a.Containerd != nil {
			return fmt.Errorf("merging what the components accept: containerd %s and %s", a.Containerd.Version, b.Containerd.Version)
		}
		a.Containerd = b.Containerd
	}
	return nil
}
