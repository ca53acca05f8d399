package authenticator

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseToken feeds arbitrary bearer tokens (outside input: anything a
// client sends the apiserver) to the parser: it must never panic, and
// whatever it accepts must be an https GetCallerIdentity URL on an STS host.
func FuzzParseToken(f *testing.F) {
	f.Add("k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5")
	f.Add("k8s-aws-v1.")
	f.Add("abcdef.0123456789abcdef")
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, token string) {
		u, err := ParseToken(token, now)
		if err != nil {
			return
		}
		if u.Scheme != "https" || !stsHostRE.MatchString(u.Host) || u.Path != "/" {
			t.Fatalf("accepted %q → %s", token, u)
		}
		if u.Query().Get("Action") != "GetCallerIdentity" || !strings.Contains(u.Query().Get("X-Amz-SignedHeaders"), "x-k8s-aws-id") {
			t.Fatalf("accepted %q without the checks: %s", token, u)
		}
	})
}
