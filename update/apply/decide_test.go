package apply

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	iverity "github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
)

const rootHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func version(t *testing.T, s string) repo.Version {
	t.Helper()
	v, err := repo.ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// baseInput is a node running 1.0 from slot a, offered 2.0 whose root
// image is 300 data blocks and their tree.
func baseInput(t *testing.T) Input {
	rootLen := int64(300+verity.TreeBlocks(300)) * 4096
	return Input{
		Running: status.Status{Version: "1.0", Slot: "a", Boot: status.BootSystemdBoot, Entry: "berth-1.0.efi", State: "good"},
		Arch:    "amd64",
		Release: repo.Release{Arch: "amd64", Version: version(t, "2.0"), RootHash: rootHash, Targets: map[repo.Kind]repo.Target{
			repo.KindUKI:  {Path: "amd64/2.0/berth.efi", Length: 400 << 10},
			repo.KindRoot: {Path: "amd64/2.0/root.img", Length: rootLen},
		}},
		SlotSize: 2 << 20,
	}
}

func TestDecide(t *testing.T) {
	rootLen := int64(304 * 4096)
	base := baseInput(t)
	plan := Plan{
		Release: base.Release, Arch: "amd64", From: "1.0", To: "2.0",
		Running: bootcount.Entry{Name: "berth-1.0.efi", Version: "1.0"}, RunningSlot: partition.SlotA, Slot: partition.SlotB, SlotSize: 2 << 20,
		Staged: bootcount.Entry{Name: "berth-2.0+3.efi", Version: "2.0", Counted: true, Left: 3},
		Root:   Layout{Bytes: rootLen, DataBlocks: 300, HashStartBlock: 300},
	}
	for _, c := range []struct {
		name   string
		mut    func(in *Input)
		want   func(p *Plan) // nil: refused
		reason Reason
		detail string
	}{
		{name: "upgrade", want: func(*Plan) {}},
		{name: "from slot b to slot a", mut: func(in *Input) { in.Running.Slot = "b" },
			want: func(p *Plan) { p.RunningSlot, p.Slot = partition.SlotB, partition.SlotA }},
		{name: "numeric order, not text", mut: func(in *Input) {
			in.Running.Version, in.Running.Entry = "1.9", "berth-1.9.efi"
			in.Release.Version = version(t, "1.10")
		}, want: func(p *Plan) {
			p.From, p.To = "1.9", "1.10"
			p.Running = bootcount.Entry{Name: "berth-1.9.efi", Version: "1.9"}
			p.Staged = bootcount.Entry{Name: "berth-1.10+3.efi", Version: "1.10", Counted: true, Left: 3}
		}},
		{name: "root image fills the slot", mut: func(in *Input) { in.SlotSize = rootLen }, want: func(p *Plan) { p.SlotSize = rootLen }},
		{name: "a dev build, downgrade allowed", mut: func(in *Input) {
			in.Running.Version, in.Running.Entry, in.AllowDowngrade = "dev", "berth-dev.efi", true
		}, want: func(p *Plan) {
			p.From, p.Running = "dev", bootcount.Entry{Name: "berth-dev.efi", Version: "dev"}
		}},

		{name: "direct boot", mut: func(in *Input) { in.Running.Boot = status.BootDirect },
			reason: ReasonRunning, detail: "started by direct, not by systemd-boot"},
		{name: "UEFI without systemd-boot", mut: func(in *Input) { in.Running.Boot = status.BootUEFI },
			reason: ReasonRunning, detail: "started by uefi"},
		{name: "status error", mut: func(in *Input) { in.Running.Error = "entry berth-1.0.efi is version 1.0, but the image is 1.1" },
			reason: ReasonRunning, detail: "does not add up: entry berth-1.0.efi is version 1.0, but the image is 1.1"},
		{name: "no slot", mut: func(in *Input) { in.Running.Slot = "" },
			reason: ReasonRunning, detail: `the running root slot: berth.slot="": want "a" or "b"`},
		{name: "bad slot", mut: func(in *Input) { in.Running.Slot = "c" },
			reason: ReasonRunning, detail: `berth.slot="c"`},
		{name: "no entry", mut: func(in *Input) { in.Running.Entry = "" },
			reason: ReasonRunning, detail: "the running UKI: UKI file name is empty"},
		{name: "trial", mut: func(in *Input) { in.Running.Entry = "berth-1.0+2-1.efi" },
			reason: ReasonTrial, detail: "berth-1.0+2-1.efi is indeterminate (on trial)"},
		{name: "last try", mut: func(in *Input) { in.Running.Entry = "berth-1.0+0-3.efi" },
			reason: ReasonTrial, detail: "berth-1.0+0-3.efi is bad"},
		{name: "version unknown", mut: func(in *Input) { in.Running.Version = "" },
			reason: ReasonRunning, detail: "the running version is unknown"},
		{name: "another architecture", mut: func(in *Input) { in.Release.Arch = "arm64" },
			reason: ReasonArch, detail: `release 2.0 is for "arm64", this node is "amd64"`},
		{name: "version not a UKI name", mut: func(in *Input) { in.Release.Version = repo.Version{} },
			reason: ReasonVersion, detail: `version "": want 1 to 64 characters`},
		{name: "same version", mut: func(in *Input) { in.Release.Version = version(t, "1.0") },
			reason: ReasonSameVersion, detail: "release 1.0 is the running version"},
		{name: "same release, written otherwise", mut: func(in *Input) { in.Release.Version = version(t, "1.0.0") },
			reason: ReasonSameVersion, detail: "release 1.0.0 is the running version 1.0"},
		{name: "same release, with a v", mut: func(in *Input) { in.Running.Version, in.Running.Entry = "v2.0", "berth-v2.0.efi" },
			reason: ReasonSameVersion, detail: "release 2.0 is the running version v2.0"},
		{name: "older", mut: func(in *Input) { in.Release.Version = version(t, "0.9") },
			reason: ReasonOlder, detail: "release 0.9 is older than the running version 1.0, and the trigger does not allow a downgrade"},
		{name: "older, allowed: systemd-boot would not start it", mut: func(in *Input) {
			in.Release.Version, in.AllowDowngrade = version(t, "0.9"), true
		}, reason: ReasonNotFirst, detail: "would keep starting berth-1.0.efi over berth-0.9+3.efi"},
		{name: "a dev build", mut: func(in *Input) { in.Running.Version, in.Running.Entry = "dev", "berth-dev.efi" },
			reason: ReasonUnordered, detail: `the running version "dev" is not a release version`},
		{name: "v prefix sorts before digits in systemd-boot", mut: func(in *Input) { in.Release.Version = version(t, "v2.0") },
			reason: ReasonNotFirst, detail: "would keep starting berth-1.0.efi over berth-v2.0+3.efi"},
		{name: "no UKI", mut: func(in *Input) { delete(in.Release.Targets, repo.KindUKI) },
			reason: ReasonIncomplete, detail: "release 2.0 has no uki target"},
		{name: "empty root image", mut: func(in *Input) { in.Release.Targets[repo.KindRoot] = repo.Target{} },
			reason: ReasonIncomplete, detail: "release 2.0 has no root target"},
		{name: "sha512 root hash", mut: func(in *Input) { in.Release.RootHash = rootHash + rootHash },
			reason: ReasonRootHash, detail: "want 64 hex digits (sha256), have 128 characters"},
		{name: "upper-case root hash", mut: func(in *Input) { in.Release.RootHash = strings.ToUpper(rootHash) },
			reason: ReasonRootHash, detail: "'A' at 10 is not a lower-case hex digit"},
		{name: "too large", mut: func(in *Input) { in.SlotSize = rootLen - 4096 },
			reason: ReasonTooLarge, detail: "root image is 1245184 bytes, slot b holds 1241088"},
		{name: "no slot size", mut: func(in *Input) { in.SlotSize = 0 },
			reason: ReasonTooLarge, detail: "slot b holds 0"},
		{name: "not blocks", mut: func(in *Input) { in.Release.Targets[repo.KindRoot] = repo.Target{Length: rootLen + 1} },
			reason: ReasonRootImage, detail: "root image of 1245185 bytes is not a slot image"},
		// 256 data blocks make a slot image of 259 blocks, 257 one of 261.
		{name: "between slot images", mut: func(in *Input) { in.Release.Targets[repo.KindRoot] = repo.Target{Length: 260 * 4096} },
			reason: ReasonRootImage, detail: "root image of 1064960 bytes is not a slot image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := baseInput(t)
			if c.mut != nil {
				c.mut(&in)
			}
			got, err := Decide(in)
			if c.want == nil {
				var ref *Refusal
				if !errors.As(err, &ref) || ref.Reason != c.reason || !strings.Contains(ref.Detail, c.detail) {
					t.Fatalf("Decide = %+v, %v\nwant a %s refusal saying %q", got, err, c.reason, c.detail)
				}
				if !strings.HasPrefix(err.Error(), "update refused ("+string(c.reason)+"): ") {
					t.Errorf("error %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := plan
			want.Release = in.Release
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Decide =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	in := baseInput(t)
	in.Release.Version = version(t, "0.9")
	_, err := Decide(in)
	at := time.Date(2026, 11, 24, 3, 9, 52, 0, time.FixedZone("CET", 3600))
	got := Refused(in, err, at)
	want := status.LastUpdate{Result: status.ResultRefused, Reason: err.Error(), From: "1.0", To: "0.9", Slot: "b", At: at.UTC()}
	if !reflect.DeepEqual(got, want) || !strings.Contains(got.Reason, "older than the running version") {
		t.Errorf("Refused = %+v, want %+v", got, want)
	}
	in.Running.Slot = ""
	if got := Refused(in, err, at); got.Slot != "" {
		t.Errorf("Refused without a running slot names slot %q", got.Slot)
	}
}

// TestLayout holds the slot image's arithmetic to image/verity's, the
// disk image's builder: the tree's height and size for any data size,
// and dataBlocksFor finds exactly the lengths slot images have.
func TestLayout(t *testing.T) {
	for _, n := range []uint64{1, 2, 127, 128, 129, 300, 16384, 16385, 128*128*128 + 1, 1 << 30, 1<<40 + 3} {
		if got, want := len(verity.TreeLevels(n)), iverity.Levels(n); got != want {
			t.Errorf("%d data blocks: %d levels, image/verity %d", n, got, want)
		}
		if got, want := int64(verity.TreeBlocks(n))*4096, iverity.HashSize(n, false); got != want {
			t.Errorf("%d data blocks: a %d-byte tree, image/verity %d", n, got, want)
		}
		length := int64(n)*4096 + iverity.HashSize(n, false)
		if got, ok := dataBlocksFor(length); !ok || got != n {
			t.Errorf("dataBlocksFor(%d) = %d, %v; want %d", length, got, ok, n)
		}
	}
	// Every length up to 20000 blocks: a slot image's or none.
	images := map[uint64]uint64{}
	for n := uint64(1); n <= 20000; n++ {
		images[n+verity.TreeBlocks(n)] = n
	}
	for total := uint64(0); total <= 20000; total++ {
		got, ok := dataBlocksFor(int64(total) * 4096)
		if want, is := images[total]; ok != is || got != want {
			t.Fatalf("dataBlocksFor(%d blocks) = %d, %v; want %d, %v", total, got, ok, want, is)
		}
	}
	for _, l := range []int64{-4096, 0, 1, 4095, 4097, 8192 + 1} {
		if n, ok := dataBlocksFor(l); ok {
			t.Errorf("dataBlocksFor(%d) = %d; want none", l, n)
		}
	}
}
