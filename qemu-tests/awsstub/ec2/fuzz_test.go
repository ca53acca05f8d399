package ec2

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzParseForm feeds arbitrary query-protocol bodies (outside input): no
// panic, and what is accepted names an Action at the one API version.
func FuzzParseForm(f *testing.F) {
	f.Add("Action=RegisterImage&Version=2016-11-15&Name=x&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fxvda")
	f.Add("Action=DescribeSnapshots&Version=2016-11-15&SnapshotId.1=snap-01")
	f.Add("Version=2016-11-15")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, body string) {
		q, err := ParseForm([]byte(body))
		if err != nil {
			return
		}
		if q.Get("Action") == "" || q.Get("Version") != APIVersion {
			t.Fatalf("accepted %q", body)
		}
		_ = list(q, "SnapshotId")
	})
}

// FuzzCheckUEFIHeader feeds arbitrary blobs: no panic, and nothing that
// lacks the magic is accepted.
func FuzzCheckUEFIHeader(f *testing.F) {
	f.Add([]byte("QU1aTlVFRkk="))
	f.Add([]byte("not base64"))
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte("AMZNUEFI\x00\x00\x00\x00\x00\x00\x00\x00\x78\xbb"))))
	f.Fuzz(func(t *testing.T, b64 []byte) {
		if CheckUEFIHeader(b64) != nil {
			return
		}
		raw, err := base64.StdEncoding.DecodeString(string(b64))
		if err != nil {
			raw, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(b64)))
		}
		if err != nil || string(raw[:8]) != "AMZNUEFI" {
			t.Fatalf("accepted %q", b64)
		}
	})
}
