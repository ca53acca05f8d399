package ekstoken

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
)

// berth's ExecCredential must encode as client-go's: decoded strictly into
// the upstream type and re-encoded, byte for byte, also for an expiry with
// sub-second precision and a zone (metav1.Time writes UTC seconds).
func TestExecCredentialMatchesUpstream(t *testing.T) {
	for _, exp := range []time.Time{
		time.Date(2026, 11, 22, 12, 14, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 12, 14, 0, 999_000_000, time.FixedZone("x", 3600)),
	} {
		got, err := ExecCredential(Token{Value: "k8s-aws-v1.x", Expiration: exp})
		if err != nil {
			t.Fatal(err)
		}
		var up clientauthv1beta1.ExecCredential
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
			t.Errorf("ExecCredential %s\nwant %s", got, want)
		}
	}
}
