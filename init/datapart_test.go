package main

import (
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/sigprobe"
)

// Only a blank partition is formatted; berth's own ext4 is mounted as it
// is; anything else is refused, never formatted over.
func TestDataFSAction(t *testing.T) {
	for _, tc := range []struct {
		kind    sigprobe.Kind
		mkfs    bool
		wantErr bool
	}{
		{sigprobe.Blank, true, false},
		{sigprobe.Ext4, false, false},
		{sigprobe.XFS, false, true},
		{sigprobe.Unknown, false, true},
		{sigprobe.GPT, false, true},
	} {
		mkfs, err := dataFSAction(sigprobe.Signature{Kind: tc.kind})
		if mkfs != tc.mkfs || (err != nil) != tc.wantErr {
			t.Errorf("%s: mkfs=%v err=%v; want mkfs=%v err=%v", tc.kind, mkfs, err, tc.mkfs, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "not formatting") {
			t.Errorf("%s: error %q does not say it refuses to format", tc.kind, err)
		}
	}
}
