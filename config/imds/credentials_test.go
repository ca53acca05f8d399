package imds

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

func TestRoleCredentials(t *testing.T) {
	in := imdsserver.DefaultInstance()
	exp := time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC)
	in.Role = &imdsserver.Role{Name: "eks-node", AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "s3cr3t",
		Token: "sess10n", Expiration: exp}
	_, url := startIMDS(t, imdsserver.Config{Instance: in}, "127.0.0.1:0")
	cr, err := New(fastOpts(url)).RoleCredentials(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := Credentials{Role: "eks-node", AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "s3cr3t", Token: "sess10n", Expiration: exp}
	if *cr != want {
		t.Errorf("got %+v, want %+v", *cr, want)
	}
	for _, s := range []string{cr.String(), fmt.Sprint(*cr), cr.LogValue().String()} {
		if strings.Contains(s, "s3cr3t") || strings.Contains(s, "sess10n") {
			t.Errorf("printed credentials leak a secret: %s", s)
		}
	}

	_, url = startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	if _, err := New(fastOpts(url)).RoleCredentials(ctxTimeout(t, 5*time.Second)); !errors.Is(err, ErrNotFound) {
		t.Errorf("no role: err = %v, want ErrNotFound", err)
	}
}

func TestParseCredentialsErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"Code":"AssumeRoleUnauthorizedAccess"}`:                                                            `credentials: Code is "AssumeRoleUnauthorizedAccess", not "Success"`,
		`{"Code":"Success","AccessKeyId":"A","SecretAccessKey":"topsecret"}`:                                 "credentials: missing Token, Expiration",
		`{"Code":"Success","AccessKeyId":"A","SecretAccessKey":"topsecret","Token":"t","Expiration":"soon"}`: `credentials: Expiration "soon" is not an RFC 3339 time`,
		`{"Code":"Success","SecretAccessKey":1234}`:                                                          "credentials: not a JSON object of strings (*json.UnmarshalTypeError)",
	} {
		_, err := ParseCredentials([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("ParseCredentials(%s): err = %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("error %q quotes the secret", err)
		}
	}
}

func FuzzParseCredentials(f *testing.F) {
	f.Add([]byte(`{"Code":"Success","AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCredentials(b)
		if err != nil {
			return
		}
		if c.AccessKeyID == "" || c.SecretAccessKey == "" || c.Token == "" || c.Expiration.IsZero() {
			t.Fatalf("accepted incomplete credentials %v", c)
		}
		if c.Role != "" {
			t.Fatalf("the document alone named a role %q", c.Role)
		}
	})
}
