package awsauth

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	stubecr "github.com/berth-node/berth/qemu-tests/awsstub/ecr"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// TestECRPublicAgainstStandIn runs the plugin end to end for ECR Public
// images: a CredentialProviderRequest in, the role's credentials from the
// IMDS stand-in, GetAuthorizationToken signed for ecr-public in us-east-1
// (the node is in us-west-2) and checked by the ECR stand-in as AWS does,
// and the CredentialProviderResponse out, keyed by the host kubelet asked
// about, with the login the stand-in's registry takes.
func TestECRPublicAgainstStandIn(t *testing.T) {
	imdsURL := startIMDS(t)
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	stub, err := stubecr.New(stubecr.Config{Credentials: sigv4.Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret, SessionToken: testToken},
		Account: "111122223333", Region: "us-west-2", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	privateURL, stopPrivate, err := stub.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopPrivate()
	publicURL, stopPublic, err := stub.StartPublic("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopPublic()
	// Both overrides set: each service's images go to their own endpoint
	// (ECR's would refuse an ecr-public signature).
	env := map[string]string{"AWS_ENDPOINT_URL_ECR": privateURL, "AWS_ENDPOINT_URL_ECR_PUBLIC": publicURL}
	opts := Options{IMDS: []string{imdsURL}, Clock: clock, Getenv: func(k string) string { return env[k] }}

	for _, tc := range []struct{ image, host string }{
		{"public.ecr.aws/eks/pause:3.10", "public.ecr.aws"},
		{"ecr-public.aws.com/docker/library/redis:7.2.8-alpine", "ecr-public.aws.com"},
		{"https://Public.ECR.aws/eks/pause@sha256:00", "Public.ECR.aws"},
	} {
		req := `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"` + tc.image + `"}`
		out, err := ECRCredentials(context.Background(), []byte(req), opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.image, err)
		}
		var r struct {
			Auth map[string]struct{ Username, Password string }
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		a := r.Auth[tc.host]
		if len(r.Auth) != 1 || !stub.ValidCredentials(a.Username, a.Password) {
			t.Fatalf("%s: the registry refuses the login in %s", tc.image, out)
		}
		want := `{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"11h30m0s","auth":{"` +
			tc.host + `":{"username":"AWS","password":"` + a.Password + `"}}}` + "\n"
		if string(out) != want {
			t.Errorf("%s: response\n got %s\nwant %s", tc.image, out, want)
		}
	}

	// A private registry still goes to ECR, signed for its own region.
	req := `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"111122223333.dkr.ecr.us-west-2.amazonaws.com/app:v1"}`
	if _, err := ECRCredentials(context.Background(), []byte(req), opts); err != nil {
		t.Fatalf("private registry beside public: %v", err)
	}

	// ECR Public's call sent to ECR's endpoint fails, naming the service,
	// the endpoint and the registry.
	env["AWS_ENDPOINT_URL_ECR_PUBLIC"] = privateURL
	req = `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"public.ecr.aws/eks/pause:3.10"}`
	_, err = ECRCredentials(context.Background(), []byte(req), opts)
	if want := "ecr-credential-provider: registry public.ecr.aws: ECR Public GetAuthorizationToken at " + privateURL + ": 403 Forbidden: InvalidSignatureException: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("wrong endpoint:\n got %v\nwant %s...", err, want)
	}
}
