package report

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Decode reads a report in any schema this berth knows: the current one
// as it is, schema 1 (before schemaVersion existed) by first moving its
// fields to where schema 2 has them. A newer schema is refused by name,
// rather than read wrong.
func Decode(data []byte) (*Report, error) {
	var head struct {
		SchemaVersion *int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decoding boot report JSON: %w", err)
	}
	v := 1
	if head.SchemaVersion != nil {
		v = *head.SchemaVersion
	}
	switch {
	case v == SchemaVersion:
	case v == 1:
		up, err := upgradeV1(data)
		if err != nil {
			return nil, fmt.Errorf("reading a schema 1 boot report: %w", err)
		}
		data = up
	case v > SchemaVersion:
		return nil, fmt.Errorf("boot report schemaVersion %d is newer than this berth reads (%d): use the berth that wrote it", v, SchemaVersion)
	default:
		return nil, fmt.Errorf("boot report schemaVersion %d: no such schema (this berth reads 1 to %d)", v, SchemaVersion)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding boot report JSON (schema %d): %w", v, err)
	}
	return &r, nil
}

// upgradeV1 rewrites a schema 1 report as schema 2, field by field (see
// SchemaVersion); what schema 1 did not have stays absent.
func upgradeV1(data []byte) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if svc, ok := m["services"].(map[string]any); ok {
		// Schema 1's snake_case names of a service's fields.
		v1Service := [][2]string{
			{"started_at", "startedAt"}, {"ready_ms", "readyMs"}, {"last_exit", "lastExit"},
			{"last_exit_at", "lastExitAt"}, {"last_error", "lastError"},
			{"last_error_line", "lastErrorLine"}, {"log_tail", "logTail"},
		}
		for _, s := range objects(svc["services"]) {
			for _, kv := range v1Service {
				rename(s, kv[0], kv[1])
			}
		}
	}
	if cfg, ok := m["config"].(map[string]any); ok {
		for _, c := range objects(cfg["imdsCalls"]) {
			if err := nanosToMs(c, "duration", "durationMs"); err != nil {
				return nil, fmt.Errorf("config.imdsCalls: %w", err)
			}
		}
		if p, ok := cfg["plan"]; ok {
			m["plan"] = p
			delete(cfg, "plan")
		}
		apply := map[string]any{}
		for _, k := range []string{"files", "overridden", "sysctlErrors"} {
			if v, ok := cfg[k]; ok {
				apply[k] = v
				delete(cfg, k)
			}
		}
		if len(apply) > 0 {
			m["apply"] = apply
		}
	}
	if st, ok := m["storage"].(map[string]any); ok {
		for _, s := range objects(st["steps"]) {
			rename(s, "ms", "durationMs")
		}
	}
	m["schemaVersion"] = SchemaVersion
	return json.Marshal(m)
}

func objects(v any) []map[string]any {
	list, _ := v.([]any)
	var out []map[string]any
	for _, e := range list {
		if o, ok := e.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func rename(o map[string]any, from, to string) {
	if v, ok := o[from]; ok {
		o[to] = v
		delete(o, from)
	}
}

// nanosToMs turns a duration in nanoseconds (time.Duration's JSON) into
// milliseconds, with the nanoseconds kept as a fraction.
func nanosToMs(o map[string]any, from, to string) error {
	v, ok := o[from]
	if !ok {
		return nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return fmt.Errorf("%s is %T, want a number of nanoseconds", from, v)
	}
	ns, err := n.Int64()
	if err != nil {
		return fmt.Errorf("%s %q: %w", from, n, err)
	}
	o[to] = float64(ns) / 1e6
	delete(o, from)
	return nil
}
