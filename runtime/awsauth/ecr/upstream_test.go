package ecr

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

// berth's protocol structs must encode as kubelet's own: the response is
// decoded strictly into the upstream type and re-encoded byte for byte,
// for a cacheable login and one that must not be cached ("0s").
func TestResponseMatchesUpstream(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	reg := Registry{Host: "123456789012.dkr.ecr.us-west-2.amazonaws.com", Region: "us-west-2", Account: "123456789012", Domain: "amazonaws.com"}
	for _, exp := range []time.Time{now.Add(12 * time.Hour), now.Add(time.Minute)} {
		got, err := Response(reg, Auth{Username: "AWS", Password: "p", ExpiresAt: exp}, now)
		if err != nil {
			t.Fatal(err)
		}
		var up credentialproviderv1.CredentialProviderResponse
		dec := json.NewDecoder(bytes.NewReader(got))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&up); err != nil {
			t.Fatalf("%v\n%s", err, got)
		}
		want, err := json.Marshal(up)
		if err != nil {
			t.Fatal(err)
		}
		if want = append(want, '\n'); !bytes.Equal(got, want) {
			t.Errorf("response %s\nwant %s", got, want)
		}
	}
}
