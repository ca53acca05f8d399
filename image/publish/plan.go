// Package publish makes an AMI of a berth disk image through the EBS
// direct APIs, as awslabs/coldsnap uploads Bottlerocket's: no S3 bucket,
// no vmimport role. It uploads disk.raw as an EBS snapshot (StartSnapshot,
// PutSnapshotBlock per 512 KiB block with its SHA-256, CompleteSnapshot
// with the LINEAR aggregate checksum), skipping only the file's real holes,
// then registers the snapshot as a UEFI, TPM 2.0, IMDSv2-only image.
//
// What decides (the plan of blocks, the names, the StartSnapshot and
// RegisterImage parameters, what is retried) is pure and here; what acts
// (reading the file, the calls, the waits) is in upload.go and register.go.
// It is a host tool: nothing in the node binary imports it.
package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	ebstypes "github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/berth-node/berth/config/manifest"
)

// BlockSize is EBS's snapshot block size.
const BlockSize = 512 << 10

const gib = 1 << 30

// RootDevice is the AMI's root device, where EC2 attaches the snapshot.
const RootDevice = "/dev/xvda"

// Extent is a run of bytes of the disk file that hold data (not a hole).
type Extent struct {
	Off, Len int64
}

// Plan is which blocks of the disk are uploaded.
type Plan struct {
	// Size is the disk's size in bytes; VolumeGiB the snapshot's size,
	// Size rounded up to whole GiB.
	Size      int64
	VolumeGiB int64
	// Blocks is how many 512 KiB blocks cover Size.
	Blocks int64
	// Send are the indexes of the blocks that hold any data, ascending:
	// every block with a byte outside a hole, written zeros included.
	Send []int32
}

// Skipped is how many blocks are holes from start to end, never sent.
func (p Plan) Skipped() int64 { return p.Blocks - int64(len(p.Send)) }

// SendBytes is how many bytes the upload sends.
func (p Plan) SendBytes() int64 { return int64(len(p.Send)) * BlockSize }

// NewPlan plans the upload of a disk of size bytes whose data lies in
// extents (from the file's SEEK_DATA/SEEK_HOLE map). Only blocks wholly
// inside holes are skipped: an absent block of a snapshot reads back as
// zeros only on an unencrypted volume (coldsnap #395, #470), so a block of
// written zeros is sent like any other.
func NewPlan(size int64, extents []Extent) (Plan, error) {
	if size <= 0 {
		return Plan{}, fmt.Errorf("the disk is %d bytes", size)
	}
	p := Plan{Size: size, VolumeGiB: (size + gib - 1) / gib, Blocks: (size + BlockSize - 1) / BlockSize}
	if p.VolumeGiB > 64<<10 {
		return Plan{}, fmt.Errorf("the disk is %d GiB; an EBS snapshot is at most 64 TiB", p.VolumeGiB)
	}
	next, end := int64(0), int64(0) // the first block not yet planned; the last extent's end
	for _, e := range extents {
		if e.Len <= 0 {
			continue
		}
		if e.Off < end || e.Off+e.Len > size {
			return Plan{}, fmt.Errorf("data extent %d+%d overlaps the one before (ending at %d) or is outside the %d-byte disk", e.Off, e.Len, end, size)
		}
		end = e.Off + e.Len
		for i := max(e.Off/BlockSize, next); i <= (end-1)/BlockSize; i++ {
			p.Send = append(p.Send, int32(i))
		}
		next = (end-1)/BlockSize + 1
	}
	return p, nil
}

