// Package sources decides where a node's user data comes from, in this
// order (issue 47):
//
//  1. EC2's instance metadata (IMDS), when the machine is an EC2 instance
//     by its DMI tables (config/platform), or when that cannot be told
//     (as before berth read DMI), or when berth.imds=URL forces it;
//  2. a NoCloud seed: one block device holding a vfat or iso9660
//     filesystem labelled cidata or CIDATA;
//  3. berth.userdata=URL|PATH on the kernel command line;
//  4. none: the node has only the config baked into the image
//     (/etc/berth/config.d) and berth.config= files, which are read on
//     every node, user data merged over them.
//
// Decide is pure: it takes what the caller found (the DMI verdict, the
// block devices' labels, the command line) and returns the source with
// one Entry per source, each saying why it was or was not used, for
// boot.json. A machine that is not EC2 never reaches IMDS, so it spends
// no time waiting for an endpoint that is not there.
package sources

import (
	"fmt"
	"strings"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/mounts/sigprobe"
)

// Kind is a source of user data.
type Kind string

// The sources, in the order they are tried.
const (
	IMDS  Kind = "imds"
	Seed  Kind = "nocloud"
	URL   Kind = "userdata-url"
	Image Kind = "image"
)

// Volume is a block device whose filesystem label marks a seed, as the
// caller's scan found it.
type Volume struct {
	// Device is its path, like /dev/vdb or /dev/sr0.
	Device string `json:"device"`
	// FS is the filesystem sigprobe found: vfat or iso9660 for a seed.
	FS    sigprobe.Kind `json:"fs"`
	Label string        `json:"label"`
}

// Scan is what the caller's look at the block devices found.
type Scan struct {
	// Devices is how many block devices were read.
	Devices int
	// Labelled are the devices labelled cidata in any case, of any
	// filesystem: Decide takes only vfat and iso9660 labelled cidata or
	// CIDATA, as cloud-init's NoCloud does, and says why it passed over
	// the others.
	Labelled []Volume
	// Unreadable are the devices that could not be read, each with why.
	Unreadable []string
}

// Inputs is what Decide decides from.
type Inputs struct {
	// EC2 is config/platform's verdict from DMI.
	EC2 platform.EC2
	// IMDS is berth.imds= (imds.ParseOverride).
	IMDS imds.Override
	// Seeds is the scan for a seed; nil when none was made yet.
	Seeds *Scan
	// UserData is berth.userdata='s value; UserDataSet says the key was
	// given.
	UserData    string
	UserDataSet bool
}

// Entry is one source and why it was or was not used.
type Entry struct {
	Source Kind `json:"source"`
	Used   bool `json:"used"`
	// Where is the endpoint, device or URL, when there is one.
	Where string `json:"where,omitempty"`
	Why   string `json:"why"`
}

// Decision is Decide's answer.
type Decision struct {
	// Use is the source of user data: IMDS, Seed, URL, or Image when
	// there is none but the image's. Empty when NeedScan.
	Use Kind `json:"use,omitempty"`
	// NeedScan says IMDS is not the source and the block devices must
	// be scanned for a seed (Inputs.Seeds) before Decide can go on.
	NeedScan bool `json:"-"`
	// Seed is the seed's volume when Use is Seed.
	Seed Volume `json:"-"`
	// URL is berth.userdata= when Use is URL.
	URL userdataurl.Location `json:"-"`
	// Entries are every source, in order.
	Entries []Entry `json:"entries"`
}

// ImageWhy is the image's entry when user data comes from elsewhere.
const ImageWhy = "always read: the image's /etc/berth/config.d and berth.config= files, user data merged over them"

