package devlinks

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// IdentifySize is the length of the NVMe Identify Controller data
// structure (CNS 01h).
const IdentifySize = 4096

// Offsets in the Identify Controller data (NVMe base specification,
// figure "Identify Controller Data Structure"), and the 32-byte EC2
// block-device name at the start of the vendor-specific area, where
// amazon-ec2-utils' ebsnvme-id reads it.
const (
	offVID      = 0
	offSSVID    = 2
	offSerial   = 4  // SN, 20 bytes, space padded
	offModel    = 24 // MN, 40 bytes, space padded
	offFirmware = 64 // FR, 8 bytes
	offVendor   = 3072
	lenBDev     = 32
)

// AmazonVID is the PCI vendor ID of Amazon's NVMe controllers (EBS and
// instance store).
const AmazonVID = 0x1D0F

// EBSModel is the NVMe model of every EBS volume.
const EBSModel = "Amazon Elastic Block Store"

// Identify is the part of the Identify Controller data devlinks uses.
type Identify struct {
	VID, SSVID              uint16
	Serial, Model, Firmware string
	// BDev is the first 32 bytes of the vendor-specific area up to a NUL,
	// trimmed: on EBS, the block-device name of the volume's mapping
	// ("sdf", "/dev/xvdba").
	BDev string
}

// ParseIdentify decodes Identify Controller data as the controller
// returned it. The strings are cut at a NUL and trimmed of the spaces the
// specification pads them with.
func ParseIdentify(b []byte) (Identify, error) {
	if len(b) < IdentifySize {
		return Identify{}, fmt.Errorf("identify controller data: %d bytes, want %d", len(b), IdentifySize)
	}
	str := func(off, n int) string {
		f := b[off : off+n]
		if i := bytes.IndexByte(f, 0); i >= 0 {
			f = f[:i]
		}
		return strings.TrimSpace(string(f))
	}
	return Identify{
		VID:      binary.LittleEndian.Uint16(b[offVID:]),
		SSVID:    binary.LittleEndian.Uint16(b[offSSVID:]),
		Serial:   str(offSerial, 20),
		Model:    str(offModel, 40),
		Firmware: str(offFirmware, 8),
		BDev:     str(offVendor, lenBDev),
	}, nil
}

// EC2Name is the /dev name amazon-ec2-utils' 70-ec2-nvme-devices.rules
// gives an EBS volume (`ebsnvme-id -u`, then SYMLINK+="%c"): the vendor
// area's block-device name without "/dev/". ok is false for what is no
// EBS controller (ebsnvme-id checks the vendor ID and the model) or has
// no name; err says why a name was refused. udev would split a name with
// spaces into several links and make directories for slashes; berth makes
// one link in /dev or none.
func (id Identify) EC2Name() (name string, ok bool, err error) {
	if id.VID != AmazonVID || id.Model != EBSModel {
		return "", false, nil
	}
	name = strings.TrimPrefix(id.BDev, "/dev/")
	if name == "" {
		return "", false, nil
	}
	esc := replaceChars(name, "/ ")
	if strings.ContainsAny(esc, "/ ") || esc == "." || esc == ".." {
		return "", false, fmt.Errorf("EBS block-device name %q in the identify data is not one /dev name", id.BDev)
	}
	return esc, true, nil
}
