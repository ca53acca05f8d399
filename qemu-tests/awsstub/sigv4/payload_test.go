package sigv4

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signedPut signs a PUT whose X-Amz-Content-Sha256 header is contentHash
// (signed), as the SDK signs EBS PutSnapshotBlock's streamed body.
func signedPut(t *testing.T, contentHash string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPut, "http://ebs.us-east-1.amazonaws.com/snapshots/snap-1/blocks/0", strings.NewReader("block"))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Content-Sha256", contentHash)
	c := aws.Credentials{AccessKeyID: vectorCreds.AccessKeyID, SecretAccessKey: vectorCreds.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), c, r, contentHash, "ebs", "us-east-1", vectorTime); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUnsignedPayload(t *testing.T) {
	exp := Expect{Service: "ebs", Region: "us-east-1", Now: vectorTime}
	// The body is not part of the signature: another body of the same
	// length (content-length is signed) verifies.
	if _, err := VerifyHeader(signedPut(t, UnsignedPayload), []byte("other"), Static(vectorCreds), exp); err != nil {
		t.Fatalf("UNSIGNED-PAYLOAD request rejected: %v", err)
	}
	// A hex content hash must be the body's.
	body := []byte("block")
	if _, err := VerifyHeader(signedPut(t, hashHex(body)), body, Static(vectorCreds), exp); err != nil {
		t.Fatalf("hashed payload rejected: %v", err)
	}
	if _, err := VerifyHeader(signedPut(t, hashHex(body)), []byte("other"), Static(vectorCreds), exp); err == nil || err.Code != CodeSignatureDoesNotMatch {
		t.Fatalf("payload not matching x-amz-content-sha256: %v", err)
	}
	// An unsigned x-amz-content-sha256 could be swapped in transit.
	r := signedPut(t, UnsignedPayload)
	r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), ";x-amz-content-sha256", "", 1))
	if _, err := VerifyHeader(r, nil, Static(vectorCreds), exp); err == nil || err.Code != CodeSignatureDoesNotMatch {
		t.Fatalf("unsigned x-amz-content-sha256 accepted: %v", err)
	}
}
