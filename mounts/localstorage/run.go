package localstorage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts/instancestore"
	"github.com/berth-node/berth/mounts/mkfs"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/sigprobe"
)

// Env is where the phase finds the machine, so tests can point it at
// fixtures and loop devices.
type Env struct {
	SysRoot   string // /sys
	DevRoot   string // /dev
	MountInfo string // /proc/self/mountinfo
	DMControl string // /dev/mapper/control
	// Root prefixes mount points and bind targets ("" on a node).
	Root string
	// Tools maps tool names (mkfs.xfs, mkfs.ext4) to paths: the image
	// manifest's Tools.
	Tools map[string]string
	// Discover, when set, replaces sysfs discovery (host tests hand in
	// loop devices, which have no NVMe model).
	Discover func() ([]instancestore.Disk, []instancestore.Skipped, error)
	// Timeout bounds the whole phase; 0 means DefaultTimeout.
	Timeout time.Duration
	// Run runs a tool and returns its combined output. Under PID 1 it must
	// go through the reaper (reaper.CombinedOutput): os/exec's own Wait
	// would race PID 1's wait4(-1) loop and lose mkfs's exit status. Nil
	// means os/exec, for tests that are not PID 1.
	Run func(ctx context.Context, cmd *exec.Cmd) ([]byte, error)
}

// DefaultTimeout bounds the phase. mkfs.xfs without discard takes well
// under a second per TB; the rest is ioctls.
const DefaultTimeout = 3 * time.Minute

// DefaultEnv is the real machine.
func DefaultEnv(tools map[string]string) Env {
	return Env{SysRoot: "/sys", DevRoot: "/dev", MountInfo: "/proc/self/mountinfo", DMControl: raid.ControlPath, Tools: tools}
}

// ArrayName is the device-mapper name of berth's array.
const ArrayName = "berth-is"

// Run is the instance-store phase. It always returns a Result for the
// boot report. The error is non-nil only when the phase failed and
// opts.Fatal says the boot must stop; otherwise a failure is logged,
// recorded in the Result with Fallback "root disk", anything mounted is
// unmounted again, and the node goes on with the root disk.
func Run(ctx context.Context, log *slog.Logger, opts Options, env Env) (*Result, error) {
	res := &Result{Strategy: string(opts.Strategy), Status: StatusSkipped, Steps: []StepDuration{}}
	timeout := env.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := &runner{log: log, env: env, res: res}
	err := r.run(ctx, opts)
	if err == nil {
		return res, nil
	}
	r.undo()
	res.Status, res.Error = StatusFailed, err.Error()
	if opts.Fatal {
		log.Error("instance-store storage failed; localStorage policy is fatal", "step", res.Step, "err", err)
		return res, fmt.Errorf("instance-store storage, step %s: %w", res.Step, err)
	}
	res.Fallback = "root disk"
	log.Error("instance-store storage failed; containerd and kubelet stay on the root disk", "step", res.Step, "err", err)
	return res, nil
}

type runner struct {
	log     *slog.Logger
	env     Env
	res     *Result
	mounted []string // to unmount, in order, if a later step fails
}

func (r *runner) fail(step string, err error) error {
	r.res.Step = step
	return err
}

