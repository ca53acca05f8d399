package plan

import (
	"strings"
	"testing"
)

func TestIMDSHostname(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ip-10-0-1-2.ec2.internal", "ip-10-0-1-2.ec2.internal"},
		{"ip-10-0-1-2.ec2.internal example.com corp.example", "ip-10-0-1-2.ec2.internal"},
		{"  ip-10-0-1-2.ec2.internal  ", "ip-10-0-1-2.ec2.internal"},
		// Not split: the newline stays for the syntax check to refuse.
		{"ip-10-0-1-2.ec2.internal\nnameserver 6.6.6.6", "ip-10-0-1-2.ec2.internal\nnameserver"},
		{"", ""},
	} {
		got, warn := IMDSHostname(tc.in)
		if got != tc.want {
			t.Errorf("IMDSHostname(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if several := len(strings.Fields(strings.ReplaceAll(tc.in, "\n", "x"))) > 1; several != (warn != "") {
			t.Errorf("IMDSHostname(%q) warning %q: want one only when names were dropped", tc.in, warn)
		}
	}
}

// TestBuildSeveralLocalHostnames: a local-hostname with several names, as
// EC2 gives with several DHCP-option domains, names the node by the first
// and says so; it does not stop the boot.
func TestBuildSeveralLocalHostnames(t *testing.T) {
	c := goldenCases()[0]
	in := c.inputs(t)
	first := in.Instance.LocalHostname
	in.Instance.LocalHostname = first + " example.com corp.example"
	p, err := Build(in)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if p.NodeName != first {
		t.Errorf("node name %q, want %q", p.NodeName, first)
	}
	var warned bool
	for _, w := range p.Warnings {
		warned = warned || strings.Contains(w, "local-hostname")
	}
	if !warned {
		t.Errorf("no warning about the dropped names in %q", p.Warnings)
	}
}
