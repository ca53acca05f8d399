package imds

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseIdentityDocument(t *testing.T) {
	doc := []byte(`{
  "accountId" : "111122223333",
  "architecture" : "arm64",
  "availabilityZone" : "eu-west-1b",
  "billingProducts" : null,
  "imageId" : "ami-0abcdef1234567890",
  "instanceId" : "i-0fedcba9876543210",
  "instanceType" : "m7g.large",
  "kernelId" : null,
  "pendingTime" : "2026-03-04T05:06:07Z",
  "privateIp" : "172.31.5.6",
  "region" : "eu-west-1",
  "someFutureField" : {"x": 1},
  "version" : "2017-09-30"
}`)
	d, err := ParseIdentityDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := IdentityDocument{AccountID: "111122223333", Architecture: "arm64", AvailabilityZone: "eu-west-1b",
		ImageID: "ami-0abcdef1234567890", InstanceID: "i-0fedcba9876543210", InstanceType: "m7g.large",
		PrivateIP: "172.31.5.6", Region: "eu-west-1", Version: "2017-09-30"}
	if *d != want {
		t.Errorf("got %+v\nwant %+v", *d, want)
	}
	for in, wantErr := range map[string]string{
		``:                                 "identity document: EOF",
		`{"accountId": 12}`:                "identity document: json: cannot unmarshal number into Go struct field IdentityDocument.accountId of type string",
		`{} {}`:                            "identity document: trailing data after the JSON object",
		`<html>500</html>`:                 "identity document: invalid character '<' looking for beginning of value",
		strings.Repeat(" ", maxDocument+1): "identity document: 65537 bytes, more than the 65536 allowed",
	} {
		if _, err := ParseIdentityDocument([]byte(in)); err == nil || err.Error() != wantErr {
			t.Errorf("ParseIdentityDocument(%.20q): err = %v, want %q", in, err, wantErr)
		}
	}
}

func TestParseListing(t *testing.T) {
	got := ParseListing([]byte("ami-id\nplacement/\n\n  mac \r\nnetwork/\n"))
	if want := []string{"ami-id", "placement/", "mac", "network/"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := ParseListing(nil); got != nil {
		t.Errorf("empty listing: %q, want nil", got)
	}
}

func TestParseIPv6s(t *testing.T) {
	got, err := ParseIPv6s([]byte("2600:1f14:abc:1200:0:0:0:10\n2600:1f14:abc:1200::11\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2600:1f14:abc:1200::10", "2600:1f14:abc:1200::11"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		"10.0.0.1":                `ipv6s line 1: "10.0.0.1" is not an IPv6 address`,
		"2600::1\n::ffff:1.2.3.4": `ipv6s line 2: "::ffff:1.2.3.4" is not an IPv6 address`,
		"<html>":                  `ipv6s line 1: "<html>" is not an IPv6 address`,
	} {
		if _, err := ParseIPv6s([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("ParseIPv6s(%q): err = %v, want %q", in, err, want)
		}
	}
}

func FuzzParseIdentityDocument(f *testing.F) {
	f.Add([]byte(`{"accountId" : "1", "region" : "us-east-1", "instanceId" : "i-1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseIdentityDocument(b)
		if err != nil {
			if d != nil {
				t.Fatal("a document and an error")
			}
			return
		}
		if len(b) > maxDocument {
			t.Fatalf("accepted %d bytes", len(b))
		}
	})
}

func FuzzParseListing(f *testing.F) {
	f.Add([]byte("ami-id\nplacement/\n"))
	f.Add([]byte("2600::1\n2600::2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range ParseListing(b) {
			if e == "" || strings.ContainsRune(e, '\n') || strings.TrimSpace(e) != e {
				t.Fatalf("entry %q is empty, spans lines or has surrounding space", e)
			}
		}
		v6, err := ParseIPv6s(b)
		if err != nil {
			return
		}
		for _, a := range v6 {
			p, err := netip.ParseAddr(a)
			if err != nil || !p.Is6() || p.String() != a || !utf8.ValidString(a) {
				t.Fatalf("ParseIPv6s returned %q, not a canonical IPv6 address", a)
			}
		}
	})
}
