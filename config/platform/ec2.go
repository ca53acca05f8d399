// Package platform tells what machine berth runs on from what the kernel
// shows under /sys, without a network wait: an EC2 instance, where
// instance metadata is worth waiting for, or not. It reads files and
// decides; it mounts nothing and sends nothing.
package platform

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"
)

// Verdict is the answer to "is this an EC2 instance?".
type Verdict string

const (
	// Yes: a file says EC2.
	Yes Verdict = "yes"
	// No: the files were read and none says EC2.
	No Verdict = "no"
	// Unknown: a file that could have said EC2 could not be read, or
	// there are no DMI tables to read. The caller decides as it did
	// before it could tell (berth tries IMDS).
	Unknown Verdict = "unknown"
)

// Files read, relative to the sysfs root.
const (
	FileSysVendor      = "class/dmi/id/sys_vendor"
	FileBoardAssetTag  = "class/dmi/id/board_asset_tag"
	FileBIOSVendor     = "class/dmi/id/bios_vendor"
	FileBIOSVersion    = "class/dmi/id/bios_version"
	FileProductName    = "class/dmi/id/product_name"
	FileProductVersion = "class/dmi/id/product_version"
	FileProductUUID    = "class/dmi/id/product_uuid"
	FileHypervisorUUID = "hypervisor/uuid"
	dirDMI             = "class/dmi/id"
)

// filesRead is how many files DetectEC2 reads.
const filesRead = 8

// maxValue bounds what is read of one file: DMI strings are short.
const maxValue = 256

// Evidence is one file and what it said.
type Evidence struct {
	// File is the path under the sysfs root, like class/dmi/id/sys_vendor.
	File string `json:"file"`
	// Value is the file's content, trimmed; empty when unread.
	Value string `json:"value,omitempty"`
	// Missing says the file does not exist.
	Missing bool `json:"missing,omitempty"`
	// Err is why the file could not be read, when it could not.
	Err string `json:"error,omitempty"`
	// Says is what the value means for the verdict, when it means
	// something: "EC2 (Nitro)", "not EC2", ...
	Says string `json:"says,omitempty"`
}

// EC2 is the answer with how it was reached, for the boot report.
type EC2 struct {
	Verdict Verdict `json:"verdict"`
	// Reason sums the evidence up in a sentence.
	Reason string `json:"reason"`
	// InstanceID is the instance ID from the board asset tag, on Nitro.
	InstanceID string `json:"instanceId,omitempty"`
	// Evidence is every file read, in the order read.
	Evidence []Evidence `json:"evidence"`
}

var instanceID = regexp.MustCompile(`^i-[0-9a-f]{8}([0-9a-f]{9})?$`)

