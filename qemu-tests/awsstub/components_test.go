//go:build components

// This test runs the real kube-apiserver (binaries from `make components`,
// BERTH_COMPONENTS_DIR=build/components) with the authenticator registered
// as its token webhook; select it with `go test -tags components`.

package awsstub

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/qemu-tests/awsstub/authenticator"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// whoAmI asks the apiserver who bearer is (SelfSubjectReview); the status
// code and the username.
func whoAmI(t *testing.T, client *http.Client, host, bearer string) (int, string, []string) {
	t.Helper()
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, _ := http.NewRequest(http.MethodPost, host+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	_ = json.Unmarshal(b, &r)
	return resp.StatusCode, r.Status.UserInfo.Username, r.Status.UserInfo.Groups
}

func eksToken(t *testing.T, c aws.Credentials, cluster string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	req.Header.Set("x-k8s-aws-id", cluster)
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), c, req, hashHex(nil), "sts", "us-west-2", time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	return authenticator.TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(u))
}

func TestAPIServerAcceptsWebhookAndBootstrapTokens(t *testing.T) {
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		t.Fatal("BERTH_COMPONENTS_DIR is not set: run `make components` and set it to build/components")
	}
	dirs, err := controlplane.BinDirsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := imdsserver.DefaultInstance()
	in.Role = &imdsserver.Role{Name: "berth-node", AccessKeyID: "ASIAAPI", SecretAccessKey: "api-secret", Token: "api-token"}
	st, err := Start(Config{Instance: in, ClusterName: "berth"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cl, err := controlplane.Start(ctx, log, controlplane.Options{BinDirs: dirs, TokenWebhookURL: st.WebhookURL, TokenWebhookCA: st.WebhookCA})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	info := cl.Info()
	caPEM, _ := base64.StdEncoding.DecodeString(info.CertificateAuthority)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	good := aws.Credentials{AccessKeyID: "ASIAAPI", SecretAccessKey: "api-secret", SessionToken: "api-token"}
	code, user, groups := whoAmI(t, client, info.HostEndpoint, eksToken(t, good, "berth"))
	if code != http.StatusCreated || user != "system:node:"+in.LocalHostname || !strings.Contains(strings.Join(groups, ","), "system:nodes") {
		t.Fatalf("EKS token: %d %q %v", code, user, groups)
	}
	code, user, _ = whoAmI(t, client, info.HostEndpoint, info.BootstrapToken)
	if code != http.StatusCreated || !strings.HasPrefix(user, "system:bootstrap:") {
		t.Fatalf("bootstrap token: %d %q", code, user)
	}
	bad := good
	bad.SecretAccessKey = "guess"
	if code, user, _ := whoAmI(t, client, info.HostEndpoint, eksToken(t, bad, "berth")); code != http.StatusUnauthorized {
		t.Fatalf("token signed with a wrong secret: %d %q", code, user)
	}
	if code, user, _ := whoAmI(t, client, info.HostEndpoint, eksToken(t, good, "other-cluster")); code != http.StatusUnauthorized {
		t.Fatalf("token for another cluster: %d %q", code, user)
	}
}
