package nodeobject

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// testCA is a cluster CA as kubeadm makes one: it signs the API server's
// serving certificate and kubelets' client certificates.
type testCA struct {
	t      *testing.T
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	serial atomic.Int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubernetes"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{t: t, cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.serial.Store(100)
	return ca
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issued is a certificate and key, PEM encoded, and the certificate's
// serial number.
type issued struct {
	certPEM, keyPEM []byte
	serial          string
}

func (ca *testCA) issue(tmpl *x509.Certificate) issued {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(ca.serial.Add(1))
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(12 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		serial:  tmpl.SerialNumber.String(),
	}
}

// kubeletClient issues the client certificate kubelet's TLS bootstrap
// gets: CN system:node:NAME, O system:nodes.
func (ca *testCA) kubeletClient(node string) issued {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// serving issues the API server's certificate, for 127.0.0.1 and
// apiServerName.
func (ca *testCA) serving() tls.Certificate {
	ca.t.Helper()
	is := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{apiServerName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	cert, err := tls.X509KeyPair(is.certPEM, is.keyPEM)
	if err != nil {
		ca.t.Fatal(err)
	}
	return cert
}

const apiServerName = "kubernetes.default.svc"
