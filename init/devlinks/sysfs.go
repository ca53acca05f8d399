package devlinks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IdentifyFunc returns the Identify Controller data of the controller
// behind an NVMe namespace, given the namespace's kernel name and its
// sysfs directory.
type IdentifyFunc func(disk, sysDir string) ([]byte, error)

// Scan lists the NVMe namespaces and partitions under sysfs (normally
// /sys) with the attributes their links are made from. identify is asked
// only for EBS volumes, the only ones whose identify data names a link,
// and only once per namespace per scan. A device that vanishes mid-scan
// is left out; other failures come back joined, and the devices they
// spare are still listed.
func Scan(sysfs string, identify IdentifyFunc) ([]Device, error) {
	dir := filepath.Join(sysfs, "class", "block")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing block devices in %s: %w", dir, err)
	}
	var devs []Device
	var errs []error
	type disk struct {
		d   Device
		err error
	}
	disks := map[string]*disk{}
	for _, e := range ents {
		name := e.Name()
		if !IsNVMe(name) {
			continue
		}
		dname := diskName(name)
		k, ok := disks[dname]
		if !ok {
			d, err := readDisk(filepath.Join(dir, dname), dname, identify)
			k = &disk{d, err}
			disks[dname] = k
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if k.d.Model == "" && k.err != nil {
			continue // vanished while we looked, or unreadable: no links
		}
		dev := k.d
		dev.Name = name
		devs = append(devs, dev)
	}
	sort.Slice(devs, func(i, j int) bool { return nameLess(devs[i].Name, devs[j].Name) })
	return devs, errors.Join(errs...)
}

// readDisk reads one namespace's attributes. Model and serial sit on the
// controller, or on the NVMe subsystem with native multipath; the
// namespace's "device" link points at whichever it is, and both carry
// them.
func readDisk(dir, name string, identify IdentifyFunc) (Device, error) {
	d := Device{Name: name}
	var err error
	if d.Model, err = readAttr(filepath.Join(dir, "device", "model")); err != nil {
		return Device{Name: name}, err
	}
	if d.Serial, err = readAttr(filepath.Join(dir, "device", "serial")); err != nil {
		return Device{Name: name}, err
	}
	// Optional: older kernels and some controllers lack them.
	d.WWID, _ = readAttr(filepath.Join(dir, "wwid"))
	d.NSID, _ = readAttr(filepath.Join(dir, "nsid"))
	if strings.TrimSpace(d.Model) != EBSModel || identify == nil {
		return d, nil
	}
	raw, err := identify(name, dir)
	if err != nil {
		return d, fmt.Errorf("EBS volume %s: reading its identify data: %w", name, err)
	}
	id, err := ParseIdentify(raw)
	if err != nil {
		return d, fmt.Errorf("EBS volume %s: %w", name, err)
	}
	n, ok, err := id.EC2Name()
	if err != nil {
		return d, fmt.Errorf("EBS volume %s: %w", name, err)
	}
	if ok {
		d.EC2Name = n
	}
	return d, nil
}

func readAttr(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return string(b), nil
}
