package kubelet

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/berth-node/berth/internal/golden"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden")

var recordTime = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func TestImageRepo(t *testing.T) {
	for ref, want := range map[string]string{
		"localhost/berth-demo:v1":    "localhost/berth-demo",
		"registry.k8s.io/pause:3.10": "registry.k8s.io/pause",
		"busybox":                    "docker.io/library/busybox",
		"busybox:1.37":               "docker.io/library/busybox",
		"library/busybox@sha256:" + strings.Repeat("a", 64): "docker.io/library/busybox",
		"index.docker.io/foo/bar:1":                         "docker.io/foo/bar",
		"localhost:5000/a/b:c":                              "localhost:5000/a/b",
		"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.10@sha256:" + strings.Repeat("0", 64): "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause",
		"Registry.Example/x:1": "Registry.Example/x",
	} {
		got, err := ImageRepo(ref)
		if err != nil || got != want {
			t.Errorf("ImageRepo(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, bad := range []string{"", "Busybox", "a//b", "a/B:1", "a/b c"} {
		if got, err := ImageRepo(bad); err == nil {
			t.Errorf("ImageRepo(%q) = %q, want an error", bad, got)
		}
	}
}

func TestPreloadedRecords(t *testing.T) {
	pause := "sha256:" + strings.Repeat("1", 64)
	demo := "sha256:" + strings.Repeat("2", 64)
	images := []PreloadedImage{
		{Name: "registry.k8s.io/pause:3.10", ID: pause},
		{Name: "localhost/berth-demo:v1", ID: demo},
		{Name: "localhost/berth-demo:v2", ID: demo},
		{Name: "localhost/another-demo:v1", ID: demo},
	}
	want := []PulledRecord{
		{ImageRef: pause, Repos: []string{"registry.k8s.io/pause"}},
		{ImageRef: demo, Repos: []string{"localhost/another-demo", "localhost/berth-demo"}},
	}
	got, err := PreloadedRecords(images)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%+v, %v; want %+v", got, err, want)
	}
	got, err = PreloadedRecords([]PreloadedImage{{Name: "localhost/old:v1"}, {Name: "Bad Name", ID: demo}, images[0]})
	if err == nil || !strings.Contains(err.Error(), "image localhost/old:v1: no image ID") || !strings.Contains(err.Error(), `image Bad Name: "Bad Name" is not an image reference`) {
		t.Errorf("images with no ID and a bad name: %v", err)
	}
	if !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("the good image beside them: %+v, want %+v", got, want[:1])
	}
}

func TestRecordsPreloaded(t *testing.T) {
	for policy, want := range map[string]bool{"": true, `"NeverVerifyPreloadedImages"`: true, `"NeverVerify"`: false, `"AlwaysVerify"`: false, `"NeverVerifyAllowlistedImages"`: false} {
		user := map[string]json.RawMessage{"maxPods": json.RawMessage("20")}
		if policy != "" {
			user[policyKey] = json.RawMessage(policy)
		}
		if got, err := RecordsPreloaded(user); err != nil || got != want {
			t.Errorf("policy %s: %v, %v; want %v", policy, got, err, want)
		}
	}
	if _, err := RecordsPreloaded(map[string]json.RawMessage{policyKey: json.RawMessage(`3`)}); err == nil || !strings.Contains(err.Error(), "spec.kubelet.config.imagePullCredentialsVerificationPolicy") {
		t.Errorf("a policy that is not a string: %v, want an error naming the field", err)
	}
}

// kubelet's own records: the file names are PulledRecordPath's, and berth's
// merge into each keeps what kubelet wrote and adds the imported name.
func TestMergeIntoKubeletRecords(t *testing.T) {
	dir := filepath.Join("testdata", "pulled-by-kubelet")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "sha256-") {
			continue
		}
		seen++
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ ImageRef string }
		if err := json.Unmarshal(data, &head); err != nil {
			// kubelet's broken record: berth leaves it alone too.
			if _, _, err := MergePulledRecord(data, PulledRecord{ImageRef: "testbrokenrecord", Repos: []string{"localhost/berth-demo"}}, recordTime); err == nil {
				t.Errorf("%s: broken JSON merged", e.Name())
			}
			continue
		}
		if p := PulledRecordPath(head.ImageRef); path.Base(p) != e.Name() && head.ImageRef != "test-brokenhash" {
			t.Errorf("PulledRecordPath(%q) = %s, kubelet named it %s", head.ImageRef, p, e.Name())
		}
		out, changed, err := MergePulledRecord(data, PulledRecord{ImageRef: head.ImageRef, Repos: []string{"localhost/berth-demo", "docker.io/testing/test"}}, recordTime)
		if err != nil || !changed {
			t.Fatalf("%s: changed %v, %v", e.Name(), changed, err)
		}
		checkGolden(t, filepath.Join("testdata", "pulled-merged", head.ImageRef+".golden"), out)
		checkRecord(t, out, head.ImageRef)
		// Merging again changes nothing: a reboot does not rewrite it.
		again, changed, err := MergePulledRecord(out, PulledRecord{ImageRef: head.ImageRef, Repos: []string{"localhost/berth-demo"}}, recordTime.Add(time.Hour))
		if err != nil || changed || !bytes.Equal(again, out) {
			t.Errorf("%s: merging the merged record again: changed %v, %v", e.Name(), changed, err)
		}
	}
	if seen != 9 {
		t.Errorf("%d kubelet records read, want 9", seen)
	}
}

