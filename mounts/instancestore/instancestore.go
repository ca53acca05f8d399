// Package instancestore finds the EC2 instance-store NVMe disks berth may
// claim. Discovery is a pure function of a sysfs tree and a mountinfo text,
// so it is tested against fixture trees of real instance layouts.
//
// A namespace block device /sys/block/nvmeXnY is a candidate when the model
// and serial of its controller (read through its "device" link, which points
// at the controller, or at the nvme-subsystem when the kernel does native
// NVMe multipath; both carry model and serial) match the configured globs.
// EBS volumes never match the default matcher, and any disk that holds a
// mounted filesystem or has holders (the boot disk, a disk already in use)
// is skipped with the reason.
package instancestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ConfigPath is where the image carries the storage matcher, when it wants
// one other than EC2's (QEMU tests, other clouds).
const ConfigPath = "/etc/berth/storage.json"

// EC2Model is the NVMe model string of every EC2 instance-store volume.
const EC2Model = "Amazon EC2 NVMe Instance Storage"

// EBSModel is the model of EBS volumes, which berth never claims.
const EBSModel = "Amazon Elastic Block Store"

// Config is the image's storage config file, /etc/berth/storage.json:
//
//	{"match": {"models": ["QEMU NVMe Ctrl"], "serials": ["berth-is-*"]},
//	 "filesystem": "xfs", "fatal": false, "force": false}
//
// The policy fields live here rather than in the NodeConfig because nodeadm
// has no such fields: they are the image builder's decisions.
type Config struct {
	Match Matcher `json:"match"`
	// Filesystem is xfs (default) or ext4.
	Filesystem string `json:"filesystem,omitempty"`
	// Fatal makes a storage failure stop the boot (berth.onfail applies);
	// by default the node goes on with its state on the root disk.
	Fatal bool `json:"fatal,omitempty"`
	// Force claims matched disks holding data berth did not write,
	// destroying it.
	Force bool `json:"force,omitempty"`
}

// Matcher selects instance-store disks by their controller's model and
// serial, each a list of path.Match globs. A disk matches when its model
// matches one of Models and (if Serials is not empty) its serial matches
// one of Serials. Values are compared after trimming the NVMe space padding.
type Matcher struct {
	Models  []string `json:"models,omitempty"`
	Serials []string `json:"serials,omitempty"`
}

// DefaultMatcher matches EC2 instance store and nothing else.
func DefaultMatcher() Matcher { return Matcher{Models: []string{EC2Model}} }

// ParseConfig decodes the storage config; missing fields keep the defaults.
// Unknown fields are an error, so a typo does not silently match nothing.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("decoding storage config: %w", err)
	}
	if len(c.Match.Models) == 0 {
		c.Match.Models = DefaultMatcher().Models
	}
	switch c.Filesystem {
	case "", "xfs", "ext4":
	default:
		return Config{}, fmt.Errorf("storage config: filesystem %q: want xfs or ext4", c.Filesystem)
	}
	for i, g := range c.Match.Models {
		if _, err := path.Match(g, ""); err != nil {
			return Config{}, fmt.Errorf("storage config: match.models[%d] %q: %w", i, g, err)
		}
	}
	for i, g := range c.Match.Serials {
		if _, err := path.Match(g, ""); err != nil {
			return Config{}, fmt.Errorf("storage config: match.serials[%d] %q: %w", i, g, err)
		}
	}
	return c, nil
}

