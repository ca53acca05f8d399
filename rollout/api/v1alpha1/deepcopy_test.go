package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"
)

// shared reports the paths where a and b share memory (a pointer, a
// slice's array or a map): a deep copy must share none.
func shared(path string, a, b reflect.Value) []string {
	var out []string
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			return []string{path}
		}
		return shared(path, a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for i := 0; i < min(a.Len(), b.Len()); i++ {
			out = append(out, shared(path+"[]", a.Index(i), b.Index(i))...)
		}
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				out = append(out, shared(path+"{}", a.MapIndex(k), bv)...)
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				out = append(out, shared(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))...)
			}
		}
	case reflect.Interface:
		if !a.IsNil() && !b.IsNil() {
			out = append(out, shared(path, a.Elem(), b.Elem())...)
		}
	}
	return out
}

// filled counts the fields of v (and what they point to) left at their
// zero value, by path: randfill may leave some by chance, so the test
// fills several times and needs every field set in one of them.
func zeroes(path string, v reflect.Value, seen map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			seen[path] = seen[path] || false
			return
		}
		seen[path] = true
		zeroes(path, v.Elem(), seen)
	case reflect.Slice:
		seen[path] = seen[path] || v.Len() > 0
		for i := range v.Len() {
			zeroes(path+"[]", v.Index(i), seen)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			seen[path] = seen[path] || !v.Interface().(metav1.Time).Time.IsZero()
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				zeroes(path+"."+v.Type().Field(i).Name, v.Field(i), seen)
			}
		}
	default:
		seen[path] = seen[path] || !v.IsZero()
	}
}

func TestDeepCopyCopiesEveryField(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0).NumElements(1, 3).Funcs(
		func(t *metav1.Time, c randfill.Continue) { *t = metav1.Unix(1+c.Int63n(1<<32), 0) })
	seen := map[string]bool{}
	for range 20 {
		var u Update
		f.Fill(&u)
		zeroes("Update", reflect.ValueOf(u), seen)
		c := u.DeepCopy()
		if !reflect.DeepEqual(&u, c) {
			t.Fatalf("DeepCopy differs from the original:\n%+v\n%+v", u, *c)
		}
		if s := shared("Update", reflect.ValueOf(&u), reflect.ValueOf(c)); len(s) > 1 || (len(s) == 1 && s[0] != "Update") {
			// The top-level pointers differ by construction; shared
			// reports below them.
			t.Errorf("DeepCopy shares memory at %v", s)
		}
		if s := shared("", reflect.ValueOf(u), reflect.ValueOf(*c)); len(s) > 0 {
			t.Errorf("DeepCopy shares memory at %v", s)
		}
		obj := u.DeepCopyObject()
		if !reflect.DeepEqual(obj, &u) {
			t.Error("DeepCopyObject differs from the original")
		}

		l := UpdateList{Items: []Update{u, *c}}
		f.Fill(&l.ListMeta)
		lc := l.DeepCopyObject().(*UpdateList)
		if !reflect.DeepEqual(&l, lc) {
			t.Error("UpdateList's DeepCopy differs from the original")
		}
		if s := shared("", reflect.ValueOf(l), reflect.ValueOf(*lc)); len(s) > 0 {
			t.Errorf("UpdateList's DeepCopy shares memory at %v", s)
		}
	}
	for _, p := range []string{"Update.Spec.NodeSelector", "Update.Spec.MaintenanceWindow.Days", "Update.Status.Nodes[].Finished",
		"Update.Status.Conditions", "Update.Status.StartedAt", "Update.Status.CompletedAt", "Update.Status.Nodes[].SoakSince"} {
		if !seen[p] {
			t.Errorf("%s was never filled; the check proves nothing about it", p)
		}
	}
	for p, ok := range seen {
		if !ok && p != "Update.ObjectMeta.DeletionGracePeriodSeconds" {
			t.Errorf("%s was never filled", p)
		}
	}
	var nilU *Update
	var nilL *UpdateList
	if nilU.DeepCopy() != nil || nilU.DeepCopyObject() != nil || nilL.DeepCopy() != nil || nilL.DeepCopyObject() != nil {
		t.Error("a nil object's copy is not nil")
	}
}

func TestSchemeKnowsUpdate(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for kind, obj := range map[string]runtime.Object{Kind: &Update{}, ListKind: &UpdateList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		if len(gvks) != 1 || gvks[0] != GroupVersion().WithKind(kind) {
			t.Errorf("%T registered as %v, want %v", obj, gvks, GroupVersion().WithKind(kind))
		}
	}
	if APIVersion != GroupVersion().String() {
		t.Errorf("APIVersion %q, group and version %q", APIVersion, GroupVersion())
	}
	if got := GroupVersionResource().String(); got != "updates.berth.dev/v1alpha1, Resource=updates" {
		t.Errorf("GroupVersionResource = %s", got)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	u := Update{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "to-1-2", Generation: 3},
		Spec: UpdateSpec{Version: "1.2.0", Repository: "https://updates.example/metadata", MaxUnavailable: 2,
			NodeSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			MaintenanceWindow: &MaintenanceWindow{Days: []string{"Sat", "Sun"}, Start: "22:00", End: "04:00"},
			Soak:              "5m", DrainTimeout: "15m", NodeTimeout: "30m", AllowDowngrade: true},
		Status: UpdateStatus{ObservedGeneration: 3, Phase: PhaseStopped, Done: 1, Total: 2, Current: "b",
			Conditions: []metav1.Condition{{Type: ConditionStopped, Status: metav1.ConditionTrue, Reason: "RolledBack", Message: "node b", LastTransitionTime: at}},
			Nodes:      []NodeStatus{{Name: "b", State: NodeFailed, From: "1.1.0", Started: &at, Requested: &at, Finished: &at, StateBefore: "idle", Message: "rolled back"}},
			StartedAt:  &at},
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var back Update
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// Semantic: a time comes back in the local zone.
	if !equality.Semantic.DeepEqual(u, back) {
		t.Errorf("JSON round trip changed the object:\n%s\n%+v", b, back)
	}
}
