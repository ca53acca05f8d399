package imdsserver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The argument names the guest's view of the host (10.0.2.2) and the port
// the stand-in really listens on, and the stand-in answers as the guest's
// instance with the user data behind an IMDSv2 token.
func TestStartForGuest(t *testing.T) {
	arg, stop, err := StartForGuest("#cloud-config\n")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	port, ok := strings.CutPrefix(arg, "berth.imds=http://10.0.2.2:")
	if !ok || port == "" {
		t.Fatalf("arg %q, want berth.imds=http://10.0.2.2:PORT", arg)
	}
	base := "http://127.0.0.1:" + port
	req, _ := http.NewRequest(http.MethodPut, base+"/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for path, want := range map[string]string{
		"/latest/user-data":            "#cloud-config\n",
		"/latest/meta-data/local-ipv4": "10.0.2.15",
	} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("X-aws-ec2-metadata-token", string(token))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("%s: %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
	}
}
