package awsstub

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/qemu-tests/awsstub/authenticator"
	"github.com/berth-node/berth/qemu-tests/awsstub/ecr"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// liveAddrs records the host:port of every server running, to catch two
// at once on one port.
type liveAddrs struct {
	mu   sync.Mutex
	addr map[string]string
}

func (l *liveAddrs) add(t *testing.T, url, who string) {
	t.Helper()
	hostport := url[strings.Index(url, "://")+3:]
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, dup := l.addr[hostport]; dup {
		t.Errorf("%s and %s both serve on %s", other, who, hostport)
	}
	l.addr[hostport] = who
}

func (l *liveAddrs) remove(url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.addr, url[strings.Index(url, "://")+3:])
}

// TestStackStartStopParallelStress starts and stops many stacks at once,
// in rounds. Each has its own credentials and node, so a request reaching
// another stack's server (two on one port, or a URL naming the wrong port)
// is refused: each stack's webhook must map its own token to its own node
// (through its own STS), its ECR must issue it a token, and its registry
// must accept that token. No port may serve two servers at once, and
// every server must be gone after Stop.
//
// 24 stacks at a time (96 TLS servers): at 50, under -race beside a TCG
// guest and a CPU hog, TLS handshakes outlived the servers' 10 s header
// timeout, which is load, not cross-talk.
func TestStackStartStopParallelStress(t *testing.T) {
	const parallel, rounds = 24, 2
	live := &liveAddrs{addr: map[string]string{}}
	started := 0
	var mu sync.Mutex
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("r%d-n%d", round, i)
				in := imdsserver.DefaultInstance()
				in.InstanceID = fmt.Sprintf("i-%017x", round*1000+i)
				in.LocalHostname = "ip-" + id + ".us-west-2.compute.internal"
				in.Role = &imdsserver.Role{Name: "berth-node", AccessKeyID: "ASIA" + strings.ToUpper(id), SecretAccessKey: "secret-" + id, Token: "token-" + id}
				creds := aws.Credentials{AccessKeyID: in.Role.AccessKeyID, SecretAccessKey: in.Role.SecretAccessKey, SessionToken: in.Role.Token}
				st, err := Start(Config{Instance: in, ClusterName: "cluster-" + id})
				if err != nil {
					t.Errorf("%s: Start: %v", id, err)
					return
				}
				urls := map[string]string{"sts": st.STSURL, "webhook": st.WebhookURL, "ecr": st.ECRURL, "registry": st.RegistryURL}
				for name, u := range urls {
					live.add(t, u, id+" "+name)
				}
				checkStackIsOwn(t, st, creds, in.LocalHostname, "cluster-"+id, id)
				for _, u := range urls {
					live.remove(u)
				}
				st.Stop()
				// Gone: our credentials no longer get an ECR token there
				// (nothing listens, or another stack does and refuses them).
				if code, _ := ecrToken(st.ECRURL, creds); code == http.StatusOK {
					t.Errorf("%s: ECR still answers at %s after Stop", id, st.ECRURL)
				}
				mu.Lock()
				started++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if started != parallel*rounds {
		t.Errorf("%d stacks went through start, use and stop, want %d", started, parallel*rounds)
	}
	t.Logf("%d stacks (%d servers) started, used and stopped, %d at a time", started, 4*started, parallel)
}

func checkStackIsOwn(t *testing.T, st *Stack, creds aws.Credentials, hostname, cluster, id string) {
	t.Helper()
	now := time.Now().UTC()
	// Webhook (HTTPS trusting only this stack's CA) → this stack's STS.
	req, _ := http.NewRequest(http.MethodGet, "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	req.Header.Set("x-k8s-aws-id", cluster)
	presigned, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, hashHex(nil), "sts", "us-west-2", now)
	if err != nil {
		t.Error(err)
		return
	}
	body, _ := json.Marshal(authenticator.TokenReview{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview",
		Spec: authenticator.ReviewSpec{Token: authenticator.TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(presigned))}})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: st.Authenticator.ClientTLS()}}
	resp, err := client.Post(st.WebhookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: webhook: %v", id, err)
		return
	}
	var tr authenticator.TokenReview
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil || !tr.Status.Authenticated || tr.Status.User.Username != "system:node:"+hostname {
		t.Errorf("%s: token review: %v %+v", id, err, tr.Status)
	}
	// ECR → a token this stack's registry accepts.
	code, er := ecrToken(st.ECRURL, creds)
	if code != http.StatusOK || len(er.AuthorizationData) != 1 {
		t.Errorf("%s: GetAuthorizationToken: %d %+v", id, code, er)
		return
	}
	userpass, _ := base64.StdEncoding.DecodeString(er.AuthorizationData[0].AuthorizationToken)
	user, pass, _ := strings.Cut(string(userpass), ":")
	rreq, _ := http.NewRequest(http.MethodGet, st.RegistryURL+"/v2/", nil)
	rreq.SetBasicAuth(user, pass)
	rresp, err := http.DefaultClient.Do(rreq)
	if err != nil {
		t.Errorf("%s: registry: %v", id, err)
		return
	}
	rresp.Body.Close()
	if rresp.StatusCode != http.StatusOK {
		t.Errorf("%s: registry refused this stack's ECR token: %s", id, rresp.Status)
	}
}

// ecrToken calls GetAuthorizationToken at url signed with creds; code 0 is
// no answer.
func ecrToken(url string, creds aws.Credentials) (int, ecr.Response) {
	var er ecr.Response
	payload := []byte("{}")
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", ecr.Target)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hashHex(payload), "ecr", "us-west-2", time.Now().UTC()); err != nil {
		return 0, er
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, er
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&er)
	return resp.StatusCode, er
}
