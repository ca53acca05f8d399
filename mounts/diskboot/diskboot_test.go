package diskboot

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// A malformed berth.verity stops the disk boot before anything is touched:
// berth never falls back to an unverified root.
func TestVerityRootRefusesBadParam(t *testing.T) {
	for _, v := range []string{"", "sha256:abc", "md5:" + strings.Repeat("0", 64) + ":00:10:10"} {
		loaded := false
		res, err := SwitchRoot(context.Background(), slog.New(slog.DiscardHandler), Options{
			Verity:      v,
			ClassBlock:  t.TempDir(),
			LoadModules: func(context.Context, ...string) error { loaded = true; return nil },
		})
		if err == nil || !strings.Contains(err.Error(), "refusing to boot an unverifiable root") {
			t.Errorf("berth.verity=%q: err = %v; want a refusal", v, err)
		}
		if res != nil || loaded {
			t.Errorf("berth.verity=%q: result %+v, modules loaded %v; want nothing done", v, res, loaded)
		}
	}
}

// A disk boot whose command line names a slot that does not exist stops
// before anything is touched, without waiting for the disk: the hint is
// sealed beside the root hash, and a wrong one is a wrong image.
func TestBadSlotHintRefused(t *testing.T) {
	const param = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + ":00:10:10"
	for _, slot := range []string{"c", "A", "berth-root-a"} {
		loaded := false
		res, err := SwitchRoot(context.Background(), slog.New(slog.DiscardHandler), Options{
			Verity:      param,
			Slot:        slot,
			ClassBlock:  t.TempDir(),
			LoadModules: func(context.Context, ...string) error { loaded = true; return nil },
		})
		if err == nil || !strings.Contains(err.Error(), "the command line's root slot") || !strings.Contains(err.Error(), "berth.slot=") {
			t.Errorf("berth.slot=%q: err = %v; want a refusal naming berth.slot", slot, err)
		}
		if res != nil || loaded {
			t.Errorf("berth.slot=%q: result %+v, modules loaded %v; want nothing done", slot, res, loaded)
		}
	}
}
