package deploy

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/rollout/controller"
	"github.com/berth-node/berth/rollout/decide"
	"github.com/berth-node/berth/update/bootcount"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The CRD is decoded strictly into the subset of apiextensions.k8s.io/v1
// it uses: k8s.io/apiextensions-apiserver is not in the module graph,
// and these structs hold the same JSON names, so a misspelt keyword or
// field fails the decode just as it would there.
type crd struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Group string `json:"group"`
		Scope string `json:"scope"`
		Names struct {
			Kind, ListKind, Plural, Singular string
			ShortNames                       []string `json:"shortNames,omitempty"`
		} `json:"names"`
		Versions []struct {
			Name         string `json:"name"`
			Served       bool   `json:"served"`
			Storage      bool   `json:"storage"`
			Subresources struct {
				Status *struct{} `json:"status"`
			} `json:"subresources"`
			AdditionalPrinterColumns []struct {
				Name, Type, JSONPath string
			} `json:"additionalPrinterColumns"`
			Schema struct {
				OpenAPIV3Schema schema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

type schema struct {
	Type                 string            `json:"type"`
	Format               string            `json:"format,omitempty"`
	Description          string            `json:"description,omitempty"`
	Properties           map[string]schema `json:"properties,omitempty"`
	Items                *schema           `json:"items,omitempty"`
	AdditionalProperties *schema           `json:"additionalProperties,omitempty"`
	Required             []string          `json:"required,omitempty"`
	Enum                 []any             `json:"enum,omitempty"`
	Pattern              string            `json:"pattern,omitempty"`
	MaxLength            *int64            `json:"maxLength,omitempty"`
	Default              any               `json:"default,omitempty"`
	Minimum              *float64          `json:"minimum,omitempty"`
	ListType             string            `json:"x-kubernetes-list-type,omitempty"`
	ListMapKeys          []string          `json:"x-kubernetes-list-map-keys,omitempty"`
	MapType              string            `json:"x-kubernetes-map-type,omitempty"`
	Validations          []struct {
		Rule, Message string
	} `json:"x-kubernetes-validations,omitempty"`
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := Manifests.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadCRD(t *testing.T) crd {
	t.Helper()
	var c crd
	if err := yaml.UnmarshalStrict(read(t, "crd.yaml"), &c); err != nil {
		t.Fatalf("crd.yaml: %v", err)
	}
	return c
}

func TestCRDNamesTheAPI(t *testing.T) {
	c := loadCRD(t)
	s := c.Spec
	if c.APIVersion != "apiextensions.k8s.io/v1" || c.Kind != "CustomResourceDefinition" || c.Metadata.Name != v1alpha1.Resource+"."+v1alpha1.Group ||
		s.Group != v1alpha1.Group || s.Scope != "Cluster" || s.Names.Kind != v1alpha1.Kind || s.Names.ListKind != v1alpha1.ListKind ||
		s.Names.Plural != v1alpha1.Resource || len(s.Versions) != 1 {
		t.Fatalf("crd: %+v", c)
	}
	v := s.Versions[0]
	if v.Name != v1alpha1.Version || !v.Served || !v.Storage || v.Subresources.Status == nil {
		t.Errorf("version %s served %t storage %t status subresource %v", v.Name, v.Served, v.Storage, v.Subresources.Status)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+"="+c.JSONPath)
	}
	want := []string{"Version=.spec.version", "Phase=.status.phase", "Done=.status.done", "Total=.status.total", "Current=.status.current", "Age=.metadata.creationTimestamp"}
	if !slices.Equal(cols, want) {
		t.Errorf("printer columns %q, want %q", cols, want)
	}
}

// TestSchemaMatchesTheGoTypes walks Update's Go types and the schema
// together: every JSON field has its property, of the right type, and the
// schema has no property the types lack.
func TestSchemaMatchesTheGoTypes(t *testing.T) {
	root := loadCRD(t).Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, part := range []struct {
		name string
		typ  reflect.Type
	}{{"spec", reflect.TypeFor[v1alpha1.UpdateSpec]()}, {"status", reflect.TypeFor[v1alpha1.UpdateStatus]()}} {
		s, ok := root.Properties[part.name]
		if !ok {
			t.Fatalf("the schema has no %s", part.name)
		}
		compare(t, part.name, part.typ, s)
	}
}

var timeType = reflect.TypeFor[metav1.Time]()

func compare(t *testing.T, path string, typ reflect.Type, s schema) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := ""
	switch {
	case typ == timeType:
		want = "string"
		if s.Format != "date-time" {
			t.Errorf("%s: a time without format date-time", path)
		}
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want = "integer"
	case typ.Kind() == reflect.Slice:
		want = "array"
		if s.Items == nil {
			t.Errorf("%s: an array without items", path)
		} else {
			compare(t, path+"[]", typ.Elem(), *s.Items)
		}
	case typ.Kind() == reflect.Map:
		want = "object"
		if s.AdditionalProperties == nil {
			t.Errorf("%s: a map without additionalProperties", path)
		} else {
			compare(t, path+"{}", typ.Elem(), *s.AdditionalProperties)
		}
	case typ.Kind() == reflect.Struct:
		want = "object"
		fields := map[string]bool{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			fields[name] = true
			p, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s.%s (%s.%s) is not in the schema", path, name, typ.Name(), f.Name)
				continue
			}
			compare(t, path+"."+name, f.Type, p)
		}
		for name := range s.Properties {
			if !fields[name] {
				t.Errorf("%s.%s is in the schema but not in %s", path, name, typ.Name())
			}
		}
	}
	if s.Type != want {
		t.Errorf("%s: type %q, want %q (%s)", path, s.Type, want, typ)
	}
}

