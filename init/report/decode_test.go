package report

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/supervise"
)

// A schema 1 report (fields as berth wrote them before schemaVersion)
// decodes into the schema 2 types, each moved field in its new place.
func TestDecodeSchema1(t *testing.T) {
	v1 := `{"version":"old","kernelToInitMs":800,"endMs":9000,"phases":[],"ok":true,
	"config":{"imds":"http://169.254.169.254","sources":["imds"],
	  "imdsCalls":[{"path":"/latest/api/token","endpoint":"http://169.254.169.254","attempts":2,"duration":12345678,"status":200}],
	  "files":["/etc/containerd/config.toml"],"overridden":["/etc/containerd/certs.d/docker.io/hosts.toml"],"sysctlErrors":["net.x: no such key"],
	  "plan":{"nodeName":"ip-10-0-0-1","maxPods":17,"services":["containerd","kubelet"]}},
	"storage":{"status":"ready","steps":[{"name":"mkfs","ms":812.5}]},
	"services":{"kernelToKubeletMs":4000,"services":[{"name":"kubelet","state":"ready","restarts":1,
	  "started_at":"2026-01-01T00:00:01Z","ready_ms":900,"last_exit":{"code":1},"last_exit_at":"2026-01-01T00:00:00Z",
	  "last_error":"x","last_error_line":"E x509","log_tail":["a","b"]}]}}`
	r, err := Decode([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	if r.SchemaVersion != SchemaVersion {
		t.Errorf("schemaVersion %d after the upgrade, want %d", r.SchemaVersion, SchemaVersion)
	}
	wantCall := imds.CallTiming{Path: "/latest/api/token", Endpoint: "http://169.254.169.254", Attempts: 2, DurationMs: 12.345678, Status: 200}
	if r.Config == nil || len(r.Config.Calls) != 1 || r.Config.Calls[0] != wantCall {
		t.Errorf("config = %+v, want the IMDS call in ms: %+v", r.Config, wantCall)
	}
	wantApply := &Apply{Files: []string{"/etc/containerd/config.toml"}, Overridden: []string{"/etc/containerd/certs.d/docker.io/hosts.toml"}, SysctlErrors: []string{"net.x: no such key"}}
	if !reflect.DeepEqual(r.Apply, wantApply) {
		t.Errorf("apply = %+v, want %+v", r.Apply, wantApply)
	}
	if r.Plan == nil || r.Plan.NodeName != "ip-10-0-0-1" || r.Plan.MaxPods != 17 || len(r.Plan.Services) != 2 {
		t.Errorf("plan = %+v", r.Plan)
	}
	if r.Storage == nil || !reflect.DeepEqual(r.Storage.Steps, []localstorage.StepDuration{{Name: "mkfs", DurationMs: 812.5}}) {
		t.Errorf("storage = %+v", r.Storage)
	}
	want := supervise.Status{Name: "kubelet", State: supervise.StateReady, Restarts: 1,
		StartedAt: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), ReadyMs: 900, LastExit: &reaper.ExitStatus{Code: 1},
		LastExitAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), LastError: "x", LastErrorLine: "E x509", LogTail: []string{"a", "b"}}
	if got, ok := r.Services.Service("kubelet"); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("kubelet = %+v\nwant %+v", got, want)
	}
	// What it re-encodes to is schema 2: no old name is left.
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{`"started_at"`, `"ready_ms"`, `"last_exit"`, `"log_tail"`, `"duration"`, `"ms"`} {
		if strings.Contains(string(b), old) {
			t.Errorf("re-encoded report still has %s: %s", old, b)
		}
	}
}

// A schema this berth does not know is refused by number, not misread.
func TestDecodeRefusesUnknownSchema(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"schemaVersion":3,"version":"new"}`, "schemaVersion 3 is newer than this berth reads (2)"},
		{`{"schemaVersion":0}`, "schemaVersion 0: no such schema"},
		{`{"schemaVersion":"2"}`, "decoding boot report JSON"},
		{`{"schemaVersion":2,"services":3}`, "services"},
		{`{"config":{"imdsCalls":[{"duration":"1s"}]}}`, "config.imdsCalls: duration is string"},
	} {
		if _, err := Decode([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%s) error = %v, want it to say %q", tc.in, err, tc.want)
		}
	}
}

// Decode reads back exactly what the writer wrote.
func TestDecodeRoundTrip(t *testing.T) {
	r := sample()
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := got.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(b) {
		t.Errorf("decode and encode changed the report:\n%s\n%s", b, again)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["schemaVersion"] != float64(SchemaVersion) {
		t.Errorf("the writer's JSON has schemaVersion %v, want %d", m["schemaVersion"], SchemaVersion)
	}
}
