package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
)

// servingCSR is the CSR kubelet's certificate manager sends for its serving
// certificate, with the request's subject and names changed by edit.
func servingCSR(t testing.TB, edit func(*x509.CertificateRequest)) csr {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:ip-10-0-2-15.ec2.internal", Organization: []string{"system:nodes"}},
		DNSNames:    []string{"ip-10-0-2-15.ec2.internal"},
		IPAddresses: []net.IP{net.ParseIP("10.0.2.15")},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	var c csr
	c.Metadata.Name = "csr-abc"
	c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	c.Spec.SignerName = kubeletServingSigner
	c.Spec.Username = "system:node:ip-10-0-2-15.ec2.internal"
	c.Spec.Groups = []string{"system:nodes", "system:authenticated"}
	c.Spec.Usages = []string{"digital signature", "server auth"}
	return c
}

func TestServingVerdict(t *testing.T) {
	for _, tc := range []struct {
		name          string
		edit          func(*csr)
		req           func(*x509.CertificateRequest)
		approve, done bool
		why           string
	}{
		{name: "kubelet serving", approve: true, why: "ip-10-0-2-15.ec2.internal,10.0.2.15"},
		{name: "client signer", edit: func(c *csr) { c.Spec.SignerName = "kubernetes.io/kube-apiserver-client-kubelet" }, done: true},
		{name: "already approved", edit: func(c *csr) {
			c.Status.Conditions = append(c.Status.Conditions, struct {
				Type string `json:"type"`
			}{"Approved"})
		}, done: true},
		{name: "not a node", edit: func(c *csr) { c.Spec.Username = "alice" }, why: "not a node"},
		{name: "node without the nodes group", edit: func(c *csr) { c.Spec.Groups = []string{"system:authenticated"} }, why: "not a node"},
		{name: "client auth usage", edit: func(c *csr) { c.Spec.Usages = append(c.Spec.Usages, "client auth") }, why: `usage "client auth"`},
		{name: "no server auth", edit: func(c *csr) { c.Spec.Usages = []string{"digital signature"} }, why: "no server auth"},
		{name: "another node's subject", req: func(r *x509.CertificateRequest) { r.Subject.CommonName = "system:node:other" }, why: "not the requester's"},
		{name: "e-mail name", req: func(r *x509.CertificateRequest) { r.EmailAddresses = []string{"a@b"} }, why: "e-mail"},
		{name: "no names", req: func(r *x509.CertificateRequest) { r.DNSNames, r.IPAddresses = nil, nil }, why: "no DNS or IP"},
		{name: "garbage request", edit: func(c *csr) { c.Spec.Request = []byte("nope") }, why: "not a PEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := servingCSR(t, tc.req)
			if tc.edit != nil {
				tc.edit(&c)
			}
			approve, done, why := servingVerdict(c)
			if approve != tc.approve || done != tc.done || !strings.Contains(why, tc.why) {
				t.Errorf("verdict = approve %v, done %v, %q; want %v, %v, containing %q", approve, done, why, tc.approve, tc.done, tc.why)
			}
		})
	}
}

// The CSR's request and identity come from a node: no input approves a
// request that is not a node's serving request, or panics.
func FuzzServingVerdict(f *testing.F) {
	good := servingCSR(f, nil)
	f.Add(good.Spec.Request, good.Spec.Username, "system:nodes", "server auth")
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n"), "system:node:x", "system:nodes", "server auth")
	f.Fuzz(func(t *testing.T, request []byte, user, group, usage string) {
		c := good
		c.Spec.Request = request
		c.Spec.Username = user
		c.Spec.Groups = []string{group}
		c.Spec.Usages = []string{usage}
		approve, _, _ := servingVerdict(c)
		if approve && (!strings.HasPrefix(user, "system:node:") || group != "system:nodes" || usage != "server auth") {
			t.Errorf("approved user %q group %q usage %q", user, group, usage)
		}
	})
}