// DetectEC2 decides from the files under sysfs (os.DirFS("/sys") at
// boot) whether the machine is an EC2 instance. It never waits and never
// fails: what it cannot read makes the answer Unknown, never No, because
// a No keeps berth from EC2's instance metadata, which an EC2 instance
// cannot boot without.
//
// EC2 says so in several places, and any one is enough:
//   - Nitro instances (and bare metal) have sys_vendor and bios_vendor
//     "Amazon EC2" and their instance ID as the board asset tag;
//   - Xen instances have /sys/hypervisor/uuid starting with ec2, and
//     bios_version and product_version holding "amazon" (4.11.amazon);
//   - both have a system UUID (product_uuid) starting with ec2, in one
//     byte order or the other, as cloud-init checks. A random UUID starts
//     so one time in 2048, so the UUID counts only on a machine whose
//     sys_vendor is Amazon EC2 or Xen, or unknown.
func DetectEC2(sysfs fs.FS) EC2 {
	// The evidence is filled in through pointers into r.Evidence, so it
	// must never be reallocated: it holds every file read from the start.
	r := EC2{Evidence: make([]Evidence, 0, filesRead)}
	read := func(name string) *Evidence {
		r.Evidence = append(r.Evidence, readEvidence(sysfs, name))
		return &r.Evidence[len(r.Evidence)-1]
	}
	var yes, unread []string
	check := func(e *Evidence, ec2 bool, says string) {
		switch {
		case e.Err != "":
			unread = append(unread, e.File)
		case ec2:
			e.Says = says
			yes = append(yes, fmt.Sprintf("%s is %q", e.File, e.Value))
		}
	}

	_, dmiErr := fs.Stat(sysfs, dirDMI)
	vendor := read(FileSysVendor)
	check(vendor, vendor.Value == "Amazon EC2", "EC2")
	tag := read(FileBoardAssetTag)
	check(tag, instanceID.MatchString(tag.Value), "EC2 (Nitro): the instance ID")
	if tag.Says != "" {
		r.InstanceID = tag.Value
	}
	bios := read(FileBIOSVendor)
	check(bios, bios.Value == "Amazon EC2", "EC2")
	for _, name := range []string{FileBIOSVersion, FileProductVersion} {
		e := read(name)
		check(e, strings.Contains(strings.ToLower(e.Value), "amazon"), "EC2 (Xen)")
	}
	name := read(FileProductName)
	if name.Value != "" && vendor.Value == "Amazon EC2" {
		name.Says = "the instance type"
	}
	hv := read(FileHypervisorUUID)
	check(hv, strings.HasPrefix(strings.ToLower(hv.Value), "ec2"), "EC2 (Xen)")
	uuid := read(FileProductUUID)
	vendorKnown := vendor.Err == "" && !vendor.Missing
	uuidCounts := !vendorKnown || vendor.Value == "Amazon EC2" || vendor.Value == "Xen"
	if uuidCounts {
		check(uuid, ec2UUID(uuid.Value), "EC2")
	}
	switch {
	case vendor.Says != "" || !vendorKnown:
	case vendor.Value == "Xen":
		vendor.Says = "Xen: EC2's older instances are Xen guests; the other files tell"
	default:
		vendor.Says = "not EC2"
	}

	switch {
	case len(yes) > 0:
		r.Verdict, r.Reason = Yes, strings.Join(yes, "; ")
	case len(unread) > 0:
		r.Verdict, r.Reason = Unknown, "could not read "+strings.Join(unread, ", ")+", which could say EC2"
	case dmiErr != nil && hv.Missing:
		r.Verdict = Unknown
		r.Reason = fmt.Sprintf("no DMI tables (%s: %v) and no %s", dirDMI, errText(dmiErr), FileHypervisorUUID)
	case vendor.Missing:
		r.Verdict, r.Reason = Unknown, "DMI has no sys_vendor"
	default:
		r.Verdict, r.Reason = No, fmt.Sprintf("sys_vendor is %q and no file says EC2", vendor.Value)
	}
	return r
}

// readEvidence reads one file, trimmed and bounded.
func readEvidence(sysfs fs.FS, name string) Evidence {
	e := Evidence{File: name}
	f, err := sysfs.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			e.Missing = true
		} else {
			e.Err = errText(err)
		}
		return e
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxValue))
	if err != nil {
		e.Err = errText(err)
		return e
	}
	e.Value = strings.TrimSpace(strings.ToValidUTF8(string(data), "\uFFFD"))
	return e
}

// errText is an error without the path fs puts in it (Evidence names
// the file already).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ec2UUID reports whether a system UUID starts with ec2, as written or
// with its first three fields byte-swapped (SMBIOS stores them
// little-endian, and firmware disagrees on which order to show).
func ec2UUID(u string) bool {
	u = strings.ToLower(u)
	if strings.HasPrefix(u, "ec2") {
		return true
	}
	if len(u) < 8 {
		return false
	}
	b, err := hex.DecodeString(u[:8])
	if err != nil {
		return false
	}
	swapped := hex.EncodeToString([]byte{b[3], b[2], b[1], b[0]})
	return strings.HasPrefix(swapped, "ec2")
}