// LoadConfig reads the storage config at p; a missing file gives the EC2
// defaults.
func LoadConfig(p string) (Config, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{Match: DefaultMatcher()}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("reading storage config %s: %w", p, err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// Match reports whether a model/serial pair is selected.
func (m Matcher) Match(model, serial string) bool {
	return anyGlob(m.Models, model) && (len(m.Serials) == 0 || anyGlob(m.Serials, serial))
}

func anyGlob(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

// Disk is one instance-store namespace.
type Disk struct {
	Name      string `json:"name"` // kernel name, nvme1n1
	Path      string `json:"path"` // /dev/nvme1n1
	Dev       string `json:"dev"`  // major:minor
	Model     string `json:"model"`
	Serial    string `json:"serial"`
	SizeBytes int64  `json:"sizeBytes"`
}

// Skipped is a namespace seen but not claimed, and why.
type Skipped struct {
	Name   string `json:"name"`
	Model  string `json:"model,omitempty"`
	Serial string `json:"serial,omitempty"`
	Reason string `json:"reason"`
}

var nsName = regexp.MustCompile(`^nvme[0-9]+n[0-9]+$`)

// Discover lists the NVMe namespaces under sysRoot (normally /sys) and
// returns those m selects and that are not in inUse (disk names, see
// InUseDisks), sorted by serial so that array member order, and so the
// array identity, do not depend on PCI enumeration order. Every other
// namespace comes back in skipped with the reason (EBS, not matched, in
// use...), for the boot report.
func Discover(sysRoot string, m Matcher, inUse map[string]bool) (disks []Disk, skipped []Skipped, err error) {
	ents, err := os.ReadDir(filepath.Join(sysRoot, "block"))
	if err != nil {
		return nil, nil, fmt.Errorf("listing block devices in %s: %w", filepath.Join(sysRoot, "block"), err)
	}
	for _, e := range ents {
		name := e.Name()
		if !nsName.MatchString(name) {
			continue
		}
		dir := filepath.Join(sysRoot, "block", name)
		model, err1 := readTrim(filepath.Join(dir, "device", "model"))
		serial, err2 := readTrim(filepath.Join(dir, "device", "serial"))
		if err := errors.Join(err1, err2); err != nil {
			// A namespace vanishing mid-scan is not fatal to the others.
			skipped = append(skipped, Skipped{Name: name, Reason: fmt.Sprintf("reading controller identity: %v", err)})
			continue
		}
		if model == EBSModel {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: "EBS volume: never claimed"})
			continue
		}
		if !m.Match(model, serial) {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: "model/serial not selected by the storage matcher"})
			continue
		}
		if inUse[name] {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: "in use: holds a mounted filesystem or is held by another device"})
			continue
		}
		sectors, err := readInt(filepath.Join(dir, "size"))
		if err != nil {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: fmt.Sprintf("reading size: %v", err)})
			continue
		}
		if sectors == 0 {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: "size is 0 (namespace not ready or detached)"})
			continue
		}
		dev, err := readTrim(filepath.Join(dir, "dev"))
		if err != nil {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: fmt.Sprintf("reading dev: %v", err)})
			continue
		}
		if holders, _ := os.ReadDir(filepath.Join(dir, "holders")); len(holders) > 0 {
			skipped = append(skipped, Skipped{Name: name, Model: model, Serial: serial, Reason: fmt.Sprintf("in use: held by %s", holders[0].Name())})
			continue
		}
		disks = append(disks, Disk{Name: name, Path: "/dev/" + name, Dev: dev, Model: model, Serial: serial, SizeBytes: sectors * 512})
	}
	sort.Slice(disks, func(i, j int) bool {
		if disks[i].Serial != disks[j].Serial {
			return disks[i].Serial < disks[j].Serial
		}
		return disks[i].Name < disks[j].Name
	})
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Name < skipped[j].Name })
	return disks, skipped, nil
}

// InUseDisks returns the names of the whole disks under every mounted
// block device in mountinfo (the text of /proc/self/mountinfo), found by
// resolving /sys/dev/block/MAJ:MIN to its disk, and through device-mapper
// "slaves" down to the disks under a dm device (a verity root, say). This
// is how the boot disk is kept out whatever its model.
func InUseDisks(sysRoot string, mountinfo []byte) (map[string]bool, error) {
	inUse := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		majmin := f[2]
		maj, _, ok := strings.Cut(majmin, ":")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %d: bad major:minor %q", line, majmin)
		}
		if maj == "0" { // pseudo filesystems
			continue
		}
		markDisks(sysRoot, filepath.Join(sysRoot, "dev", "block", majmin), inUse, 0)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return inUse, nil
}

func markDisks(sysRoot, devDir string, inUse map[string]bool, depth int) {
	if depth > 8 {
		return
	}
	real, err := filepath.EvalSymlinks(devDir)
	if err != nil {
		return // not a block device sysfs knows (nfs, overlay over a removed dev)
	}
	if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
		real = filepath.Dir(real)
	}
	inUse[filepath.Base(real)] = true
	slaves, _ := os.ReadDir(filepath.Join(real, "slaves"))
	for _, s := range slaves {
		markDisks(sysRoot, filepath.Join(real, "slaves", s.Name()), inUse, depth+1)
	}
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(p string) (int64, error) {
	s, err := readTrim(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return n, nil
}