// checkRecord decodes a record as kubelet's v1beta1 types, strictly, and
// checks each name berth adds is node-accessible and alone.
func checkRecord(t *testing.T, data []byte, imageRef string) {
	t.Helper()
	var r kubeletv1beta1.ImagePulledRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("record does not decode as kubelet's: %v\n%s", err, data)
	}
	if r.APIVersion != "kubelet.config.k8s.io/v1beta1" || r.Kind != "ImagePulledRecord" || r.ImageRef != imageRef || !r.LastUpdatedTime.Time.Equal(recordTime) {
		t.Errorf("record head %+v %s %v", r.TypeMeta, r.ImageRef, r.LastUpdatedTime)
	}
	if c := r.CredentialMapping["localhost/berth-demo"]; !reflect.DeepEqual(c, kubeletv1beta1.ImagePullCredentials{NodePodsAccessible: true}) {
		t.Errorf("localhost/berth-demo maps to %+v, want node-accessible alone", c)
	}
}

func TestMergeNewRecord(t *testing.T) {
	ref := "sha256:" + strings.Repeat("d", 64)
	out, changed, err := MergePulledRecord(nil, PulledRecord{ImageRef: ref, Repos: []string{"localhost/berth-demo"}}, recordTime)
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	checkGolden(t, filepath.Join("testdata", "pulled-merged", "new.golden"), out)
	checkRecord(t, out, ref)
}

func TestMergeRefuses(t *testing.T) {
	rec := PulledRecord{ImageRef: "sha256:" + strings.Repeat("d", 64), Repos: []string{"localhost/berth-demo"}}
	for name, tc := range map[string]struct{ data, want string }{
		"another image":   {`{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","imageRef":"sha256:0"}`, `names imageRef "sha256:0"`},
		"unknown version": {`{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v2","imageRef":"` + rec.ImageRef + `"}`, "kubelet.config.k8s.io/v2 ImagePulledRecord"},
		"another kind":    {`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"x"}`, "unknown field"},
		"unknown field":   {`{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","imageRef":"` + rec.ImageRef + `","more":1}`, `unknown field "more"`},
	} {
		_, _, err := MergePulledRecord([]byte(tc.data), rec, recordTime)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// FuzzMergePulledRecord: whatever a record file holds, berth's merge
// errs or gives a record kubelet decodes, with the name node-accessible.
func FuzzMergePulledRecord(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join("testdata", "pulled-by-kubelet"))
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join("testdata", "pulled-by-kubelet", e.Name())); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var head struct{ ImageRef string }
		_ = json.Unmarshal(data, &head)
		out, _, err := MergePulledRecord(data, PulledRecord{ImageRef: head.ImageRef, Repos: []string{"localhost/berth-demo"}}, recordTime)
		if err != nil {
			return
		}
		var r kubeletv1beta1.ImagePulledRecord
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("merged record does not decode: %v\n%s", err, out)
		}
		if r.ImageRef != head.ImageRef || !r.CredentialMapping["localhost/berth-demo"].NodePodsAccessible {
			t.Fatalf("merged record %s", out)
		}
	})
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, name, got, *updateGolden)
}

// berth's record types are kubelet's: the same JSON fields, and a record
// berth writes re-encodes byte for byte through kubelet's own types.
func TestLocalRecordTypesAreUpstreams(t *testing.T) {
	if got, want := jsonFields(reflect.TypeFor[pulledRecord](), ""), jsonFields(reflect.TypeFor[kubeletv1beta1.ImagePulledRecord](), ""); !reflect.DeepEqual(got, want) {
		t.Errorf("pulledRecord's JSON fields\n%v\nwant kubelet's ImagePulledRecord's\n%v", got, want)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "pulled-merged", "*.golden"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no merged records: %v", err)
	}
	for _, f := range files {
		ours, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var up kubeletv1beta1.ImagePulledRecord
		dec := json.NewDecoder(bytes.NewReader(ours))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&up); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		theirs, err := json.Marshal(&up)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s re-encodes through kubelet's types as\n%s\nnot\n%s", f, theirs, ours)
		}
	}
}

// jsonFields lists a struct type's JSON field paths with their options,
// inline (embedded) structs flattened, nested structs, slices and maps
// followed.
func jsonFields(typ reflect.Type, prefix string) []string {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" && typ.Name() == "Time" {
		return nil
	}
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type, prefix)...)
			continue
		}
		out = append(out, prefix+name+","+opts)
		out = append(out, jsonFields(f.Type, prefix+name+".")...)
	}
	return out
}
