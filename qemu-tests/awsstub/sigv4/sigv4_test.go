package sigv4

import (
	"net/http"
	"testing"
	"time"
)

// vectorCreds are the AWS SigV4 test suite's credentials.
var vectorCreds = Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}

var vectorTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

// getVanilla is the suite's get-vanilla request as a server receives it.
func getVanilla(sig string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://example.amazonaws.com/", nil)
	r.Host = "example.amazonaws.com"
	r.Header.Set("X-Amz-Date", "20150830T123600Z")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature="+sig)
	return r
}

// TestPublishedVector checks the verifier against a signature computed by
// AWS, not by the SDK the verifier re-signs with.
func TestPublishedVector(t *testing.T) {
	const sig = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
	exp := Expect{Service: "service", Region: "us-east-1", Now: vectorTime.Add(time.Minute)}
	v, err := VerifyHeader(getVanilla(sig), nil, Static(vectorCreds), exp)
	if err != nil {
		t.Fatalf("get-vanilla rejected: %v", err)
	}
	if v.AccessKeyID != "AKIDEXAMPLE" || v.Region != "us-east-1" || v.Service != "service" || !v.SignedAt.Equal(vectorTime) {
		t.Fatalf("verified %+v", v)
	}
	bad := "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf30"
	if _, err := VerifyHeader(getVanilla(bad), nil, Static(vectorCreds), exp); err == nil || err.Code != CodeSignatureDoesNotMatch {
		t.Fatalf("altered signature: %v", err)
	}
	if _, err := VerifyHeader(getVanilla(sig), []byte("x"), Static(vectorCreds), exp); err == nil || err.Code != CodeSignatureDoesNotMatch {
		t.Fatalf("altered payload: %v", err)
	}
	other := exp
	other.Service = "sts"
	if _, err := VerifyHeader(getVanilla(sig), nil, Static(vectorCreds), other); err == nil || err.Code != CodeSignatureDoesNotMatch {
		t.Fatalf("wrong service scope: %v", err)
	}
	late := exp
	late.Now = vectorTime.Add(16 * time.Minute)
	if _, err := VerifyHeader(getVanilla(sig), nil, Static(vectorCreds), late); err == nil || err.Code != CodeExpiredToken {
		t.Fatalf("16 minutes late: %v", err)
	}
	withToken := vectorCreds
	withToken.SessionToken = "required"
	if _, err := VerifyHeader(getVanilla(sig), nil, Static(withToken), exp); err == nil || err.Code != CodeInvalidClientTokenID {
		t.Fatalf("missing session token: %v", err)
	}
}
