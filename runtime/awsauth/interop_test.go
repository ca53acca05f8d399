package awsauth

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// TestAgainstStandIns runs both plugins against the host-side stand-ins
// (awsstub): the IMDS stand-in hands out the role's credentials, the
// authenticator replays the token to the STS stand-in, which verifies the
// signature as AWS does, and the ECR stand-in's login opens its registry.
// It is the QEMU join test's authentication without the VM.
func TestAgainstStandIns(t *testing.T) {
	in := imdsserver.DefaultInstance()
	in.Role = &imdsserver.Role{Name: "node-role", InstanceProfileARN: "arn:aws:iam::111122223333:instance-profile/node",
		InstanceProfileID: "AIPAEXAMPLE", AccessKeyID: testKeyID, SecretAccessKey: testSecret, Token: testToken,
		Expiration: time.Now().Add(time.Hour).UTC().Truncate(time.Second), LastUpdated: time.Now().UTC().Truncate(time.Second)}
	st, err := awsstub.Start(awsstub.Config{Instance: in, ClusterName: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	srv, err := imdsserver.New(imdsserver.Config{Instance: in})
	if err != nil {
		t.Fatal(err)
	}
	imdsURL, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	token := func(cluster string) string {
		out, err := EKSToken(context.Background(), EKSTokenOptions{Options: Options{IMDS: []string{imdsURL}}, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		var ec struct{ Status struct{ Token string } }
		if err := json.Unmarshal(out, &ec); err != nil {
			t.Fatal(err)
		}
		return ec.Status.Token
	}
	ui, err := st.Authenticator.Authenticate(httptest.NewRequest("POST", "/", nil), token("prod"))
	if err != nil {
		t.Fatalf("authenticator refused berth's token: %v", err)
	}
	if ui.Username != "system:node:"+in.LocalHostname || !strings.Contains(strings.Join(ui.Groups, ","), "system:nodes") {
		t.Errorf("authenticated as %+v", ui)
	}
	if _, err := st.Authenticator.Authenticate(httptest.NewRequest("POST", "/", nil), token("another-cluster")); err == nil {
		t.Error("a token for another cluster was accepted")
	}

	env := map[string]string{"AWS_ENDPOINT_URL_ECR": st.ECRURL}
	req := `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"` + st.ECR.RegistryHost() + `/app:v1"}`
	resp, err := ECRCredentials(context.Background(), []byte(req), Options{IMDS: []string{imdsURL}, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Auth map[string]struct{ Username, Password string }
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatal(err)
	}
	a, ok := r.Auth[st.ECR.RegistryHost()]
	if !ok || !st.ECR.ValidCredentials(a.Username, a.Password) {
		t.Errorf("the registry refuses the login in %s", resp)
	}

	// ECR Public, through the stack's own endpoint for it.
	env["AWS_ENDPOINT_URL_ECR_PUBLIC"] = st.ECRPublicURL
	req = `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"public.ecr.aws/eks/pause:3.10"}`
	resp, err = ECRCredentials(context.Background(), []byte(req), Options{IMDS: []string{imdsURL}, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	r.Auth = nil
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatal(err)
	}
	if a, ok := r.Auth["public.ecr.aws"]; !ok || !st.ECR.ValidCredentials(a.Username, a.Password) {
		t.Errorf("the registry refuses the ECR Public login in %s", resp)
	}
}
