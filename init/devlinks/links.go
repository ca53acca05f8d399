package devlinks

import (
	"regexp"
	"sort"
	"strings"
)

// Device is one NVMe namespace or partition, as sysfs and the controller
// describe it. The attribute fields hold the raw sysfs text (newline and
// all): the escaping below is udev's, from the same input.
type Device struct {
	// Name is the kernel name: nvme1n1, or nvme1n1p2 for a partition.
	Name string `json:"name"`
	// Model, Serial: the controller's (or NVMe subsystem's) attributes.
	Model  string `json:"-"`
	Serial string `json:"-"`
	// WWID, NSID: the namespace's attributes ("eui.…", "nvme.1d0f-…"; "1").
	WWID string `json:"-"`
	NSID string `json:"-"`
	// EC2Name is the block-device name from the identify data (see
	// Identify.EC2Name), "" when there is none.
	EC2Name string `json:"-"`
}

// Link is one symlink: /dev/<Name> → the device node /dev/<Target>.
type Link struct {
	Name   string `json:"name"`   // relative to /dev: disk/by-id/nvme-…, xvdba
	Target string `json:"target"` // kernel name: nvme1n1p1
}

// nvmeName matches the namespaces and partitions that get links, as the
// rules' KERNEL=="nvme*[0-9]n*[0-9]" does, minus the hidden per-path
// devices of native multipath (nvme0c0n1), which have no /dev node.
var nvmeName = regexp.MustCompile(`^nvme[0-9]+n([0-9]+)(?:p([0-9]+))?$`)

// IsNVMe reports whether a kernel block device name is one devlinks
// handles.
func IsNVMe(name string) bool { return nvmeName.MatchString(name) }

// Links are the links udev's rules would give d, in a fixed order:
//
//	60-persistent-storage.rules (systemd 254+; 249-253 make the first):
//	  disk/by-id/nvme-<model>_<serial>        string_escape=replace
//	  disk/by-id/nvme-<model>_<serial>        unescaped compat form, when it differs and has no '/'
//	  disk/by-id/nvme-<model>_<serial>_<nsid>
//	  disk/by-id/nvme-<wwid>
//	70-ec2-nvme-devices.rules (amazon-ec2-utils):
//	  disk/by-id/nvme-<model>_<serial>-ns-<n>
//	  <ebs name>                               EBS only
//
// with "-part<N>" after each by-id name of a partition (and, for the
// EBS name, N directly: xvdba1). A name udev would turn into a directory
// (a '/' it keeps) is left out.
func Links(d Device) []Link {
	m := nvmeName.FindStringSubmatch(d.Name)
	if m == nil {
		return nil
	}
	nsNum, partNum := m[1], m[2]
	part := ""
	if partNum != "" {
		part = "-part" + partNum
	}
	var out []Link
	seen := map[string]bool{}
	add := func(name string) {
		if name == "" || seen[name] || strings.Contains(name[len("disk/by-id/"):], "/") {
			return
		}
		seen[name] = true
		out = append(out, Link{Name: name, Target: d.Name})
	}
	model, serial := attrValue(d.Model), attrValue(d.Serial)
	if model != "" && serial != "" {
		// OPTIONS="string_escape=replace", ENV{ID_SERIAL}="$env{ID_MODEL}_$env{ID_SERIAL_SHORT}":
		// the ENV assignment replaces every unsafe byte, spaces included.
		add("disk/by-id/nvme-" + replaceChars(model+"_"+serial, "") + part)
		// The compat line: no escape option, so the SYMLINK substitution
		// folds whitespace runs and the result keeps only "/ " besides
		// the devnode set; udev skips it when model or serial has a '/'.
		if !strings.Contains(model, "/") && !strings.Contains(serial, "/") {
			add("disk/by-id/" + replaceChars("nvme-"+replaceWhitespace(model+"_"+serial)+part, "/ "))
		}
		if nsid := attrValue(d.NSID); nsid != "" {
			add("disk/by-id/nvme-" + replaceChars(model+"_"+serial+"_"+nsid, "") + part)
		}
	}
	// A wwid of only whitespace would make udev's bare "nvme-" link.
	if wwid := replaceWhitespace(attrValue(d.WWID)); wwid != "" {
		add("disk/by-id/" + replaceChars("nvme-"+wwid+part, "/ "))
	}
	if model != "" && serial != "" {
		// SYMLINK+="disk/by-id/nvme-$attr{model}_$attr{serial}-ns-%n" with
		// string_escape=replace: each substitution whitespace-folded, the
		// whole kept to the devnode set and '/'.
		ns := "-ns-" + nsNum
		if partNum != "" {
			ns += "-part" + partNum
		}
		add("disk/by-id/" + replaceChars("nvme-"+replaceWhitespace(model)+"_"+replaceWhitespace(serial)+ns, "/"))
	}
	if d.EC2Name != "" {
		name := d.EC2Name + partNum
		if !seen[name] {
			seen[name] = true
			out = append(out, Link{Name: name, Target: d.Name})
		}
	}
	return out
}

// LinkSet is the links of every device, each name once: where two devices
// claim a name (two namespaces of one controller share the model_serial
// link), the one first in kernel-name order keeps it, so the answer does
// not depend on the order devices appeared in. Sorted by name.
func LinkSet(devs []Device) []Link {
	sorted := append([]Device(nil), devs...)
	sort.Slice(sorted, func(i, j int) bool { return nameLess(sorted[i].Name, sorted[j].Name) })
	byName := map[string]Link{}
	for _, d := range sorted {
		for _, l := range Links(d) {
			if _, ok := byName[l.Name]; !ok {
				byName[l.Name] = l
			}
		}
	}
	out := make([]Link, 0, len(byName))
	for _, l := range byName {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// nameLess orders kernel names with their numbers compared as numbers, so
// nvme2n1 comes before nvme10n1.
func nameLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := leadingDigits(a), leadingDigits(b)
		if da != "" && db != "" {
			if len(da) != len(db) {
				return len(da) < len(db)
			}
			if da != db {
				return da < db
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
