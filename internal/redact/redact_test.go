package redact

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	secret := []string{
		"TOKEN", "token", "AWS_SESSION_TOKEN", "identitytoken", "GITHUB_TOKEN",
		"AWS_SECRET_ACCESS_KEY", "client_secret", "clientSecret",
		"PASSWORD", "DB_PASSWORD", "password", "MYSQL_PASSWD", "DB_PASS",
		"API_KEY", "apiKey", "APIKEY", "ACCESS_KEY", "AWS_ACCESS_KEY_ID", "SSH_KEY", "KEY", "signing-keys",
		"CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS", "credential",
		"auth", "AUTH", "AUTH_HEADER", "OAUTH", "BASIC_AUTH", "basicAuth", "Authorization",
		"Proxy-Authorization", "DOCKER_AUTH_CONFIG", "AUTHN_MODE",
		"berth.dev/bootstrap-token", "spec.instance.environment.API_TOKEN",
		// Fails closed: looks secret, is hidden.
		"MONKEY",
	}
	public := []string{
		"", "PATH", "HOME", "HTTPS_PROXY", "NO_PROXY", "LANG",
		"KEYBOARD", "KEYBOARD_LAYOUT", "keyboardLayout", "KEYRING_BACKEND",
		"AUTHOR", "GIT_AUTHOR_NAME", "certificateAuthority", "certificate-authority-data",
		"username", "user", "server",
		// Where a secret is kept, not the secret.
		"AWS_WEB_IDENTITY_TOKEN_FILE", "SSL_KEY_FILE", "tls-private-key-file", "PASSWORD_PATH", "SECRETS_DIR",
		"image-credential-provider-bin-dir",
	}
	for _, n := range secret {
		if !Name(n) {
			t.Errorf("Name(%q) = false, want secret", n)
		}
	}
	for _, n := range public {
		if Name(n) {
			t.Errorf("Name(%q) = true, want not secret", n)
		}
	}
}

func TestEnv(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"PATH=/usr/bin:/bin", "PATH=/usr/bin:/bin"},
		{"API_KEY=abc123", "API_KEY=<redacted>"},
		{"db_password=a=b c", "db_password=<redacted>"},
		{"AWS_SECRET_ACCESS_KEY=", "AWS_SECRET_ACCESS_KEY="},
		{"KEYBOARD=us", "KEYBOARD=us"},
		{"HTTPS_PROXY=http://proxyuser:pr0xy@proxy.internal:3128", "HTTPS_PROXY=http://proxyuser:<redacted>@proxy.internal:3128"},
		{"REPO=https://ghp_abc@github.com/x/y", "REPO=https://<redacted>@github.com/x/y"},
		{"HTTPS_PROXY=http://proxy.internal:3128", "HTTPS_PROXY=http://proxy.internal:3128"},
		{"JOIN=abcdef.0123456789abcdef", "JOIN=abcdef.<redacted>"},
		{"NOEQUALS", "NOEQUALS"},
	} {
		if got := Env(tc.in); got != tc.want {
			t.Errorf("Env(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"--manifest-url-header=Authorization:Bearer s3cr3t,X-Trace:1", "--manifest-url-header=Authorization:Bearer <redacted>,X-Trace:1"},
		{"Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic <redacted>"},
		{"proxy-authorization=xyz", "proxy-authorization=<redacted>"},
		{"--config=/etc/kubernetes/kubelet/config.json", "--config=/etc/kubernetes/kubelet/config.json"},
		{"--image-credential-provider-config=/etc/eks/image-credential-provider/config.json", "--image-credential-provider-config=/etc/eks/image-credential-provider/config.json"},
		{"--node-labels=berth.dev/version=v0.1.0", "--node-labels=berth.dev/version=v0.1.0"},
		{"", ""},
	} {
		if got := Value(tc.in); got != tc.want {
			t.Errorf("Value(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"containerd registry auth",
			"[plugins.'io.containerd.cri.v1.images'.registry.configs.'r.example.com'.auth]\n  username = \"puller\"\n  password = \"hunter2\"\n  auth = \"cHVsbGVyOmh1bnRlcjI=\"\n  identitytoken = 'tok'\n",
			"[plugins.'io.containerd.cri.v1.images'.registry.configs.'r.example.com'.auth]\n  username = \"puller\"\n  password = \"<redacted>\"\n  auth = \"<redacted>\"\n  identitytoken = '<redacted>'\n"},
		{"dockerconfigjson",
			`{"auths":{"r.example.com":{"username":"u","password":"p\"q","auth":"dTpw"}}}`,
			`{"auths":{"r.example.com":{"username":"u","password":"<redacted>","auth":"<redacted>"}}}`},
		{"kubeconfig token",
			"users:\n- name: kubelet\n  user:\n    token: abcdef.0123456789abcdef\n    client-key-data: LS0t\ncurrent-context: kubelet\n",
			"users:\n- name: kubelet\n  user:\n    token: <redacted>\n    client-key-data: <redacted>\ncurrent-context: kubelet\n"},
		{"authorization header kept scheme",
			"GET / HTTP/1.1\nAuthorization: Bearer eyJhbGciOi.payload.sig\nHost: x\n",
			"GET / HTTP/1.1\nAuthorization: Bearer <redacted>\nHost: x\n"},
		{"env pairs in a sentence",
			"environment API_KEY=abc123 and LANG=C",
			"environment API_KEY=<redacted> and LANG=C"},
		{"problem echoing a value under a secret path",
			"error: user data: spec.instance.environment.API_TOKEN: want a string, got number 123456",
			"error: user data: spec.instance.environment.API_TOKEN: <redacted>"},
		{"problem without secrets is untouched",
			"error: /x.yaml: spec.cluster.cidr: \"10.0.0.0/33\" is not a CIDR",
			"error: /x.yaml: spec.cluster.cidr: \"10.0.0.0/33\" is not a CIDR"},
		{"ca is public",
			"certificate-authority-data: LS0tLS1CRUdJTg==\nserver: https://k:6443\n",
			"certificate-authority-data: LS0tLS1CRUdJTg==\nserver: https://k:6443\n"},
		{"proxy url", `NO_PROXY=x HTTPS_PROXY="http://u:p@h:3128"`, `NO_PROXY=x HTTPS_PROXY="http://u:<redacted>@h:3128"`},
		{"bootstrap token anywhere", "join with abcdef.0123456789abcdef now", "join with abcdef.<redacted> now"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Text(tc.in)
			if got != tc.want {
				t.Errorf("Text:\n got %q\nwant %q", got, tc.want)
			}
			if again := Text(got); again != got {
				t.Errorf("Text is not idempotent:\n once  %q\n twice %q", got, again)
			}
		})
	}
}

// TestNoSecretSurvives runs every rule over one document holding each kind
// of secret and checks that none of the secret strings is left.
func TestNoSecretSurvives(t *testing.T) {
	secrets := []string{"hunter2", "c2VjcmV0", "0123456789abcdef", "s3ss10n", "pr0xy", "b34rer"}
	doc := strings.Join([]string{
		`password = "hunter2"`,
		`"auth": "c2VjcmV0"`,
		`token: abcdef.0123456789abcdef`,
		`AWS_SESSION_TOKEN=s3ss10n`,
		`HTTPS_PROXY=http://me:pr0xy@proxy:3128`,
		`Authorization: Bearer b34rer`,
	}, "\n")
	got := Text(doc)
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("%q survived redaction:\n%s", s, got)
		}
	}
	if n := strings.Count(got, Placeholder); n != len(secrets) {
		t.Errorf("%d placeholders, want %d:\n%s", n, len(secrets), got)
	}
}