func (r *runner) run(ctx context.Context, opts Options) error {
	res := r.res
	o, err := opts.withDefaults()
	if err != nil {
		return r.fail("config", err)
	}
	if o.Strategy == StrategyNone {
		res.Reason = "spec.instance.localStorage.strategy is not set"
		return nil
	}

	t := time.Now()
	disks, skipped, err := r.discover(o.Match)
	res.step("discover", t)
	res.Skipped = skipped
	if err != nil {
		return r.fail("discover", err)
	}
	if len(disks) == 0 {
		res.Reason = fmt.Sprintf("no instance-store disks found (models %q, serials %q)", o.Match.Models, o.Match.Serials)
		r.log.Info("instance-store: no disks, phase skipped", "reason", res.Reason)
		return nil
	}

	t = time.Now()
	states := make([]DiskState, len(disks))
	for i, d := range disks {
		st, err := probeDisk(d)
		if err != nil {
			res.step("probe", t)
			return r.fail("probe", err)
		}
		states[i] = st
		found := string(st.Found.Kind)
		if st.Mark != nil {
			found = "berth " + st.Mark.Name()[len(partition.NamePrefix)+1:]
		}
		res.Disks = append(res.Disks, DiskReport{Disk: d, Found: found})
	}
	res.step("probe", t)

	dec, err := Decide(o, states)
	if err != nil {
		return r.fail("plan", err)
	}
	res.Reclaimed = dec.Reclaimed

	t = time.Now()
	parts := make([]partInfo, len(dec.Members))
	for i, m := range dec.Members {
		if dec.Create {
			if err := writeTable(m); err != nil {
				res.step("partition", t)
				return r.fail("partition", err)
			}
			res.Disks[i].Partitioned = true
		}
		p, err := r.partitionOf(ctx, m.Disk, dec.Create)
		if err != nil {
			res.step("partition", t)
			return r.fail("partition", err)
		}
		parts[i] = p
		res.Disks[i].Partition = p.path
	}
	res.step("partition", t)

	t = time.Now()
	var arrayDev string
	if dec.Level != "" {
		spec := raid.Spec{Name: ArrayName, UUID: "BERTH-IS-" + dec.ArrayID.String(), Level: dec.Level}
		for _, p := range parts {
			spec.Members = append(spec.Members, raid.Member{Dev: p.dev, Sectors: p.sectors})
		}
		dev, err := raid.Assemble(ctx, r.env.DMControl, spec)
		if err != nil {
			res.step("array", t)
			return r.fail("array", err)
		}
		arrayDev, err = ensureNode(ctx, r.env.DevRoot, "dm-"+strconv.Itoa(int(dev.Minor)), dev.Dev())
		if err != nil {
			res.step("array", t)
			return r.fail("array", err)
		}
		a := &ArrayReport{Name: ArrayName, Device: arrayDev, Level: string(dec.Level), ID: dec.ArrayID.String(),
			ChunkKiB: raid.ChunkSectors / 2, SizeBytes: int64(dev.Length) * 512, Table: dev.Table}
		for _, p := range parts {
			a.Members = append(a.Members, p.path)
		}
		res.Array = a
		r.log.Info("instance-store: array assembled", "device", arrayDev, "level", dec.Level, "members", len(parts), "table", dev.Table)
	}
	res.step("array", t)

	t = time.Now()
	fstypes := make([]string, len(dec.Volumes))
	for i, v := range dec.Volumes {
		dev := arrayDev
		if v.Member >= 0 {
			dev = parts[v.Member].path
		}
		sig, err := probePath(dev)
		if err != nil {
			res.step("mkfs", t)
			return r.fail("mkfs", err)
		}
		mkfs, err := FSAction(dec.Create, v, o.Filesystem, sig)
		if err != nil {
			res.step("mkfs", t)
			return r.fail("mkfs", fmt.Errorf("%s: %w", dev, err))
		}
		fstypes[i] = string(sig.Kind)
		if mkfs {
			if err := r.mkfs(ctx, o.Filesystem, MkfsArgs(o.Filesystem, v, dec.Level, len(parts), dev)); err != nil {
				res.step("mkfs", t)
				return r.fail("mkfs", fmt.Errorf("%s: %w", dev, err))
			}
			fstypes[i] = o.Filesystem
		}
		res.Filesystems = append(res.Filesystems, FSReport{Device: dev, Type: fstypes[i], Label: v.Label, UUID: v.UUID, Created: mkfs, Mount: v.Mount, Options: "noatime"})
	}
	res.step("mkfs", t)

	t = time.Now()
	for i, v := range dec.Volumes {
		if err := r.mount(res.Filesystems[i].Device, v.Mount, fstypes[i]); err != nil {
			res.step("mount", t)
			return r.fail("mount", err)
		}
	}
	for _, b := range dec.Binds {
		if err := r.bind(b); err != nil {
			res.step("mount", t)
			return r.fail("mount", err)
		}
		res.Binds = append(res.Binds, b)
	}
	res.step("mount", t)
	res.Status = StatusReady
	r.log.Info("instance-store ready", "strategy", o.Strategy, "disks", len(dec.Members), "created", dec.Create, "mount", dec.Volumes[0].Mount)
	return nil
}

