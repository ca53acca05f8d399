// Command kubeaccepts writes what kubelet accepts in the configuration
// berth writes for it, as JSON (config/accepts's Kubelet, under
// "kubelet"): its flags and their value types, feature gates, config API
// versions, TLS cipher suites and versions, eviction signals, the
// resources it reserves, and KubeletConfiguration's fields with their
// types. It links kubelet's own packages at the version components.mk
// builds kubelet from (this module's go.mod is components/kube's, so they
// share the build cache) and reads their Go data: it never runs a kubelet,
// so it works on the amd64 build host for an arm64 image too.
//
//	go run . -out FILE
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	// kubelet's app package registers the feature gates kubelet has (the
	// logging ones in its init), as the kubelet binary does.
	_ "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
)

// The types below are config/accepts's, field for field (this module does
// not require berth's, so that its module graph stays components/kube's);
// berth decodes the file strictly, so a drift fails its tests.
type output struct {
	Kubelet *kubelet `json:"kubelet"`
}

type kubelet struct {
	Version             string          `json:"version"`
	Flags               map[string]flg  `json:"flags"`
	FeatureGates        map[string]gate `json:"featureGates"`
	ConfigAPIVersions   []string        `json:"configAPIVersions"`
	Config              *typ            `json:"config"`
	TLSCipherSuites     []string        `json:"tlsCipherSuites"`
	TLSVersions         []string        `json:"tlsVersions"`
	EvictionSignals     []string        `json:"evictionSignals"`
	ReservableResources []string        `json:"reservableResources"`
}

type flg struct {
	Type        string `json:"type"`
	Value       string `json:"value"`
	Shorthand   string `json:"shorthand,omitempty"`
	NoOptDefVal string `json:"noOptDefVal,omitempty"`
}

type gate struct {
	Default       bool   `json:"default"`
	LockToDefault bool   `json:"lockToDefault,omitempty"`
	PreRelease    string `json:"preRelease,omitempty"`
}

type typ struct {
	Kind   string          `json:"kind"`
	Fields map[string]*typ `json:"fields,omitempty"`
	Elem   *typ            `json:"elem,omitempty"`
}

func main() {
	out := flag.String("out", "", "file to write (atomically)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kubeaccepts -out FILE")
		os.Exit(2)
	}
	k, err := describe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubeaccepts: %v\n", err)
		os.Exit(1)
	}
	if err := writeJSON(*out, output{Kubelet: k}); err != nil {
		fmt.Fprintf(os.Stderr, "kubeaccepts: %v\n", err)
		os.Exit(1)
	}
}

func describe() (*kubelet, error) {
	k := &kubelet{Flags: map[string]flg{}, FeatureGates: map[string]gate{}}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, fmt.Errorf("no build info: cannot tell the k8s.io/kubernetes version")
	}
	for _, m := range bi.Deps {
		if m.Path == "k8s.io/kubernetes" {
			k.Version = m.Version
		}
	}
	if k.Version == "" {
		return nil, fmt.Errorf("k8s.io/kubernetes is not in the build info")
	}

	// The flag set as kubelet's NewKubeletCommand builds it.
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	kc, err := options.NewKubeletConfiguration()
	if err != nil {
		return nil, err
	}
	options.NewKubeletFlags().AddFlags(fs)
	options.AddKubeletConfigFlags(fs, kc)
	options.AddGlobalFlags(fs)
	fs.BoolP("help", "h", false, "help for kubelet")
	fs.VisitAll(func(f *pflag.Flag) {
		k.Flags[f.Name] = flg{Type: f.Value.Type(), Value: fmt.Sprintf("%T", f.Value), Shorthand: f.Shorthand, NoOptDefVal: f.NoOptDefVal}
	})

	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		k.FeatureGates[string(name)] = gate{Default: spec.Default, LockToDefault: spec.LockToDefault, PreRelease: string(spec.PreRelease)}
	}

	scheme, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Kind == "KubeletConfiguration" && gvk.Version != "__internal" {
			k.ConfigAPIVersions = append(k.ConfigAPIVersions, gvk.GroupVersion().String())
		}
	}
	slices.Sort(k.ConfigAPIVersions)

	k.Config = typeOf(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), 0)
	k.TLSCipherSuites = cliflag.TLSCipherPossibleValues()
	slices.Sort(k.TLSCipherSuites)
	k.TLSVersions = cliflag.TLSPossibleVersions()
	slices.Sort(k.TLSVersions)

	// Every signal kubelet has an operator for, kept if its own threshold
	// parser takes it (it refuses signals it cannot reclaim).
	for sig := range evictionapi.OpForSignal {
		if _, err := eviction.ParseThresholdConfig(nil, map[string]string{string(sig): "10%"}, nil, nil, nil); err == nil {
			k.EvictionSignals = append(k.EvictionSignals, string(sig))
		}
	}
	slices.Sort(k.EvictionSignals)
	if len(k.EvictionSignals) == 0 {
		return nil, fmt.Errorf("no eviction signal passes kubelet's parser")
	}
	// cmd/kubelet/app/server.go parseResourceList: the resources kubelet
	// reserves (unexported there, so named here; the oracle test holds
	// berth to the real kubelet's refusal of any other).
	k.ReservableResources = []string{"cpu", "ephemeral-storage", "memory", "pid"}
	return k, nil
}

var (
	durationType = reflect.TypeFor[metav1.Duration]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
	unmarshaler  = reflect.TypeFor[json.Unmarshaler]()
)

// typeOf is t's schema as encoding/json reads it (JSON names, inline
// structs merged). Types with a decoder of their own are any, except the
// few whose syntax is known.
func typeOf(t reflect.Type, depth int) *typ {
	if depth > 32 {
		return &typ{Kind: "any"}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case durationType:
		return &typ{Kind: "duration"}
	case quantityType:
		return &typ{Kind: "quantity"}
	case timeType:
		return &typ{Kind: "string"}
	}
	if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return &typ{Kind: "any"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return &typ{Kind: "bool"}
	case reflect.String:
		return &typ{Kind: "string"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return &typ{Kind: fmt.Sprintf("int%d", t.Bits())}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return &typ{Kind: fmt.Sprintf("uint%d", t.Bits())}
	case reflect.Float32, reflect.Float64:
		return &typ{Kind: "float"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &typ{Kind: "string"} // base64
		}
		return &typ{Kind: "list", Elem: typeOf(t.Elem(), depth+1)}
	case reflect.Map:
		return &typ{Kind: "map", Elem: typeOf(t.Elem(), depth+1)}
	case reflect.Struct:
		o := &typ{Kind: "object", Fields: map[string]*typ{}}
		addFields(o, t, depth)
		return o
	}
	return &typ{Kind: "any"}
}

func addFields(o *typ, t reflect.Type, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,") {
			if ft.Kind() == reflect.Struct {
				addFields(o, ft, depth)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		o.Fields[name] = typeOf(f.Type, depth+1)
	}
}

// writeJSON writes v to path through a temporary file and a rename.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeaccepts-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
