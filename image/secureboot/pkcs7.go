package secureboot

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	encasn1 "encoding/asn1"
	"errors"
	"fmt"
	"slices"

	"github.com/foxboron/go-uefi/pkcs7"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// signedData builds a PKCS#7 SignedData (RFC 2315) with one signer and
// SHA-256, wrapped in its ContentInfo. go-uefi's pkcs7.SignPKCS7 puts the
// current time in a signingTime attribute, so two signatures of one image
// differ and disk.raw would not be reproducible; this one signs only the
// contentType and messageDigest attributes that Authenticode and
// EFI_VARIABLE_AUTHENTICATION_2 need, and RSA PKCS#1 v1.5 is deterministic.
//
// digested is what messageDigest covers. With embed, it is carried as the
// content, wrapped in a SEQUENCE (Authenticode's SpcIndirectDataContent,
// whose digest covers its value without tag and length); without, the
// signature is detached (an authenticated variable's).
func signedData(key crypto.Signer, cert *x509.Certificate, contentType encasn1.ObjectIdentifier, digested []byte, embed bool) ([]byte, error) {
	if _, ok := key.Public().(*rsa.PublicKey); !ok {
		return nil, fmt.Errorf("signing key is %T, want RSA", key.Public())
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, errors.New("signing key does not match the certificate")
	}
	md := sha256.Sum256(digested)
	attrs, err := marshalAttributes(contentType, md[:])
	if err != nil {
		return nil, err
	}
	ah := sha256.Sum256(attrs)
	sig, err := key.Sign(rand.Reader, ah[:], crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("RSA signature: %w", err)
	}

	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) { // ContentInfo
		b.AddASN1ObjectIdentifier(pkcs7.OIDSignedData)
		b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
			b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) { // SignedData
				b.AddASN1Int64(1)
				b.AddASN1(asn1.SET, func(b *cryptobyte.Builder) {
					addSHA256AlgorithmID(b)
				})
				b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) { // contentInfo
					b.AddASN1ObjectIdentifier(contentType)
					if embed {
						b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
							b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
								b.AddBytes(digested)
							})
						})
					}
				})
				b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
					b.AddBytes(cert.Raw)
				})
				b.AddASN1(asn1.SET, func(b *cryptobyte.Builder) { // signerInfos
					b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
						b.AddASN1Int64(1)
						b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
							b.AddBytes(cert.RawIssuer)
							b.AddASN1BigInt(cert.SerialNumber)
						})
						addSHA256AlgorithmID(b)
						// authenticatedAttributes [0] IMPLICIT: the SET's
						// contents under another tag.
						b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
							s := cryptobyte.String(attrs)
							var inner cryptobyte.String
							s.ReadASN1(&inner, asn1.SET)
							b.AddBytes(inner)
						})
						b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
							b.AddASN1ObjectIdentifier(pkcs7.OIDEncryptionAlgorithmRSA)
							b.AddASN1NULL()
						})
						b.AddASN1OctetString(sig)
					})
				})
			})
		})
	})
	return b.Bytes()
}

// marshalAttributes encodes the SET OF the contentType and messageDigest
// attributes in DER, members sorted by their encoding: verifiers (OpenSSL
// in sbverify and EDK2) re-encode the set in DER before checking the
// signature over it.
func marshalAttributes(contentType encasn1.ObjectIdentifier, digest []byte) ([]byte, error) {
	var ct, md cryptobyte.Builder
	ct.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(pkcs7.OIDAttributeContentType)
		b.AddASN1(asn1.SET, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(contentType) })
	})
	md.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(pkcs7.OIDAttributeMessageDigest)
		b.AddASN1(asn1.SET, func(b *cryptobyte.Builder) { b.AddASN1OctetString(digest) })
	})
	members := make([][]byte, 0, 2)
	for _, m := range []*cryptobyte.Builder{&ct, &md} {
		e, err := m.Bytes()
		if err != nil {
			return nil, fmt.Errorf("PKCS#7 attributes: %w", err)
		}
		members = append(members, e)
	}
	slices.SortFunc(members, bytes.Compare)
	var set cryptobyte.Builder
	set.AddASN1(asn1.SET, func(b *cryptobyte.Builder) {
		for _, m := range members {
			b.AddBytes(m)
		}
	})
	return set.Bytes()
}

func addSHA256AlgorithmID(b *cryptobyte.Builder) {
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(pkcs7.OIDDigestAlgorithmSHA256)
		b.AddASN1NULL()
	})
}

// verifySignedData checks that p (a ContentInfo or a bare SignedData) was
// signed by cert over digested: a signer named by cert's issuer and
// serial, SHA-256, a contentType attribute equal to contentType, a
// messageDigest attribute equal to SHA-256(digested), and an RSA
// signature over the attributes that cert's key verifies. It returns the
// embedded content (nil when detached). go-uefi's own Verify checks the
// signature over the attributes but not that messageDigest matches the
// content, so the content could be swapped under a valid signature.
func verifySignedData(p []byte, cert *x509.Certificate, contentType encasn1.ObjectIdentifier, digested func(content []byte) ([]byte, error)) error {
	parsed, err := pkcs7.ParsePKCS7(p)
	if err != nil {
		return fmt.Errorf("PKCS#7: %w", err)
	}
	if !parsed.OID.Equal(contentType) {
		return fmt.Errorf("PKCS#7 content type %v, want %v", parsed.OID, contentType)
	}
	var content []byte
	if len(parsed.ContentInfo) > 0 {
		s := cryptobyte.String(parsed.ContentInfo)
		var inner cryptobyte.String
		if !s.ReadASN1(&inner, asn1.SEQUENCE) || !s.Empty() {
			return errors.New("PKCS#7 content is not one SEQUENCE")
		}
		content = inner
	}
	data, err := digested(content)
	if err != nil {
		return err
	}
	want := sha256.Sum256(data)
	for _, si := range parsed.SignerInfo {
		if !bytes.Equal(si.IssuerAndSerialnumber.RawIssuer, cert.RawIssuer) || si.IssuerAndSerialnumber.SerialNumber.Cmp(cert.SerialNumber) != 0 {
			continue
		}
		if si.DigestAlgorithm == nil || !si.DigestAlgorithm.Algorithm.Equal(pkcs7.OIDDigestAlgorithmSHA256) {
			return errors.New("signer's digest algorithm is not SHA-256")
		}
		a := si.AuthenticatedAttributes
		if a == nil {
			return errors.New("signer has no authenticated attributes")
		}
		if !a.ContentType.Equal(contentType) {
			return fmt.Errorf("contentType attribute %v, want %v", a.ContentType, contentType)
		}
		if !bytes.Equal(a.MessageDigest, want[:]) {
			return errors.New("messageDigest attribute does not match the signed content")
		}
		if err := cert.CheckSignature(x509.SHA256WithRSA, a.RawBytes, si.EncryptedDigest); err != nil {
			return fmt.Errorf("signature: %w", err)
		}
		return nil
	}
	return fmt.Errorf("no signer is %q (serial %x): %w", cert.Subject.String(), cert.SerialNumber, ErrNotSignedByCert)
}

// publicKeysEqual compares public keys of the kinds the standard library
// knows.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}
