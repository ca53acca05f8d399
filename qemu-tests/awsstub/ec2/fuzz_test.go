package ec2

import (
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
