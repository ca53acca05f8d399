package publish

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ebstypes "github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/smithy-go"

	"github.com/berth-node/berth/image/disk"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/qemu-tests/awsstub/ebs"
)

func TestNewPlan(t *testing.T) {
	const B = BlockSize
	for _, c := range []struct {
		name    string
		size    int64
		ext     []Extent
		send    []int32
		blocks  int64
		gib     int64
		wantErr string
	}{
		{name: "all holes", size: 3 * B, blocks: 3, gib: 1},
		{name: "whole file data", size: 3 * B, ext: []Extent{{0, 3 * B}}, send: []int32{0, 1, 2}, blocks: 3, gib: 1},
		{name: "a byte in a block", size: 4 * B, ext: []Extent{{2*B + 7, 1}}, send: []int32{2}, blocks: 4, gib: 1},
		{name: "two extents in one block", size: 4 * B, ext: []Extent{{10, 10}, {100, 10}, {B - 1, 2}}, send: []int32{0, 1}, blocks: 4, gib: 1},
		{name: "partial last block", size: 2*B + 100, ext: []Extent{{2 * B, 100}}, send: []int32{2}, blocks: 3, gib: 1},
		{name: "just over a GiB", size: 1<<30 + 1, ext: []Extent{{1 << 30, 1}}, send: []int32{2048}, blocks: 2049, gib: 2},
		{name: "overlap", size: 4 * B, ext: []Extent{{0, 2 * B}, {B, 10}}, wantErr: "overlaps"},
		{name: "past the end", size: 4 * B, ext: []Extent{{3 * B, B + 1}}, wantErr: "outside"},
		{name: "empty disk", size: 0, wantErr: "0 bytes"},
	} {
		p, err := NewPlan(c.size, c.ext)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(p.Send, c.send) || p.Blocks != c.blocks || p.VolumeGiB != c.gib || p.Skipped() != c.blocks-int64(len(c.send)) {
			t.Errorf("%s: %+v %v, want send %v of %d blocks, %d GiB", c.name, p, err, c.send, c.blocks, c.gib)
		}
	}
}