// Image is a disk image to publish, as its manifest describes it.
type Image struct {
	// ManifestPath and DiskPath are the files; the disk sits beside the manifest.
	ManifestPath, DiskPath string
	Version                string
	// Arch is Go's name (amd64, arm64).
	Arch   string
	Size   int64
	SHA256 string
	// SignerCertSHA256 is the fingerprint of the db certificate the disk's
	// boot chain is signed with; empty for an unsigned disk.
	SignerCertSHA256 string
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseManifest reads what publishing needs from manifest.json (written by
// image/cmd/mkimage): the version, the architecture and the disk's name,
// size and sha256. path names the manifest in errors.
func ParseManifest(data []byte, path string) (Image, error) {
	m, err := manifest.Parse(data)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", path, err)
	}
	if m.Disk == nil {
		return Image{}, fmt.Errorf("%s records no disk (built by `make image`, not `make disk`): run make disk first", path)
	}
	d := m.Disk
	switch {
	case d.Path == "" || d.Path != filepath.Base(d.Path) || d.Path == "." || d.Path == "..":
		return Image{}, fmt.Errorf("%s: disk.path %q is not a file name beside the manifest", path, d.Path)
	case !hexSHA256.MatchString(d.SHA256):
		return Image{}, fmt.Errorf("%s: disk.sha256 %q is not a lower-case hex SHA-256", path, d.SHA256)
	case d.Size <= 0:
		return Image{}, fmt.Errorf("%s: disk.size %d is not a size", path, d.Size)
	case m.BerthVersion == "":
		return Image{}, fmt.Errorf("%s: berthVersion is empty", path)
	}
	arch := m.Arch
	if arch == "" {
		arch = manifest.LegacyArch
	}
	if _, err := EC2Architecture(arch); err != nil {
		return Image{}, fmt.Errorf("%s: arch: %w", path, err)
	}
	im := Image{ManifestPath: path, DiskPath: filepath.Join(filepath.Dir(path), d.Path), Version: m.BerthVersion, Arch: arch, Size: d.Size, SHA256: d.SHA256}
	if d.SignedBy != nil {
		im.SignerCertSHA256 = d.SignedBy.CertSHA256
	}
	return im, nil
}

// EC2Architecture maps Go's architecture name to EC2's.
func EC2Architecture(goarch string) (ec2types.ArchitectureValues, error) {
	switch goarch {
	case "amd64":
		return ec2types.ArchitectureValuesX8664, nil
	case "arm64":
		return ec2types.ArchitectureValuesArm64, nil
	}
	return "", fmt.Errorf("architecture %q: berth builds amd64 or arm64", goarch)
}

// nameUnsafe is every character an AMI name may not hold.
var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9().\-/_ ]`)

// AMIName is the image's name: berth-<version>-<arch>-<first 8 of the
// disk's sha256>. Names are unique per account and region; the digest
// keeps two builds of one version apart, and a retry of the same disk
// finds the AMI it registered. Characters EC2 refuses become '-'.
func AMIName(img Image) string {
	arch, _ := EC2Architecture(img.Arch)
	v := nameUnsafe.ReplaceAllString(img.Version, "-")
	suffix := "-" + string(arch) + "-" + img.SHA256[:8]
	if max := 128 - len("berth-") - len(suffix); len(v) > max {
		v = v[:max]
	}
	return "berth-" + v + suffix
}

// Description is the snapshot's and the AMI's description.
func Description(img Image) string {
	arch, _ := EC2Architecture(img.Arch)
	d := fmt.Sprintf("berth %s (%s), disk sha256 %s", img.Version, arch, img.SHA256)
	if len(d) > 255 {
		d = d[:255]
	}
	return d
}

// ClientToken makes StartSnapshot idempotent across retried publishes of
// one disk: it is derived from the disk's sha256 and every other
// StartSnapshot parameter, since EBS refuses a token reused with a
// different request.
func ClientToken(img Image, p Plan, timeoutMinutes int32) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("berth publish\n%s\n%d\n%d\n%s", img.SHA256, p.VolumeGiB, timeoutMinutes, Description(img))))
	return "berth-" + hex.EncodeToString(h[:16])
}

// StartInput is StartSnapshot's request.
func StartInput(img Image, p Plan, timeoutMinutes int32) *ebs.StartSnapshotInput {
	return &ebs.StartSnapshotInput{
		VolumeSize:  aws.Int64(p.VolumeGiB),
		Timeout:     aws.Int32(timeoutMinutes),
		ClientToken: aws.String(ClientToken(img, p, timeoutMinutes)),
		Description: aws.String(Description(img)),
		Tags: []ebstypes.Tag{
			{Key: aws.String("Name"), Value: aws.String(AMIName(img))},
			{Key: aws.String("berth:version"), Value: aws.String(img.Version)},
			{Key: aws.String("berth:disk-sha256"), Value: aws.String(img.SHA256)},
		},
	}
}

// RegisterInput is RegisterImage's request for the snapshot; uefiData is
// the base64 text of EC2's UEFI variable store, empty for none.
func RegisterInput(img Image, snapshotID, uefiData string) *ec2.RegisterImageInput {
	arch, _ := EC2Architecture(img.Arch)
	in := &ec2.RegisterImageInput{
		Name:               aws.String(AMIName(img)),
		Description:        aws.String(Description(img)),
		Architecture:       arch,
		BootMode:           ec2types.BootModeValuesUefi,
		EnaSupport:         aws.Bool(true),
		TpmSupport:         ec2types.TpmSupportValuesV20,
		ImdsSupport:        ec2types.ImdsSupportValuesV20,
		RootDeviceName:     aws.String(RootDevice),
		VirtualizationType: aws.String("hvm"),
		BlockDeviceMappings: []ec2types.BlockDeviceMapping{{
			DeviceName: aws.String(RootDevice),
			Ebs: &ec2types.EbsBlockDevice{
				SnapshotId:          aws.String(snapshotID),
				VolumeType:          ec2types.VolumeTypeGp3,
				DeleteOnTermination: aws.Bool(true),
			},
		}},
	}
	if uefiData != "" {
		in.UefiData = aws.String(uefiData)
	}
	return in
}

// ErrNoDisk says the image directory has no disk to publish.
var ErrNoDisk = errors.New("run make disk first")
