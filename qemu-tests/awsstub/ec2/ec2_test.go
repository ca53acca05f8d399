package ec2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"github.com/berth-node/berth/image/secureboot/uefidata"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsebs "github.com/aws/aws-sdk-go-v2/service/ebs"
	ebstypes "github.com/aws/aws-sdk-go-v2/service/ebs/types"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/berth-node/berth/qemu-tests/awsstub/ebs"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var creds = sigv4.Credentials{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "secret"}

type env struct {
	ebs    *ebs.Server
	ec2    *Server
	ebsc   *awsebs.Client
	ec2c   *awsec2.Client
	ec2URL string
}

func start(t *testing.T) *env {
	t.Helper()
	e := &env{}
	var err error
	if e.ebs, err = ebs.New(ebs.Config{Credentials: creds, Region: "eu-west-1", Account: "111122223333"}); err != nil {
		t.Fatal(err)
	}
	if e.ec2, err = New(Config{Credentials: creds, Region: "eu-west-1", Account: "111122223333", EBS: e.ebs, AvailableAfter: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ebsURL, stop, err := e.ebs.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	e.ec2URL, stop, err = e.ec2.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	p := credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, "")
	e.ebsc = awsebs.New(awsebs.Options{Region: "eu-west-1", BaseEndpoint: aws.String(ebsURL), Credentials: p})
	e.ec2c = awsec2.New(awsec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(e.ec2URL), Credentials: p, RetryMaxAttempts: 1})
	return e
}

