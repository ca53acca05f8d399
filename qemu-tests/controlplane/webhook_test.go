package controlplane

import (
	"strings"
	"testing"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

func TestTokenWebhookArgs(t *testing.T) {
	o := Options{StateDir: "/state", TokenWebhookURL: "https://127.0.0.1:9443/authenticate", TokenWebhookCA: []byte("PEM")}
	args := strings.Join(apiServerArgs(layout{dir: o.StateDir}, o), "\n") + "\n"
	for _, want := range []string{
		"--authentication-token-webhook-config-file=/state/token-webhook.kubeconfig",
		"--authentication-token-webhook-version=v1",
		// The bootstrap token must keep working beside the webhook.
		"--enable-bootstrap-token-auth=true",
	} {
		if !strings.Contains(args, want+"\n") {
			t.Errorf("apiserver args lack %s:\n%s", want, args)
		}
	}
	none := strings.Join(apiServerArgs(layout{dir: "/state"}, Options{}), "\n")
	if strings.Contains(none, "webhook") {
		t.Errorf("webhook flags without a webhook URL:\n%s", none)
	}
}

func TestTokenWebhookKubeconfig(t *testing.T) {
	b, err := TokenWebhookKubeconfig("https://127.0.0.1:9443/authenticate", []byte("CA PEM"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg clientcmdv1.Config
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Clusters) != 1 || cfg.Clusters[0].Cluster.Server != "https://127.0.0.1:9443/authenticate" ||
		string(cfg.Clusters[0].Cluster.CertificateAuthorityData) != "CA PEM" {
		t.Fatalf("clusters %+v", cfg.Clusters)
	}
	if cfg.CurrentContext != "webhook" || len(cfg.Contexts) != 1 || cfg.Contexts[0].Context.Cluster != "token-webhook" {
		t.Fatalf("context %q %+v", cfg.CurrentContext, cfg.Contexts)
	}
	if _, err := TokenWebhookKubeconfig("http://127.0.0.1:9443/", []byte("x")); err == nil {
		t.Error("plain http accepted; kube-apiserver refuses it")
	}
	if _, err := TokenWebhookKubeconfig("https://127.0.0.1:9443/", nil); err == nil {
		t.Error("no CA accepted")
	}
}
