package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsebs "github.com/aws/aws-sdk-go-v2/service/ebs"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/qemu-tests/awsstub/ebs"
	"github.com/berth-node/berth/qemu-tests/awsstub/ec2"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var creds = sigv4.Credentials{AccessKeyID: "AKIAPUBLISH", SecretAccessKey: "publish-secret", SessionToken: "publish-session"}

type stand struct {
	ebs  *ebs.Server
	ec2  *ec2.Server
	ebsc *awsebs.Client
	ec2c *awsec2.Client
}

func standIn(t testing.TB, ebsCfg ebs.Config) *stand {
	t.Helper()
	ebsCfg.Credentials, ebsCfg.Region, ebsCfg.Account = creds, "eu-central-1", "111122223333"
	s := &stand{}
	var err error
	if s.ebs, err = ebs.New(ebsCfg); err != nil {
		t.Fatal(err)
	}
	if s.ec2, err = ec2.New(ec2.Config{Credentials: creds, Region: "eu-central-1", Account: "111122223333", EBS: s.ebs, AvailableAfter: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	eu, stop, err := s.ebs.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cu, stop, err := s.ec2.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	p := credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
	s.ebsc = awsebs.New(awsebs.Options{Region: "eu-central-1", BaseEndpoint: aws.String(eu), Credentials: p})
	s.ec2c = awsec2.New(awsec2.Options{Region: "eu-central-1", BaseEndpoint: aws.String(cu), Credentials: p})
	return s
}

const mib = 1 << 20

// sparseDisk writes dir/disk.raw with data, written zeros and holes, and
// its manifest. Blocks (512 KiB): 0-1 random data; 2-3 written zeros;
// 4-9 a hole; 10 data in its second 100 KiB only (the rest a hole); 11-23
// a hole; 24, the last, 100 KiB of data (the disk ends there).
func sparseDisk(t testing.TB, dir string) (Image, []byte) {
	t.Helper()
	size := int64(12*mib + 100<<10)
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(off, n int64) {
		for i := off; i < off+n; i++ {
			want[i] = byte(rng.Uint32() | 1)
		}
	}
	fill(0, mib)
	fill(5*mib+100<<10, 100<<10)
	fill(12*mib, 100<<10)
	path := filepath.Join(dir, "disk.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 2 * mib}, {5*mib + 100<<10, 100 << 10}, {12 * mib, 100 << 10}} {
		if _, err := f.WriteAt(want[r[0]:r[0]+r[1]], r[0]); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(want)
	m := manifest.Manifest{BerthVersion: "v0.9.1-3-gabc+dirty", Arch: "arm64",
		Disk: &manifest.Disk{Path: "disk.raw", Size: size, SHA256: hex.EncodeToString(sum[:])}}
	mj, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mj, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := LoadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return img, want
}

// plan maps the disk's holes; the test needs a filesystem with them.
func plan(t testing.TB, img Image) (Plan, *os.File) {
	t.Helper()
	f, err := os.Open(img.DiskPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ext, err := DataExtents(f, img.Size)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(img.Size, ext)
	if err != nil {
		t.Fatal(err)
	}
	if p.Skipped() == 0 {
		// CI's machine keeps holes: there the upload must be proven.
		if os.Getenv("CI") == "true" {
			t.Fatalf("the filesystem of %s reports no holes (SEEK_HOLE unsupported): extents %v", img.DiskPath, ext)
		}
		t.Skipf("the filesystem of %s reports no holes (SEEK_HOLE unsupported): extents %v", img.DiskPath, ext)
	}
	return p, f
}

func fast() (UploadOptions, RegisterOptions) {
	return UploadOptions{Workers: 4, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		RegisterOptions{Poll: 10 * time.Millisecond, SnapshotWait: 10 * time.Second, ImageWait: 10 * time.Second}
}

// uefiBlob is the test key set's uefi-data, as make keys writes it.
func uefiBlob() string {
	b, err := os.ReadFile(filepath.Join("..", "secureboot", "testdata", "testkeys", "uefi-data"))
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(b))
}

func TestPublishSparseDisk(t *testing.T) {
	img, want := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	if !slices.Equal(p.Send, []int32{0, 1, 2, 3, 10, 24}) || p.Blocks != 25 || p.VolumeGiB != 1 {
		t.Fatalf("plan %+v, want blocks 0 1 2 3 (data, written zeros) 10 24 of 25 in 1 GiB", p)
	}
	s := standIn(t, ebs.Config{})
	uo, ro := fast()
	var progress bytes.Buffer
	uo.Progress = &progress
	up, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err != nil {
		t.Fatal(err)
	}
	if up.Sent != 6 || up.Retries != 0 || up.Reused {
		t.Fatalf("uploaded %+v", up)
	}
	if got := s.ebs.BlockIndexes(up.SnapshotID); !slices.Equal(got, p.Send) {
		t.Fatalf("stored blocks %v, want %v", got, p.Send)
	}
	vol, err := s.ebs.Volume(up.SnapshotID, img.Size)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(vol, want) {
		t.Fatal("the snapshot read back is not the disk")
	}
	if !strings.Contains(progress.String(), "uploaded 3.0 of 3.0 MiB (100%)") {
		t.Fatalf("progress %q", progress.String())
	}
	ro.UEFIData = uefiBlob()
	reg, err := Register(context.Background(), s.ec2c, img, up.SnapshotID, ro)
	if err != nil {
		t.Fatal(err)
	}
	imgs := s.ec2.Images()
	if len(imgs) != 1 || imgs[0].ID != reg.ImageID || reg.Existed {
		t.Fatalf("registered %+v, images %+v", reg, imgs)
	}
	wantParams := url.Values{
		"Name":                                {"berth-v0.9.1-3-gabc-dirty-arm64-" + img.SHA256[:8]},
		"Description":                         {"berth v0.9.1-3-gabc+dirty (arm64), disk sha256 " + img.SHA256},
		"Architecture":                        {"arm64"},
		"BootMode":                            {"uefi"},
		"EnaSupport":                          {"true"},
		"TpmSupport":                          {"v2.0"},
		"ImdsSupport":                         {"v2.0"},
		"UefiData":                            {ro.UEFIData},
		"RootDeviceName":                      {"/dev/xvda"},
		"VirtualizationType":                  {"hvm"},
		"BlockDeviceMapping.1.DeviceName":     {"/dev/xvda"},
		"BlockDeviceMapping.1.Ebs.SnapshotId": {up.SnapshotID},
		"BlockDeviceMapping.1.Ebs.VolumeType": {"gp3"},
		"BlockDeviceMapping.1.Ebs.DeleteOnTermination": {"true"},
	}
	if !reflect.DeepEqual(imgs[0].Params, wantParams) {
		t.Fatalf("RegisterImage parameters\n got %v\nwant %v", imgs[0].Params, wantParams)
	}
	sn, _ := s.ebs.Lookup(up.SnapshotID)
	if sn.Description != Description(img) || sn.VolumeSize != 1 || sn.Timeout != time.Hour || len(sn.Tags) != 3 {
		t.Fatalf("snapshot %+v", sn)
	}

	// A retried publish of the same disk: StartSnapshot's ClientToken
	// answers the completed snapshot, and the AMI is found by its name.
	again, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err != nil || !again.Reused || again.SnapshotID != up.SnapshotID || again.Sent != 0 {
		t.Fatalf("retried upload %+v: %v", again, err)
	}
	if n := len(s.ebs.Snapshots()); n != 1 {
		t.Fatalf("%d snapshots after a retried publish", n)
	}
	reg2, err := Register(context.Background(), s.ec2c, img, again.SnapshotID, ro)
	if err != nil || !reg2.Existed || reg2.ImageID != reg.ImageID {
		t.Fatalf("retried registration %+v: %v", reg2, err)
	}
}

// blockSum is the hex SHA-256 of block idx of the disk as sent (padded).
func blockSum(want []byte, idx int32) string {
	b := make([]byte, BlockSize)
	copy(b, want[min(int64(idx)*BlockSize, int64(len(want))):])
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestRetriesResendTheSameBytes(t *testing.T) {
	img, want := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	s := standIn(t, ebs.Config{})
	s.ebs.Inject(ebs.OpPut, 1, ebs.Fault{Kind: ebs.FaultChecksum}, ebs.Fault{Kind: ebs.FaultServer}, ebs.Fault{Kind: ebs.FaultThrottle}, ebs.Fault{Kind: ebs.FaultEchoChecksum})
	s.ebs.Inject(ebs.OpPut, 24, ebs.Fault{Kind: ebs.FaultHang, Hold: 10 * time.Second})
	uo, _ := fast()
	uo.AttemptTimeout = 300 * time.Millisecond
	up, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err != nil {
		t.Fatal(err)
	}
	if up.Retries != 5 {
		t.Fatalf("%d retries, want 5 (4 on block 1, 1 on block 24)", up.Retries)
	}
	for idx, n := range map[int32]int{1: 5, 24: 2, 0: 1} {
		at := s.ebs.Attempts(up.SnapshotID, idx)
		if len(at) != n {
			t.Fatalf("block %d: %d attempts %+v, want %d", idx, len(at), at, n)
		}
		for i, a := range at {
			if a.Len != BlockSize || a.SHA256 != blockSum(want, idx) {
				t.Errorf("block %d attempt %d sent other bytes: %+v", idx, i, a)
			}
		}
		if at[n-1].Status != 201 {
			t.Errorf("block %d: the last attempt answered %+v", idx, at[n-1])
		}
	}
	vol, _ := s.ebs.Volume(up.SnapshotID, img.Size)
	if !bytes.Equal(vol, want) {
		t.Fatal("the snapshot read back is not the disk")
	}
}

func TestRetriesEnd(t *testing.T) {
	img, _ := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	s := standIn(t, ebs.Config{})
	th := ebs.Fault{Kind: ebs.FaultThrottle}
	s.ebs.Inject(ebs.OpPut, 2, th, th, th)
	uo, _ := fast()
	uo.Attempts = 3
	_, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err == nil || !strings.Contains(err.Error(), "block 2, attempt 3 of 3: ") || !strings.Contains(err.Error(), "RequestThrottledException") {
		t.Fatalf("three throttled attempts: %v", err)
	}
}

func TestMiscountIsClear(t *testing.T) {
	img, _ := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	s := standIn(t, ebs.Config{})
	uo, _ := fast()
	// An earlier publish with the same ClientToken left a block this
	// upload does not send (a hole now): the counts differ.
	out, err := s.ebsc.StartSnapshot(context.Background(), StartInput(img, p, 60))
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Repeat([]byte{9}, BlockSize)
	h := sha256.Sum256(b)
	if err := putOnce(context.Background(), s.ebsc, aws.ToString(out.SnapshotId), 5, b, base64.StdEncoding.EncodeToString(h[:]), 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err == nil || !strings.Contains(err.Error(), "completing snapshot "+aws.ToString(out.SnapshotId)+" (6 blocks sent)") ||
		!strings.Contains(err.Error(), "ChangedBlocksCount is 6, but 7 distinct blocks") {
		t.Fatalf("miscount: %v", err)
	}
}

func TestSnapshotTimeoutIsClear(t *testing.T) {
	img, _ := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	// A Timeout minute of 5 ms: the 60-minute Timeout passes in 300 ms,
	// while block 24 hangs 2 s.
	s := standIn(t, ebs.Config{Minute: 5 * time.Millisecond})
	s.ebs.Inject(ebs.OpPut, 24, ebs.Fault{Kind: ebs.FaultHang, Hold: 2 * time.Second})
	uo, _ := fast()
	uo.AttemptTimeout = time.Second
	_, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	// Block 24's second attempt finds the snapshot in error (or, on a
	// slow host, another block's first).
	if err == nil || !strings.Contains(err.Error(), "uploading to snapshot") || !strings.Contains(err.Error(), "not completed within its Timeout of 60 minutes") {
		t.Fatalf("a snapshot past its Timeout: %v", err)
	}
}

func TestSnapshotWaitTimesOut(t *testing.T) {
	img, _ := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	s := standIn(t, ebs.Config{CompleteAfter: time.Hour})
	uo, ro := fast()
	up, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err != nil {
		t.Fatal(err)
	}
	ro.SnapshotWait = 300 * time.Millisecond
	_, err = Register(context.Background(), s.ec2c, img, up.SnapshotID, ro)
	if err == nil || !strings.Contains(err.Error(), "waiting for snapshot "+up.SnapshotID+" to complete (deadline 300ms)") || !strings.Contains(err.Error(), "state pending") {
		t.Fatalf("snapshot never completing: %v", err)
	}
	if len(s.ec2.Images()) != 0 {
		t.Fatal("an image was registered")
	}
}

func TestFailedRegistrationDeletesTheSnapshot(t *testing.T) {
	img, _ := sparseDisk(t, t.TempDir())
	p, f := plan(t, img)
	s := standIn(t, ebs.Config{})
	uo, ro := fast()
	up, err := Upload(context.Background(), s.ebsc, f, img, p, uo)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(uefiBlob())
	raw[len(raw)-1] ^= 0xff // the CRC no longer matches
	ro.UEFIData = base64.StdEncoding.EncodeToString(raw)
	_, err = Register(context.Background(), s.ec2c, img, up.SnapshotID, ro)
	if err == nil || !strings.Contains(err.Error(), "Invalid UefiData") || !strings.Contains(err.Error(), "snapshot "+up.SnapshotID+" was deleted") {
		t.Fatalf("refused registration: %v", err)
	}
	if _, ok := s.ebs.Lookup(up.SnapshotID); ok {
		t.Fatal("the snapshot of a refused registration is still there")
	}
}

func TestLoadImageRefusesAnotherDisk(t *testing.T) {
	dir := t.TempDir()
	img, _ := sparseDisk(t, dir)
	f, err := os.OpenFile(img.DiskPath, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteAt([]byte{1}, 3*mib) // in a hole, where it reads zeros
	f.Close()
	_, err = LoadImage(dir)
	if err == nil || !strings.Contains(err.Error(), img.DiskPath) || !strings.Contains(err.Error(), filepath.Join(dir, "manifest.json")) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a changed disk: %v", err)
	}
	if err := os.Remove(img.DiskPath); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadImage(dir); err == nil || !strings.Contains(err.Error(), "run make disk first") {
		t.Fatalf("no disk: %v", err)
	}
	if _, err := LoadImage(t.TempDir()); err == nil || !strings.Contains(err.Error(), "run make disk first") {
		t.Fatalf("no manifest: %v", err)
	}
}

// BenchmarkPublish uploads a 1 GiB sparse disk holding 300 MiB of data
// (in 3 MiB runs every 10 MiB) to the stand-ins: the upload's own cost
// (reading, hashing, SigV4, HTTP) with no network between.
func BenchmarkPublish(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "disk.raw")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 3*mib)
	rng := rand.New(rand.NewPCG(3, 4))
	for off := int64(0); off < 1<<30; off += 10 * mib {
		for i := range chunk {
			chunk[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(chunk, off); err != nil {
			b.Fatal(err)
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<30)); err != nil {
		b.Fatal(err)
	}
	img := Image{DiskPath: path, Version: "bench", Arch: "amd64", Size: 1 << 30, SHA256: hex.EncodeToString(h.Sum(nil))}
	ext, err := DataExtents(f, img.Size)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPlan(img.Size, ext)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("blocks %d, sent %d (%d MiB), holes skipped %d", p.Blocks, len(p.Send), p.SendBytes()/mib, p.Skipped())
	uo, _ := fast()
	uo.Workers = 8
	b.SetBytes(p.SendBytes())
	for i := 0; b.Loop(); i++ {
		s := standIn(b, ebs.Config{})
		img.Version = "bench" + string(rune('a'+i%26))
		if _, err := Upload(context.Background(), s.ebsc, f, img, p, uo); err != nil {
			b.Fatal(err)
		}
	}
}
