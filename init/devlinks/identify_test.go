package devlinks

import (
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"
)

// identifyData builds Identify Controller data as a controller returns
// it: space-padded strings, little-endian IDs, and vendor bytes at 3072.
func identifyData(vid, ssvid uint16, serial, model, fw string, vendor []byte) []byte {
	b := make([]byte, IdentifySize)
	binary.LittleEndian.PutUint16(b[0:], vid)
	binary.LittleEndian.PutUint16(b[2:], ssvid)
	pad := func(off, n int, s string) {
		for i := 0; i < n; i++ {
			b[off+i] = ' '
		}
		copy(b[off:off+n], s)
	}
	pad(4, 20, serial)
	pad(24, 40, model)
	pad(64, 8, fw)
	copy(b[3072:], vendor)
	return b
}

// spacePadded is the EBS vendor area: the name, then spaces to 32 bytes.
func spacePadded(s string) []byte {
	b := []byte(s)
	for len(b) < 32 {
		b = append(b, ' ')
	}
	return b
}

var (
	ebsSdf   = identifyData(AmazonVID, AmazonVID, "vol0123456789abcdef0", EBSModel, "1.0", spacePadded("sdf"))
	ebsXvdba = identifyData(AmazonVID, AmazonVID, "vol0fedcba9876543210", EBSModel, "1.0", []byte("/dev/xvdba\x00"))
	// Instance store: Amazon's controller, another model, and no name
	// in a vendor area ebsnvme-id would not read anyway.
	instanceStore = identifyData(AmazonVID, AmazonVID, "AWS1A2B3C4D5E6F7G8H9", "Amazon EC2 NVMe Instance Storage", "0", spacePadded("ephemeral0"))
	// QEMU's emulated controller: Red Hat's vendor ID, zeros after 3072.
	qemuCtrl = identifyData(0x1b36, 0x1af4, "berth-data1", "QEMU NVMe Ctrl", "8.2.2", nil)
)

func TestIdentify(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   []byte
		serial string
		ec2    string
		ok     bool
	}{
		{"EBS sdf", ebsSdf, "vol0123456789abcdef0", "sdf", true},
		{"EBS /dev/xvdba", ebsXvdba, "vol0fedcba9876543210", "xvdba", true},
		{"instance store", instanceStore, "AWS1A2B3C4D5E6F7G8H9", "", false},
		{"QEMU", qemuCtrl, "berth-data1", "", false},
		{"EBS without a name", identifyData(AmazonVID, AmazonVID, "vol1", EBSModel, "1.0", nil), "vol1", "", false},
		{"EBS model, other vendor", identifyData(0x1b36, 0, "vol1", EBSModel, "1.0", spacePadded("sdf")), "vol1", "", false},
	} {
		id, err := ParseIdentify(c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if id.Serial != c.serial {
			t.Errorf("%s: serial %q, want %q", c.name, id.Serial, c.serial)
		}
		name, ok, err := id.EC2Name()
		if err != nil || ok != c.ok || name != c.ec2 {
			t.Errorf("%s: EC2Name = %q, %v, %v; want %q, %v, nil", c.name, name, ok, err, c.ec2, c.ok)
		}
	}
	if _, err := ParseIdentify(ebsSdf[:4000]); err == nil {
		t.Error("short identify data accepted")
	}
	for _, bad := range []string{"/dev/xvd ba", "../sda", "/dev/..", "a/b"} {
		id, _ := ParseIdentify(identifyData(AmazonVID, AmazonVID, "vol1", EBSModel, "1.0", []byte(bad)))
		if name, ok, err := id.EC2Name(); err == nil || ok {
			t.Errorf("EC2Name of %q = %q, %v, %v; want an error", bad, name, ok, err)
		}
	}
}

// TestAdminCmdABI: the ioctl's struct and number match linux/nvme_ioctl.h
// (NVME_IOCTL_ADMIN_CMD is 0xC0484E41, as ebsnvme-id has it).
func TestAdminCmdABI(t *testing.T) {
	if s := unsafe.Sizeof(nvmeAdminCmd{}); s != 72 {
		t.Errorf("sizeof(nvme_admin_cmd) = %d, want 72", s)
	}
	if nvmeIoctlAdminCmd != 0xC0484E41 {
		t.Errorf("NVME_IOCTL_ADMIN_CMD = %#x, want 0xc0484e41", nvmeIoctlAdminCmd)
	}
	if o := unsafe.Offsetof(nvmeAdminCmd{}.Addr); o != 24 {
		t.Errorf("addr at %d, want 24", o)
	}
	if o := unsafe.Offsetof(nvmeAdminCmd{}.Cdw10); o != 40 {
		t.Errorf("cdw10 at %d, want 40", o)
	}
}

// FuzzParseIdentify: identify data comes from a device; whatever it
// holds, parsing does not panic and a name it gives is one /dev name.
func FuzzParseIdentify(f *testing.F) {
	for _, b := range [][]byte{ebsSdf, ebsXvdba, instanceStore, qemuCtrl, nil} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 3072 && len(b) < IdentifySize {
			// Let short inputs reach the vendor area too.
			b = append(b, make([]byte, IdentifySize-len(b))...)
		}
		id, err := ParseIdentify(b)
		if err != nil {
			return
		}
		name, ok, err := id.EC2Name()
		if ok && (err != nil || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/ \t\n\x00")) {
			t.Fatalf("EC2Name = %q from %q", name, id.BDev)
		}
	})
}
