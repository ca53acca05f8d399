package nodeconfig

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestUserMaxPods(t *testing.T) {
	n, ok, err := UserMaxPods(map[string]json.RawMessage{"maxPods": json.RawMessage("58")})
	if n != 58 || !ok || err != nil {
		t.Errorf("58: %d %v %v", n, ok, err)
	}
	if _, ok, err := UserMaxPods(map[string]json.RawMessage{"clusterDNS": json.RawMessage(`[]`)}); ok || err != nil {
		t.Errorf("unset: %v %v", ok, err)
	}
	for _, bad := range []string{`"58"`, "0", "-1", "1.5", "3000000000"} {
		if _, _, err := UserMaxPods(map[string]json.RawMessage{"maxPods": json.RawMessage(bad)}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("maxPods %s: %v, want an error quoting the value", bad, err)
		}
	}
}
