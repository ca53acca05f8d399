package awsstub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/qemu-tests/awsstub/authenticator"
	"github.com/berth-node/berth/qemu-tests/awsstub/ecr"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

func hashHex(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// TestNodeFlow walks what a node does against one Stack, signing with the
// credentials the IMDS stand-in would hand it: an EKS token the webhook
// maps to the node user, then ECR credentials the registry accepts.
func TestNodeFlow(t *testing.T) {
	in := imdsserver.DefaultInstance()
	in.Role = &imdsserver.Role{Name: "berth-node", AccessKeyID: "ASIAFLOW", SecretAccessKey: "flow-secret", Token: "flow-token"}
	awsCreds := aws.Credentials{AccessKeyID: "ASIAFLOW", SecretAccessKey: "flow-secret", SessionToken: "flow-token"}

	var img bytes.Buffer
	res, err := oci.Write(&img, oci.Image{Name: "111122223333.dkr.ecr.us-west-2.amazonaws.com/demo:latest",
		Files: []oci.File{{Path: "demo", Data: []byte("demo")}}})
	if err != nil {
		t.Fatal(err)
	}
	imgPath := filepath.Join(t.TempDir(), "demo.tar")
	if err := os.WriteFile(imgPath, img.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Start(Config{Instance: in, ClusterName: "berth", Images: []string{imgPath}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	now := time.Now().UTC()

	// 1. eks-token → TokenReview.
	req, _ := http.NewRequest(http.MethodGet, "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	req.Header.Set("x-k8s-aws-id", "berth")
	presigned, _, err := v4.NewSigner().PresignHTTP(context.Background(), awsCreds, req, hashHex(nil), "sts", "us-west-2", now)
	if err != nil {
		t.Fatal(err)
	}
	token := authenticator.TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(presigned))
	body, _ := json.Marshal(authenticator.TokenReview{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview",
		Spec: authenticator.ReviewSpec{Token: token}})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: st.Authenticator.ClientTLS()}}
	resp, err := client.Post(st.WebhookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var tr authenticator.TokenReview
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != "system:node:"+in.LocalHostname {
		t.Fatalf("token review %+v", tr.Status)
	}

	// 2. GetAuthorizationToken, signed with the same credentials.
	payload := []byte("{}")
	ereq, _ := http.NewRequest(http.MethodPost, st.ECRURL+"/", bytes.NewReader(payload))
	ereq.Header.Set("Content-Type", "application/x-amz-json-1.1")
	ereq.Header.Set("X-Amz-Target", ecr.Target)
	if err := v4.NewSigner().SignHTTP(context.Background(), awsCreds, ereq, hashHex(payload), "ecr", "us-west-2", now); err != nil {
		t.Fatal(err)
	}
	eresp, err := http.DefaultClient.Do(ereq)
	if err != nil {
		t.Fatal(err)
	}
	var er ecr.Response
	err = json.NewDecoder(eresp.Body).Decode(&er)
	eresp.Body.Close()
	if err != nil || eresp.StatusCode != 200 || len(er.AuthorizationData) != 1 {
		t.Fatalf("GetAuthorizationToken: %s %v %+v", eresp.Status, err, er)
	}
	userpass, _ := base64.StdEncoding.DecodeString(er.AuthorizationData[0].AuthorizationToken)
	user, pass, _ := strings.Cut(string(userpass), ":")

	// 3. Pull the manifest with them; without them, 401.
	get := func(auth bool) (*http.Response, []byte) {
		r, _ := http.NewRequest(http.MethodGet, st.RegistryURL+"/v2/demo/manifests/latest", nil)
		if auth {
			r.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := get(false); resp.StatusCode != 401 {
		t.Fatalf("pull without credentials: %s", resp.Status)
	}
	resp, man := get(true)
	if resp.StatusCode != 200 || resp.Header.Get("Docker-Content-Digest") != res.ManifestDigest || "sha256:"+hashHex(man) != res.ManifestDigest {
		t.Fatalf("pull: %s digest %s", resp.Status, resp.Header.Get("Docker-Content-Digest"))
	}
	if got := GuestURL(st.ECRURL); !strings.HasPrefix(got, "http://10.0.2.2:") {
		t.Fatalf("GuestURL %s", got)
	}
}

func TestStartNeedsRole(t *testing.T) {
	if _, err := Start(Config{Instance: imdsserver.DefaultInstance(), ClusterName: "x"}); err == nil || !strings.Contains(err.Error(), "Role") {
		t.Fatalf("err %v", err)
	}
}