// TestBerthShapedDisk plans a disk written as make disk writes one
// (image/disk's layout and GPT, the ESP and root copied in whole, the data
// partition left unwritten) with a 40 MiB ESP and a 200 MiB root plus
// its verity tree: the MiB before the ESP, slot a's slack, the empty slot
// b, the 16 MiB data partition and the MiB before the backup GPT are
// holes.
func TestBerthShapedDisk(t *testing.T) {
	const m = 1 << 20
	root := int64(200*m + 200*m/128) // erofs plus about its verity tree
	l, err := disk.Plan(disk.Sizes{ESP: 40 * m, Root: root, Data: disk.DefaultDataSize}, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(l.Size()); err != nil {
		t.Fatal(err)
	}
	if err := partition.WriteDisk(f, l); err != nil {
		t.Fatal(err)
	}
	esp, _, _ := l.Find(partition.NameESP)
	rp, _, _ := l.Find(partition.SlotA.PartName())
	ones := bytes.Repeat([]byte{1}, int(root))
	if _, err := f.WriteAt(ones[:40*m], esp.Offset()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ones, rp.Offset()); err != nil {
		t.Fatal(err)
	}
	ext, err := DataExtents(f, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(l.Size(), ext)
	if err != nil {
		t.Fatal(err)
	}
	if p.Skipped() == 0 {
		// CI's machine keeps holes: there the upload must be proven.
		if os.Getenv("CI") == "true" {
			t.Fatalf("the filesystem reports no holes (SEEK_HOLE unsupported): %v", ext)
		}
		t.Skipf("the filesystem reports no holes (SEEK_HOLE unsupported): %v", ext)
	}
	t.Logf("%d MiB disk: %d blocks, %d sent, %d skipped as holes", l.Size()/m, p.Blocks, len(p.Send), p.Skipped())
	// Block 0 (GPT), the ESP's 80, the root's 404 (its last partly data)
	// and the backup GPT's block; slot b (384 MiB, empty) is all holes.
	if p.Blocks != 1652 || len(p.Send) != 486 || p.Skipped() != 1166 {
		t.Fatalf("%d blocks, %d sent, %d skipped; want 1652, 486, 1166", p.Blocks, len(p.Send), p.Skipped())
	}
}

func testImage() Image {
	return Image{Version: "v1.2.3", Arch: "amd64", Size: 1, SHA256: strings.Repeat("ab", 32), DiskPath: "build/image/disk.raw"}
}

func TestNames(t *testing.T) {
	img := testImage()
	if got := AMIName(img); got != "berth-v1.2.3-x86_64-abababab" {
		t.Errorf("AMIName %q", got)
	}
	img.Version = "v1.2.3+dirty:" + strings.Repeat("x", 200)
	name := AMIName(img)
	if len(name) > 128 || !regexp.MustCompile(`^[a-zA-Z0-9().\-/_ ]{3,128}$`).MatchString(name) || !strings.HasSuffix(name, "-x86_64-abababab") {
		t.Errorf("a long odd version: %q", name)
	}
	if d := Description(img); len(d) > 255 {
		t.Errorf("description of %d characters", len(d))
	}
	p := Plan{VolumeGiB: 1}
	a := ClientToken(testImage(), p, 60)
	if a != ClientToken(testImage(), p, 60) || a == ClientToken(testImage(), p, 61) || a == ClientToken(img, p, 60) || len(a) > 64 {
		t.Errorf("ClientToken %q is not a stable function of the request", a)
	}
	other := testImage()
	other.SHA256 = strings.Repeat("cd", 32)
	if a == ClientToken(other, p, 60) {
		t.Error("two disks share a ClientToken")
	}
}

func TestParseManifest(t *testing.T) {
	sha := strings.Repeat("0f", 32)
	good := fmt.Sprintf(`{"berthVersion":"v1","arch":"arm64","disk":{"path":"disk.raw","size":1048576,"sha256":"%s"}}`, sha)
	img, err := ParseManifest([]byte(good), "out/manifest.json")
	if err != nil || img.DiskPath != "out/disk.raw" || img.Arch != "arm64" || img.Version != "v1" || img.Size != 1<<20 || img.SHA256 != sha {
		t.Fatalf("%+v %v", img, err)
	}
	legacy, err := ParseManifest([]byte(strings.Replace(good, `"arch":"arm64",`, "", 1)), "m.json")
	if err != nil || legacy.Arch != "amd64" {
		t.Fatalf("a manifest without arch: %+v %v", legacy, err)
	}
	for name, c := range map[string]struct{ json, want string }{
		"no disk":      {`{"berthVersion":"v1"}`, "run make disk first"},
		"path escapes": {strings.Replace(good, `"disk.raw"`, `"../disk.raw"`, 1), "not a file name"},
		"bad sha":      {strings.Replace(good, sha, "XYZ", 1), "disk.sha256"},
		"riscv":        {strings.Replace(good, "arm64", "riscv64", 1), "riscv64"},
		"no version":   {strings.Replace(good, `"v1"`, `""`, 1), "berthVersion"},
		"not json":     {`{`, "decoding"},
	} {
		if _, err := ParseManifest([]byte(c.json), "m.json"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "m.json") {
			t.Errorf("%s: %v, want an error naming m.json and saying %q", name, err, c.want)
		}
	}
}

func TestRegisterInputNoUEFIData(t *testing.T) {
	in := RegisterInput(testImage(), "snap-01", "")
	if in.UefiData != nil || in.TpmSupport != "v2.0" || in.BootMode != "uefi" || *in.BlockDeviceMappings[0].Ebs.SnapshotId != "snap-01" {
		t.Fatalf("%+v", in)
	}
}

func TestLinearChecksumMatchesTheStandIn(t *testing.T) {
	blocks := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	var ds [][32]byte
	m := map[int32][32]byte{}
	for i, b := range blocks {
		d := sha256.Sum256(b)
		ds = append(ds, d)
		m[int32(i*7)] = d
	}
	if LinearChecksum(ds) != ebs.LinearChecksum(m) {
		t.Fatal("the uploader's LINEAR checksum is not the stand-in's")
	}
	slices.Reverse(ds)
	if LinearChecksum(ds) == ebs.LinearChecksum(m) {
		t.Fatal("LINEAR does not depend on the order")
	}
}

func TestRetryable(t *testing.T) {
	api := func(code string) error { return &smithy.GenericAPIError{Code: code} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{api("RequestThrottledException"), true},
		{api("InternalServerException"), true},
		{fmt.Errorf("wrapped: %w", errChecksumEcho), true},
		{&ebstypes.ValidationException{Message: ptr("The checksum of the block data does not match"), Reason: ebstypes.ValidationExceptionReasonInvalidBlock}, true},
		{&ebstypes.ValidationException{Message: ptr("block index 5000 is outside the volume"), Reason: ebstypes.ValidationExceptionReasonInvalidBlock}, false},
		{&ebstypes.ResourceNotFoundException{}, false},
		{api("AccessDeniedException"), false},
		{errors.New("something else"), false},
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v", c.err, got)
		}
	}
}

func ptr(s string) *string { return &s }

func TestBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: time.Second} {
		for range 50 {
			if d := Backoff(attempt, 100*time.Millisecond, time.Second); d < want/2 || d > want {
				t.Fatalf("attempt %d: %s, want %s..%s", attempt, d, want/2, want)
			}
		}
	}
}

func TestProgressLine(t *testing.T) {
	if got := ProgressLine(0, 100<<20, 0); got != "uploaded 0.0 of 100.0 MiB (0%)" {
		t.Errorf("at start: %q", got)
	}
	if got := ProgressLine(25<<20, 100<<20, 5*time.Second); got != "uploaded 25.0 of 100.0 MiB (25%), 5.0 MiB/s, 15s left" {
		t.Errorf("a quarter in: %q", got)
	}
}