func TestSchemaDefaultsAreTheCodes(t *testing.T) {
	spec := loadCRD(t).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for field, want := range map[string]any{"maxUnavailable": float64(v1alpha1.DefaultMaxUnavailable), "soak": v1alpha1.DefaultSoak,
		"drainTimeout": v1alpha1.DefaultDrainTimeout, "nodeTimeout": v1alpha1.DefaultNodeTimeout} {
		if got := spec[field].Default; got != want {
			t.Errorf("spec.%s defaults to %v in the schema, %v in the code", field, got, want)
		}
	}
	// The schema's patterns take what the code takes, and the defaults.
	for field, good := range map[string][]string{"soak": {"0", "0s", "2m", "1h30m", "1.5h"}, "drainTimeout": {"10m", "90s"}} {
		for _, v := range good {
			if _, err := decide.ParseSpec(v1alpha1.UpdateSpec{Version: "1", Soak: v, DrainTimeout: cond(field == "drainTimeout", v, "")}); err != nil {
				t.Errorf("%s %q: the code refuses what the schema's pattern %q is meant to take: %v", field, v, spec[field].Pattern, err)
			}
		}
	}
	if !slices.ContainsFunc(spec["version"].Validations, func(v struct{ Rule, Message string }) bool { return v.Rule == "self == oldSelf" }) {
		t.Error("spec.version is not immutable in the schema")
	}
	// The longest version the schema takes is the longest the node takes.
	if m := spec["version"].MaxLength; m == nil || *m != bootcount.MaxVersion {
		t.Errorf("spec.version maxLength %v, want %d", m, bootcount.MaxVersion)
	}
}

func cond(ok bool, a, b string) string {
	if ok {
		return a
	}
	return b
}