func (r *runner) discover(m instancestore.Matcher) ([]instancestore.Disk, []instancestore.Skipped, error) {
	if r.env.Discover != nil {
		return r.env.Discover()
	}
	mi, err := os.ReadFile(r.env.MountInfo)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s to keep the boot disk out: %w", r.env.MountInfo, err)
	}
	inUse, err := instancestore.InUseDisks(r.env.SysRoot, mi)
	if err != nil {
		return nil, nil, err
	}
	return instancestore.Discover(r.env.SysRoot, m, inUse)
}

// probeDisk reads what a disk holds: berth's GPT mark, or a signature.
func probeDisk(d instancestore.Disk) (DiskState, error) {
	f, err := os.Open(d.Path)
	if err != nil {
		return DiskState{}, fmt.Errorf("disk %s (serial %s) vanished or cannot be opened: %w", d.Path, d.Serial, err)
	}
	defer f.Close()
	st := DiskState{Disk: d}
	if m, _, err := partition.Read(f); err == nil {
		st.Mark = &m
		return st, nil
	}
	head, err := readHead(f)
	if err != nil {
		return DiskState{}, fmt.Errorf("reading the start of disk %s: %w", d.Path, err)
	}
	st.Found = sigprobe.Probe(head)
	return st, nil
}

func probePath(p string) (sigprobe.Signature, error) {
	f, err := os.Open(p)
	if err != nil {
		return sigprobe.Signature{}, fmt.Errorf("opening %s: %w", p, err)
	}
	defer f.Close()
	head, err := readHead(f)
	if err != nil {
		return sigprobe.Signature{}, fmt.Errorf("reading the start of %s: %w", p, err)
	}
	return sigprobe.Probe(head), nil
}

func readHead(f *os.File) ([]byte, error) {
	head := make([]byte, sigprobe.ReadLen)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head[:n], nil
}

