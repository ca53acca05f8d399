package sigv4

import (
	"net/http"
	"testing"
)

// FuzzVerifyPresigned feeds arbitrary query strings (outside input) to the
// presigned verifier: it must not panic, and must never accept a query
// that is not signed with the known secret.
func FuzzVerifyPresigned(f *testing.F) {
	f.Add("Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fsts%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Signature=00")
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r, err := http.NewRequest(http.MethodGet, "http://sts.amazonaws.com/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.URL.RawQuery = rawQuery
		r.Header.Set("x-k8s-aws-id", "demo")
		if _, verr := VerifyPresigned(r, Static(vectorCreds), Expect{Service: "sts", Now: vectorTime}); verr == nil {
			t.Fatalf("forged query accepted: %q", rawQuery)
		}
	})
}

// FuzzVerifyHeader does the same for the Authorization header form.
func FuzzVerifyHeader(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=00", "20150830T123600Z")
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request,SignedHeaders=,Signature=", "")
	f.Fuzz(func(t *testing.T, auth, date string) {
		r, err := http.NewRequest(http.MethodGet, "http://example.amazonaws.com/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Amz-Date", date)
		if _, verr := VerifyHeader(r, nil, Static(vectorCreds), Expect{Service: "service", Now: vectorTime}); verr == nil {
			t.Fatalf("forged header accepted: %q %q", auth, date)
		}
	})
}
