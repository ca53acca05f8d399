package main

import (
	"strings"
	"testing"
)

func TestPrivateDNSName(t *testing.T) {
	for _, tc := range []struct{ ip, region, want string }{
		{"10.0.1.23", "us-west-2", "ip-10-0-1-23.us-west-2.compute.internal"},
		{"172.31.0.5", "us-east-1", "ip-172-31-0-5.ec2.internal"},
		{"", "us-west-2", ""},
	} {
		if got := privateDNSName(tc.ip, tc.region); got != tc.want {
			t.Errorf("privateDNSName(%q, %q) = %q, want %q", tc.ip, tc.region, got, tc.want)
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	for args, want := range map[string]string{
		"-user-data /nonexistent/ud": "reading -user-data: open /nonexistent/ud",
		"stray":                      `unexpected arguments ["stray"]`,
		"-listen 256.0.0.1:0":        "imdsserver: listening on 256.0.0.1:0",
	} {
		err := run(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run(%s): err = %v, want one containing %q", args, err, want)
		}
	}
}