// writeTable writes berth's GPT. The exclusive open fails if anything
// (a mount, a dm device) holds the disk, so a disk in use is never written.
func writeTable(m Member) error {
	f, err := os.OpenFile(m.Disk.Path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("opening disk %s for partitioning: %w", m.Disk.Path, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("sizing disk %s: %w", m.Disk.Path, err)
	}
	if _, err := partition.Write(f, size, m.Mark); err != nil {
		return fmt.Errorf("writing GPT to %s: %w", m.Disk.Path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("flushing GPT to %s: %w", m.Disk.Path, err)
	}
	return nil
}

type partInfo struct {
	path    string // /dev/nvme1n1p1
	dev     string // major:minor
	sectors uint64
}

// partitionOf makes the kernel read the new table (BLKRRPART) when it was
// just written, then waits for partition 1 in sysfs and its /dev node.
func (r *runner) partitionOf(ctx context.Context, d instancestore.Disk, reread bool) (partInfo, error) {
	if reread {
		if err := rereadPartitions(ctx, d.Path); err != nil {
			return partInfo{}, err
		}
	}
	dir := filepath.Join(r.env.SysRoot, "block", d.Name)
	// BLKRRPART scans synchronously, so the partition is in sysfs now if
	// the kernel parsed the table. A kernel built without the GPT parser
	// (CONFIG_EFI_PARTITION) parses nothing: then berth tells it where
	// partition 1 is itself, from its own table (BLKPG_ADD_PARTITION).
	if _, ok := findPartition(dir); !ok {
		if err := addPartition(d.Path); err != nil {
			return partInfo{}, err
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, ok := findPartition(dir); ok {
			node, err := ensureNode(ctx, r.env.DevRoot, p.path, p.dev)
			if err != nil {
				return partInfo{}, err
			}
			p.path = node
			return p, nil
		}
		if time.Now().After(deadline) {
			return partInfo{}, fmt.Errorf("disk %s: partition 1 did not appear in %s within 5s of re-reading the table", d.Path, dir)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return partInfo{}, fmt.Errorf("disk %s: waiting for partition 1: %w", d.Path, err)
		}
	}
}

// findPartition returns partition 1 of the disk whose sysfs dir is dir,
// with path holding only its kernel name.
func findPartition(dir string) (partInfo, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return partInfo{}, false
	}
	for _, e := range ents {
		sub := filepath.Join(dir, e.Name())
		if n, err := os.ReadFile(filepath.Join(sub, "partition")); err != nil || strings.TrimSpace(string(n)) != "1" {
			continue
		}
		dev, err1 := os.ReadFile(filepath.Join(sub, "dev"))
		size, err2 := os.ReadFile(filepath.Join(sub, "size"))
		sectors, err3 := strconv.ParseUint(strings.TrimSpace(string(size)), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return partInfo{}, false
		}
		return partInfo{path: e.Name(), dev: strings.TrimSpace(string(dev)), sectors: sectors}, true
	}
	return partInfo{}, false
}

func rereadPartitions(ctx context.Context, disk string) error {
	f, err := os.Open(disk)
	if err != nil {
		return fmt.Errorf("opening %s to re-read its partition table: %w", disk, err)
	}
	defer f.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("re-reading the partition table of %s (BLKRRPART): %w", disk, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func addPartition(disk string) error {
	f, err := os.Open(disk)
	if err != nil {
		return fmt.Errorf("opening %s to add its partition: %w", disk, err)
	}
	defer f.Close()
	_, geo, err := partition.Read(f)
	if err != nil {
		return fmt.Errorf("disk %s: the kernel found no partition 1 and berth cannot read its own table: %w", disk, err)
	}
	// EBUSY: the partition exists already (raced with the kernel's scan).
	if err := partition.AddPartition(f, 1, int64(geo.FirstLBA)*partition.SectorSize, int64(geo.Sectors())*partition.SectorSize); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("adding partition 1 of %s (BLKPG): %w", disk, err)
	}
	return nil
}

// ensureNode returns devRoot/name once it is the block device majmin.
// devtmpfs makes nodes itself; if one has not appeared within 2s (no
// devtmpfs, as in some test roots), berth makes it.
func ensureNode(ctx context.Context, devRoot, name, majmin string) (string, error) {
	p := filepath.Join(devRoot, name)
	var maj, min uint32
	if _, err := fmt.Sscanf(majmin, "%d:%d", &maj, &min); err != nil {
		return "", fmt.Errorf("bad device number %q for %s: %w", majmin, p, err)
	}
	want := unix.Mkdev(maj, min)
	deadline := time.Now().Add(2 * time.Second)
	for {
		var st unix.Stat_t
		err := unix.Stat(p, &st)
		if err == nil {
			if st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != want {
				return "", fmt.Errorf("%s exists but is not block device %s", p, majmin)
			}
			return p, nil
		}
		if time.Now().After(deadline) {
			if err := unix.Mknod(p, unix.S_IFBLK|0o600, int(want)); err != nil && !errors.Is(err, unix.EEXIST) {
				return "", fmt.Errorf("making device node %s (%s): %w", p, majmin, err)
			}
			continue
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return "", fmt.Errorf("waiting for device node %s: %w", p, err)
		}
	}
}

func (r *runner) mkfs(ctx context.Context, fstype string, args []string) error {
	bin, listed := mkfs.Tool(r.env.Tools, fstype)
	if !listed {
		return fmt.Errorf("the image manifest lists no %s tool", "mkfs."+fstype)
	}
	r.log.Info("instance-store: making filesystem", "cmd", append([]string{bin}, args...))
	if err := mkfs.Run(ctx, r.env.Run, bin, args...); err != nil {
		return fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	return nil
}

func (r *runner) mount(dev, mnt, fstype string) error {
	target := filepath.Join(r.env.Root, mnt)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("making mount point %s: %w", target, err)
	}
	if err := unix.Mount(dev, target, fstype, unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("mounting %s (%s) on %s: %w", dev, fstype, target, err)
	}
	r.mounted = append(r.mounted, target)
	return nil
}

func (r *runner) bind(b Bind) error {
	src := filepath.Join(r.env.Root, b.Source)
	dst := filepath.Join(r.env.Root, b.Target)
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("making %s for the bind mount onto %s: %w", d, b.Target, err)
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on %s: %w", src, dst, err)
	}
	r.mounted = append(r.mounted, dst)
	if b.Propagation == "rshared" {
		if err := unix.Mount("", dst, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making %s rshared: %w", dst, err)
		}
	}
	return nil
}

// undo unmounts what this run mounted, newest first, so a failed phase
// leaves containerd and kubelet on the root disk rather than half moved.
func (r *runner) undo() {
	for i := len(r.mounted) - 1; i >= 0; i-- {
		if err := unix.Unmount(r.mounted[i], unix.MNT_DETACH); err != nil {
			r.log.Warn("instance-store: undoing mount", "path", r.mounted[i], "err", err)
		}
	}
	r.mounted = nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