// snapshot writes a one-block snapshot, completed unless pending.
func (e *env) snapshot(t *testing.T, complete bool) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.ebsc.StartSnapshot(ctx, &awsebs.StartSnapshotInput{VolumeSize: aws.Int64(1), Timeout: aws.Int32(60)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.SnapshotId)
	b := bytes.Repeat([]byte{7}, ebs.BlockSize)
	h := sha256.Sum256(b)
	if _, err := e.ebsc.PutSnapshotBlock(ctx, &awsebs.PutSnapshotBlockInput{SnapshotId: aws.String(id), BlockIndex: aws.Int32(0), BlockData: bytes.NewReader(b),
		DataLength: aws.Int32(ebs.BlockSize), Checksum: aws.String(base64.StdEncoding.EncodeToString(h[:])), ChecksumAlgorithm: ebstypes.ChecksumAlgorithmChecksumAlgorithmSha256}); err != nil {
		t.Fatal(err)
	}
	if complete {
		if _, err := e.ebsc.CompleteSnapshot(ctx, &awsebs.CompleteSnapshotInput{SnapshotId: aws.String(id), ChangedBlocksCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// uefiBlob builds a UefiData blob as make keys writes it (uefidata.Encode
// of a key set's PK, KEK and db), then sets its version or breaks its
// CRC32C.
func uefiBlob(t *testing.T, version uint32, breakCRC bool) string {
	t.Helper()
	esl := []byte("not a real signature list, the stand-in does not read it")
	b64, err := uefidata.Encode(uefidata.SecureBootVariables(esl, esl, esl))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(raw[12:16], version)
	crc := crc32.Checksum(raw[12:], crc32.MakeTable(crc32.Castagnoli))
	if breakCRC {
		crc ^= 1
	}
	binary.LittleEndian.PutUint32(raw[8:12], crc)
	return base64.StdEncoding.EncodeToString(raw)
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func registerInput(snap, name string) *awsec2.RegisterImageInput {
	return &awsec2.RegisterImageInput{Name: aws.String(name), Description: aws.String("berth test"), Architecture: types.ArchitectureValuesX8664,
		BootMode: types.BootModeValuesUefi, EnaSupport: aws.Bool(true), TpmSupport: types.TpmSupportValuesV20, ImdsSupport: types.ImdsSupportValuesV20,
		RootDeviceName: aws.String("/dev/xvda"), VirtualizationType: aws.String("hvm"),
		BlockDeviceMappings: []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"),
			Ebs: &types.EbsBlockDevice{SnapshotId: aws.String(snap), VolumeType: types.VolumeTypeGp3, DeleteOnTermination: aws.Bool(true)}}}}
}

func TestRegisterThroughSDK(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	snap := e.snapshot(t, true)
	w := awsec2.NewSnapshotCompletedWaiter(e.ec2c, func(o *awsec2.SnapshotCompletedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 20*time.Millisecond
	})
	if err := w.Wait(ctx, &awsec2.DescribeSnapshotsInput{SnapshotIds: []string{snap}}, 5*time.Second); err != nil {
		t.Fatalf("snapshot waiter: %v", err)
	}
	in := registerInput(snap, "berth-v1-x86_64 (test)")
	in.UefiData = aws.String(uefiBlob(t, 0, false))
	out, err := e.ec2c.RegisterImage(ctx, in)
	if err != nil {
		t.Fatalf("RegisterImage: %v", err)
	}
	ami := aws.ToString(out.ImageId)
	if !strings.HasPrefix(ami, "ami-0") {
		t.Fatalf("image ID %q", ami)
	}
	iw := awsec2.NewImageAvailableWaiter(e.ec2c, func(o *awsec2.ImageAvailableWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 20*time.Millisecond
	})
	if err := iw.Wait(ctx, &awsec2.DescribeImagesInput{ImageIds: []string{ami}}, 5*time.Second); err != nil {
		t.Fatalf("image waiter: %v", err)
	}
	di, err := e.ec2c.DescribeImages(ctx, &awsec2.DescribeImagesInput{Owners: []string{"self"},
		Filters: []types.Filter{{Name: aws.String("name"), Values: []string{"berth-v1-x86_64 (test)"}}}})
	if err != nil || len(di.Images) != 1 {
		t.Fatalf("DescribeImages by name: %v %+v", err, di)
	}
	im := di.Images[0]
	if aws.ToString(im.ImageId) != ami || im.State != types.ImageStateAvailable || im.BootMode != types.BootModeValuesUefi || im.TpmSupport != types.TpmSupportValuesV20 ||
		im.ImdsSupport != types.ImdsSupportValuesV20 || !aws.ToBool(im.EnaSupport) || im.Architecture != types.ArchitectureValuesX8664 ||
		len(im.BlockDeviceMappings) != 1 || aws.ToString(im.BlockDeviceMappings[0].Ebs.SnapshotId) != snap || im.BlockDeviceMappings[0].Ebs.VolumeType != types.VolumeTypeGp3 {
		t.Fatalf("described %+v", im)
	}
	if _, err := e.ec2c.RegisterImage(ctx, registerInput(snap, "berth-v1-x86_64 (test)")); code(err) != "InvalidAMIName.Duplicate" {
		t.Fatalf("same name again: %v", err)
	}
	if _, err := e.ec2c.DeleteSnapshot(ctx, &awsec2.DeleteSnapshotInput{SnapshotId: aws.String(snap)}); code(err) != "InvalidSnapshot.InUse" {
		t.Fatalf("deleting the image's snapshot: %v", err)
	}
	other := e.snapshot(t, true)
	if _, err := e.ec2c.DeleteSnapshot(ctx, &awsec2.DeleteSnapshotInput{SnapshotId: aws.String(other)}); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, err := e.ec2c.DescribeSnapshots(ctx, &awsec2.DescribeSnapshotsInput{SnapshotIds: []string{other}}); code(err) != "InvalidSnapshot.NotFound" {
		t.Fatalf("a deleted snapshot: %v", err)
	}
}

func TestRegisterImageRefusals(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	done, pending := e.snapshot(t, true), e.snapshot(t, false)
	for name, c := range map[string]struct {
		edit func(*awsec2.RegisterImageInput)
		code string
	}{
		"pending snapshot": {func(in *awsec2.RegisterImageInput) { in.BlockDeviceMappings[0].Ebs.SnapshotId = aws.String(pending) }, "IncorrectState"},
		"unknown snapshot": {func(in *awsec2.RegisterImageInput) {
			in.BlockDeviceMappings[0].Ebs.SnapshotId = aws.String("snap-0aaaaaaaaaaaaaaaa")
		}, "InvalidSnapshot.NotFound"},
		"root not mapped":       {func(in *awsec2.RegisterImageInput) { in.RootDeviceName = aws.String("/dev/sda1") }, "InvalidBlockDeviceMapping"},
		"TPM with legacy BIOS":  {func(in *awsec2.RegisterImageInput) { in.BootMode = types.BootModeValuesLegacyBios }, "InvalidParameterCombination"},
		"UefiData's CRC":        {func(in *awsec2.RegisterImageInput) { in.UefiData = aws.String(uefiBlob(t, 0, true)) }, "InvalidParameterValue"},
		"name of 2":             {func(in *awsec2.RegisterImageInput) { in.Name = aws.String("ab") }, "InvalidAMIName.Malformed"},
		"name with a colon":     {func(in *awsec2.RegisterImageInput) { in.Name = aws.String("berth:v1") }, "InvalidAMIName.Malformed"},
		"volume under snapshot": {func(in *awsec2.RegisterImageInput) { in.BlockDeviceMappings[0].Ebs.VolumeSize = aws.Int32(0) }, "InvalidParameterValue"},
		"volume type":           {func(in *awsec2.RegisterImageInput) { in.BlockDeviceMappings[0].Ebs.VolumeType = "gp9" }, "InvalidParameterValue"},
	} {
		in := registerInput(done, "berth-refused")
		c.edit(in)
		if _, err := e.ec2c.RegisterImage(ctx, in); code(err) != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
	if imgs := e.ec2.Images(); len(imgs) != 0 {
		t.Fatalf("refused registrations left images: %+v", imgs)
	}
	e.ec2.Inject("RegisterImage", Fault{Status: 503, Code: "Unavailable", Message: "injected"})
	if _, err := e.ec2c.RegisterImage(ctx, registerInput(done, "berth-ok")); code(err) != "Unavailable" {
		t.Fatalf("injected fault: %v", err)
	}
	bad := awsec2.New(awsec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(e.ec2URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, "wrong", "")})
	if _, err := bad.DescribeSnapshots(ctx, &awsec2.DescribeSnapshotsInput{SnapshotIds: []string{done}}); code(err) != "AuthFailure" {
		t.Fatalf("wrong secret: %v", err)
	}
}
