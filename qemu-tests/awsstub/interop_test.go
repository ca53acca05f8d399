//go:build interop

// This test drives the node side (awsauth: `berth eks-token` and
// `berth ecr-credential-provider`) against the stand-ins, with credentials
// from the IMDS stand-in: the whole proof minus QEMU and kubelet. It is
// behind a tag while awsauth is being written; drop the tag once both are
// merged.

package awsstub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/authenticator"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/runtime/awsauth"
)

func TestAWSAuthAgainstStandIns(t *testing.T) {
	in := imdsserver.DefaultInstance()
	in.Role = &imdsserver.Role{Name: "berth-node", AccessKeyID: "ASIAINTEROP", SecretAccessKey: "interop-secret",
		Token: "interop-token", Expiration: time.Now().Add(6 * time.Hour), LastUpdated: time.Now()}
	md, err := imdsserver.New(imdsserver.Config{Instance: in})
	if err != nil {
		t.Fatal(err)
	}
	imdsURL, stopIMDS, err := md.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopIMDS()
	st, err := Start(Config{Instance: in, ClusterName: "berth"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	ctx := context.Background()

	out, err := awsauth.EKSToken(ctx, awsauth.EKSTokenOptions{Options: awsauth.Options{IMDS: []string{imdsURL}}, Cluster: "berth"})
	if err != nil {
		t.Fatal(err)
	}
	var ec struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &ec); err != nil || ec.Status.Token == "" {
		t.Fatalf("ExecCredential %s: %v", out, err)
	}
	body, _ := json.Marshal(authenticator.TokenReview{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview",
		Spec: authenticator.ReviewSpec{Token: ec.Status.Token}})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: st.Authenticator.ClientTLS()}}
	resp, err := client.Post(st.WebhookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var tr authenticator.TokenReview
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil || !tr.Status.Authenticated || tr.Status.User.Username != "system:node:"+in.LocalHostname {
		t.Fatalf("token review of berth's token: %+v %v", tr.Status, err)
	}

	req := []byte(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"111122223333.dkr.ecr.us-west-2.amazonaws.com/demo:latest"}`)
	env := map[string]string{"AWS_ENDPOINT_URL_ECR": st.ECRURL}
	out, err = awsauth.ECRCredentials(ctx, req, awsauth.Options{IMDS: []string{imdsURL}, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Auth map[string]struct {
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auth"`
	}
	if err := json.Unmarshal(out, &cp); err != nil || len(cp.Auth) == 0 {
		t.Fatalf("CredentialProviderResponse %s: %v", out, err)
	}
	for key, a := range cp.Auth {
		r, _ := http.NewRequest(http.MethodGet, st.RegistryURL+"/v2/", nil)
		r.SetBasicAuth(a.Username, a.Password)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("registry with credentials for %s: %s %s", key, resp.Status, b)
		}
	}
}
