package plan

import (
	"fmt"
	"strings"
)

// IMDSHostname is the name IMDS's local-hostname gives the node. EC2
// answers with several space-separated names when the VPC's DHCP options
// list more than one domain ("ip-10-0-1-2.ec2.internal example.com"); the
// first is the instance's private DNS name, and the rest are not names of
// this node. warning is non-empty when names were dropped.
func IMDSHostname(localHostname string) (name, warning string) {
	// Spaces only: any other whitespace (a newline) stays in the name
	// for the syntax check to refuse.
	f := strings.FieldsFunc(localHostname, func(r rune) bool { return r == ' ' })
	if len(f) == 0 {
		return "", ""
	}
	if len(f) > 1 {
		warning = fmt.Sprintf("instance metadata local-hostname %q has %d names (the VPC's DHCP options list several domains); using the first, %q", localHostname, len(f), f[0])
	}
	return f[0], warning
}