// Decide picks the source. The error is for what the node must not guess
// at: two seeds, or a berth.userdata= that is not a URL or path when it
// would be the source; the entries so far come with it.
func Decide(in Inputs) (Decision, error) {
	var d Decision
	add := func(k Kind, used bool, where, why string, args ...any) {
		d.Entries = append(d.Entries, Entry{Source: k, Used: used, Where: where, Why: fmt.Sprintf(why, args...)})
	}
	rest := func(why string) {
		add(Seed, false, "", "not looked for: %s", why)
		if in.UserDataSet {
			add(URL, false, in.UserData, "not read: %s", why)
		}
		add(Image, true, "", ImageWhy)
	}

	ov := in.IMDS
	switch {
	case ov.Off:
		add(IMDS, false, "", "berth.imds=off")
	case ov.Endpoint != "":
		add(IMDS, true, ov.Endpoint, "berth.imds= names it, whatever DMI says (%s: %s)", in.EC2.Verdict, in.EC2.Reason)
	case in.EC2.Verdict == platform.Yes:
		add(IMDS, true, "", "an EC2 instance: %s", in.EC2.Reason)
	case in.EC2.Verdict == platform.No:
		add(IMDS, false, "", "not an EC2 instance: %s", in.EC2.Reason)
	default:
		add(IMDS, true, "", "could not tell whether this is an EC2 instance (%s), so IMDS is tried as on EC2", in.EC2.Reason)
	}
	if d.Entries[0].Used {
		d.Use = IMDS
		rest("IMDS is the source")
		return d, nil
	}

	if in.Seeds == nil {
		d.Entries = nil
		d.NeedScan = true
		return d, nil
	}
	var seeds []Volume
	var passed []string
	for _, v := range in.Seeds.Labelled {
		if !nocloud.IsSeedLabel(v.Label) {
			passed = append(passed, fmt.Sprintf("%s (labelled %s: a seed is labelled cidata or CIDATA, as cloud-init looks for it)", v.Device, v.Label))
			continue
		}
		if v.FS != sigprobe.VFAT && v.FS != sigprobe.ISO9660 {
			passed = append(passed, fmt.Sprintf("%s (%s labelled %s: a seed is vfat or iso9660)", v.Device, v.FS, v.Label))
			continue
		}
		seeds = append(seeds, v)
	}
	switch len(seeds) {
	case 0:
		why := fmt.Sprintf("no vfat or iso9660 volume labelled cidata among %d block device(s)", in.Seeds.Devices)
		if len(passed) > 0 {
			why += "; passed over " + strings.Join(passed, ", ")
		}
		if len(in.Seeds.Unreadable) > 0 {
			why += "; could not read " + strings.Join(in.Seeds.Unreadable, ", ")
		}
		add(Seed, false, "", "%s", why)
	case 1:
		v := seeds[0]
		d.Use, d.Seed = Seed, v
		add(Seed, true, v.Device, "%s labelled %s", v.FS, v.Label)
		if in.UserDataSet {
			add(URL, false, in.UserData, "not read: the NoCloud seed is the source")
		}
		add(Image, true, "", ImageWhy)
		return d, nil
	default:
		devs := make([]string, len(seeds))
		for i, v := range seeds {
			devs[i] = fmt.Sprintf("%s (%s labelled %s)", v.Device, v.FS, v.Label)
		}
		add(Seed, false, "", "%d seeds", len(seeds))
		return d, fmt.Errorf("%d NoCloud seeds: %s; berth will not guess which is this node's: detach all but one", len(seeds), strings.Join(devs, ", "))
	}

	if in.UserDataSet {
		loc, err := userdataurl.Parse(in.UserData)
		if err != nil {
			add(URL, false, "", "%v", err)
			return d, err
		}
		d.Use, d.URL = URL, loc
		add(URL, true, loc.Where, "%s=, no seed", userdataurl.CmdlineKey)
		add(Image, true, "", ImageWhy)
		return d, nil
	}
	add(URL, false, "", "no %s= on the kernel command line", userdataurl.CmdlineKey)
	d.Use = Image
	add(Image, true, "", "the only source: the image's /etc/berth/config.d and berth.config= files")
	return d, nil
}