// docs splits a multi-document YAML file.
func docs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// TestControllerManifests decodes every object strictly into its
// Kubernetes type and checks what the controller relies on.
func TestControllerManifests(t *testing.T) {
	var (
		dep     *appsv1.Deployment
		sa      *corev1.ServiceAccount
		roles   = map[string][]rbacv1.PolicyRule{}
		binding = map[string]rbacv1.RoleRef{}
		kinds   []string
	)
	for i, d := range docs(read(t, "controller.yaml")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(d, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj any
		switch tm.Kind {
		case "Namespace":
			obj = &corev1.Namespace{}
		case "ServiceAccount":
			sa = &corev1.ServiceAccount{}
			obj = sa
		case "ClusterRole", "Role":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding", "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "Deployment":
			dep = &appsv1.Deployment{}
			obj = dep
		case "PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			t.Fatalf("document %d: unexpected kind %q", i, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(d, obj); err != nil {
			t.Fatalf("document %d (%s): %v", i, tm.Kind, err)
		}
		kinds = append(kinds, tm.Kind)
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			roles[tm.Kind+"/"+o.Namespace+"/"+o.Name] = o.Rules
		case *rbacv1.RoleBinding:
			binding[tm.Kind+"/"+o.Namespace+"/"+o.Name] = o.RoleRef
			if len(o.Subjects) != 1 || o.Subjects[0].Kind != "ServiceAccount" || o.Subjects[0].Name != "berth-rollout" || o.Subjects[0].Namespace != "berth-system" {
				t.Errorf("%s %s binds %+v", tm.Kind, o.Name, o.Subjects)
			}
		}
	}
	if sa == nil || dep == nil {
		t.Fatalf("kinds %v: no ServiceAccount or Deployment", kinds)
	}
	if *dep.Spec.Replicas != 2 || dep.Spec.Template.Spec.ServiceAccountName != sa.Name || dep.Namespace != sa.Namespace {
		t.Errorf("deployment: replicas %d, service account %q in %s", *dep.Spec.Replicas, dep.Spec.Template.Spec.ServiceAccountName, dep.Namespace)
	}
	env := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("env %v: the lease identity and namespace come from the pod", env)
	}
	// Least privilege: exactly what package controller calls, and no
	// more. A new call needs its rule here and in controller.yaml.
	rules := func(key string) []string {
		var out []string
		for _, r := range roles[key] {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, fmt.Sprintf("%s/%s %s %v", g, res, v, r.ResourceNames))
					}
				}
			}
		}
		slices.Sort(out)
		return out
	}
	for key, want := range map[string][]string{
		"ClusterRole//berth-rollout": {"/nodes get []", "/nodes list []", "/nodes patch []", "/nodes watch []", "/pods list []", "/pods/eviction create []",
			"updates.berth.dev/updates get []", "updates.berth.dev/updates list []", "updates.berth.dev/updates watch []", "updates.berth.dev/updates/status update []"},
		"Role/berth-system/berth-rollout":   {"coordination.k8s.io/leases create []", "coordination.k8s.io/leases get [berth-rollout]", "coordination.k8s.io/leases update [berth-rollout]"},
		"Role/default/berth-rollout-events": {"/events create []"},
	} {
		if got := rules(key); !slices.Equal(got, want) {
			t.Errorf("%s rules:\n got %q\nwant %q", key, got, want)
		}
	}
	if controller.EventNamespace != "default" {
		t.Errorf("Events go to %s; the events Role is in default", controller.EventNamespace)
	}
	for key, ref := range map[string]string{"ClusterRoleBinding//berth-rollout": "ClusterRole/berth-rollout",
		"RoleBinding/berth-system/berth-rollout": "Role/berth-rollout", "RoleBinding/default/berth-rollout-events": "Role/berth-rollout-events"} {
		if got := binding[key].Kind + "/" + binding[key].Name; got != ref {
			t.Errorf("%s refers to %s, want %s", key, got, ref)
		}
	}
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--lease-name=berth-rollout") {
		t.Errorf("args %q: the lease name must match the Role's resourceNames", args)
	}
}

func TestExampleUpdate(t *testing.T) {
	var u v1alpha1.Update
	if err := yaml.UnmarshalStrict(read(t, "example-update.yaml"), &u); err != nil {
		t.Fatal(err)
	}
	if u.APIVersion != v1alpha1.APIVersion || u.Kind != v1alpha1.Kind {
		t.Errorf("example is %s %s", u.APIVersion, u.Kind)
	}
	s, err := decide.ParseSpec(u.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Soak != 5*time.Minute || s.Window == nil || s.Selector.String() != "pool=workers" {
		t.Errorf("example spec %+v", s)
	}
}
