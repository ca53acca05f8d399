package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
)

// certValidity is long enough for any test or demo run and short enough that
// a leaked test CA is harmless soon.
const certValidity = 7 * 24 * time.Hour

// frontProxyClientName is the name of the client certificate the
// apiserver's aggregator presents to an aggregated API server
// (--proxy-client-cert-file), and the one name --requestheader-allowed-names
// lets set the X-Remote-* headers: kubeadm's.
const frontProxyClientName = "front-proxy-client"

// KeyPair is a certificate with its private key, both PEM-encoded.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// CertSpec describes one leaf certificate to issue.
type CertSpec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	// Server and Client select the extended key usages.
	Server, Client bool
}

// NewCA creates a self-signed CA valid from now-1h (clock skew with the
// guest) for certValidity.
func NewCA(commonName string, now time.Time) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, tmpl, key, key)
}

// Issue signs a leaf certificate for spec with the CA.
func (ca *KeyPair) Issue(spec CertSpec, now time.Time) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key for %s: %w", spec.CommonName, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	kp, err := sign(tmpl, ca.Cert, key, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issuing certificate for %s: %w", spec.CommonName, err)
	}
	return kp, nil
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM,
	}, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// NewServiceAccountKey returns the PEM private and public keys that sign and
// verify service account tokens.
func NewServiceAccountKey() (priv, pub []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating service account key: %w", err)
	}
	priv, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding service account public key: %w", err)
	}
	return priv, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating certificate serial: %w", err)
	}
	return s, nil
}

// newFrontProxyPKI creates the front-proxy (requestheader) CA and the
// client certificate it signs for the aggregator, as kubeadm does. A CA of
// its own, not the cluster CA: an aggregated API server believes the user
// named in the X-Remote-* headers of any client this CA vouches for, so no
// certificate the cluster CA issues (kubelets', admins') may pass as one.
func newFrontProxyPKI(now time.Time) (ca, client *KeyPair, err error) {
	ca, err = NewCA("front-proxy-ca", now)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the front-proxy CA: %w", err)
	}
	client, err = ca.Issue(CertSpec{CommonName: frontProxyClientName, Client: true}, now)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing the front-proxy client certificate: %w", err)
	}
	return ca, client, nil
}

// writeFrontProxyPKI writes the front-proxy CA's certificate and key and
// the front-proxy-client key pair where apiServerArgs names them.
func writeFrontProxyPKI(l layout, now time.Time) error {
	ca, client, err := newFrontProxyPKI(now)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{l.frontProxyCACert(), ca.CertPEM, 0o644},
		{l.frontProxyCAKey(), ca.KeyPEM, 0o600},
		{l.cert(frontProxyClientName), client.CertPEM, 0o644},
		{l.key(frontProxyClientName), client.KeyPEM, 0o600},
	} {
		if err := fsutil.WriteFileAtomic(f.path, f.data, f.mode); err != nil {
			return fmt.Errorf("writing the front-proxy PKI: %w", err)
		}
	}
	return nil
}
