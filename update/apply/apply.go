// Package apply is the node's side of applying an update: it decides
// whether a release the repository offers may go onto this node (Decide,
// pure) and then writes it (Apply): the root image into the root slot the
// node does not run from, checked block by block against the root hash,
// and the UKI onto the ESP with a boot counter, whose rename is the
// commit. The reboot into the new version, and the trial that blesses or
// reverts it (packages trial and esp), are the caller's.
//
// Apply never writes the running slot (it compares the devices, not
// their names) and writes the ESP only through package esp (a temporary
// file, then a rename). Until the rename no UKI on the ESP boots the slot
// it writes (by name, or by a root hash that slot holds), so a cut at any point (power lost, context cancelled, a
// write failing) leaves a machine that boots the running version; after
// it, systemd-boot tries the new one three times and then falls back.
//
// What dm-verity will accept at the next boot is what the new UKI's
// command line says (berth.verity=: root hash, salt, data blocks, hash
// tree position; berth boots from the slot whose tree has that root
// hash), so Apply reads that first: it checks it names the release's root
// hash and the slot image's layout (and the other slot, where an older
// UKI names one with berth.slot=) before writing anything, verifies the
// written slot in user space with those very parameters, and, when it stages the UKI (fetched again,
// whole, its hash checked), refuses to commit one whose command line is
// not the one it checked.
package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/mounts/diskboot"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/esp"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
)

// Fetcher fetches a release's target files, checking each against the
// repository's signed metadata; *repo.Client is one. What it writes to w
// before it returns an error must be thrown away.
type Fetcher interface {
	Fetch(ctx context.Context, rel repo.Release, kind repo.Kind, w io.Writer) error
}

// Request is where Apply writes a plan.
type Request struct {
	// Plan is what Decide accepted.
	Plan Plan
	// Fetcher fetches the release's UKI and root image.
	Fetcher Fetcher
	// Target is the block device of the plan's slot (its partition,
	// berth-root-<slot>); Running the running slot's, which Apply refuses
	// to write by device identity whatever the names.
	Target, Running string
	// ESP is where the EFI System Partition is mounted.
	ESP string
	// Now stamps the result; nil means time.Now.
	Now func() time.Time
	// Verify, when set, checks the written slot at dev against p and
	// returns how many bytes it read: on a node, through the kernel's own
	// dm-verity (a device over the slot with the new UKI's parameters,
	// read whole), which is what the next boot will do, and which under
	// emulation hashes many times faster than Go's sha256 in user space.
	// Nil verifies in user space (verifySlot), block by block.
	Verify func(ctx context.Context, dev string, p verity.Param) (int64, error)
}

// Steps of Apply, in order, as boot.json names them (status.Step.Name).
const (
	// StepTarget: the target is a device apart from the running slot's,
	// not in use, large enough.
	StepTarget = "check-target"
	// StepReadUKI: the new UKI, downloaded whole (its length and hash
	// checked against the signed metadata, nothing kept), and its command
	// line and os-release: they name the target slot, the release's root
	// hash and version, and the root image's layout. A UKI that is
	// corrupt or wrong is refused here, before anything is written.
	StepReadUKI = "read-uki"
	// StepPruneESP: the ESP keeps only the running version's UKI, none of
	// which names the target slot, and has room for the new one.
	StepPruneESP = "prune-esp"
	// StepWriteRoot: the root image streamed into the slot, then fsync.
	StepWriteRoot = "write-root"
	// StepVerifyRoot: the slot read back from the device and checked as
	// dm-verity will, against the root hash.
	StepVerifyRoot = "verify-root"
	// StepStageUKI: the UKI fetched whole onto the ESP as a temporary
	// file, its command line checked again, then renamed to its
	// boot-counted name: the commit.
	StepStageUKI = "stage-uki"
)

// Apply carries out plan: StepTarget, StepReadUKI, StepPruneESP,
// StepWriteRoot, StepVerifyRoot, StepStageUKI, each logged and timed. It
// returns the update's outcome for boot.json, with the error that ended
// it: ResultStaged (the next boot tries the new version; rebooting is the
// caller's), ResultRefused (a *Refusal, or a target whose bytes are not
// the signed ones: nothing that changes what boots was written), or
// ResultFailed. After any error the ESP boots the running version, and
// Apply may run again from the start.
func Apply(ctx context.Context, log *slog.Logger, req Request) (status.LastUpdate, error) {
	r := newRunner(log, req)
	defer r.close()
	return r.run(ctx)
}

// runner holds what Apply's steps share.
type runner struct {
	log  *slog.Logger
	req  Request
	plan Plan
	esp  esp.ESP
	// open opens the target; os.OpenFile but in tests.
	open func(name string, flag int, perm os.FileMode) (*os.File, error)

	f     *os.File
	uki   ukiInfo
	param verity.Param
	out   status.LastUpdate
}

func newRunner(log *slog.Logger, req Request) *runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := req.Plan
	return &runner{
		log: log, req: req, plan: p, open: os.OpenFile,
		esp: esp.ESP{Root: req.ESP, Log: log},
		out: status.LastUpdate{From: p.From, To: p.To, Slot: string(p.Slot)},
	}
}

// step is one step of Apply; do returns how many bytes it moved.
type step struct {
	name string
	do   func(ctx context.Context) (int64, error)
}

func (r *runner) steps() []step {
	return []step{
		{StepTarget, r.checkTarget},
		{StepReadUKI, r.readUKI},
		{StepPruneESP, r.pruneESP},
		{StepWriteRoot, r.writeRoot},
		{StepVerifyRoot, r.verifyRoot},
		{StepStageUKI, r.stageUKI},
	}
}

func (r *runner) run(ctx context.Context) (status.LastUpdate, error) {
	p := r.plan
	r.log.Info("applying update", "from", p.From, "to", p.To, "slot", p.Slot, "target", r.req.Target,
		"root_bytes", p.Root.Bytes, "uki_bytes", p.Release.Targets[repo.KindUKI].Length, "esp", r.req.ESP)
	var err error
	for _, s := range r.steps() {
		if err = r.do(ctx, s); err != nil {
			break
		}
	}
	return r.finish(err)
}

// do runs one step, timed, logged and recorded.
func (r *runner) do(ctx context.Context, s step) error {
	start := time.Now()
	var n int64
	err := ctx.Err()
	if err == nil {
		n, err = s.do(ctx)
	}
	st := status.Step{Name: s.name, Ms: time.Since(start).Milliseconds(), Bytes: n}
	if err != nil {
		err = fmt.Errorf("%s: %w", s.name, err)
		st.Error = err.Error()
		r.log.Error("update step failed", "step", s.name, "ms", st.Ms, "bytes", n, "err", err)
	} else {
		r.log.Info("update step done", "step", s.name, "ms", st.Ms, "bytes", n)
	}
	r.out.Steps = append(r.out.Steps, st)
	return err
}

func (r *runner) finish(err error) (status.LastUpdate, error) {
	now := time.Now
	if r.req.Now != nil {
		now = r.req.Now
	}
	r.out.At = now().UTC()
	var ref *Refusal
	switch {
	case err == nil:
		r.out.Result = status.ResultStaged
		r.log.Info("update staged: the next boot tries it", "from", r.plan.From, "to", r.plan.To, "slot", r.plan.Slot, "entry", r.out.Entry)
		return r.out, nil
	case errors.As(err, &ref), errors.Is(err, repo.ErrCorrupt):
		r.out.Result = status.ResultRefused
	default:
		r.out.Result = status.ResultFailed
	}
	r.out.Reason = err.Error()
	r.log.Error("update not applied; the running version stays", "from", r.plan.From, "to", r.plan.To, "result", r.out.Result, "err", err)
	return r.out, fmt.Errorf("applying update %s → %s into slot %s: %w", r.plan.From, r.plan.To, r.plan.Slot, err)
}

func (r *runner) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// checkTarget opens the target and checks it is not the running slot:
// the same block device (st_rdev) or, for a regular file, the same file
// (device and inode), whatever the paths say. A block device is opened
// with O_EXCL, which the kernel refuses while the device is mounted or
// held by device-mapper, as the running slot is by dm-verity.
func (r *runner) checkTarget(context.Context) (int64, error) {
	p := r.plan
	if p.Slot == p.RunningSlot || p.Slot == "" {
		return 0, refuse(ReasonTarget, "the plan writes slot %q, and the node runs from slot %q", p.Slot, p.RunningSlot)
	}
	if r.req.Running == "" {
		return 0, refuse(ReasonTarget, "the running slot's device is not known, so writing %s could not be told apart from writing it", r.req.Target)
	}
	run, err := os.Stat(r.req.Running)
	if err != nil {
		return 0, refuse(ReasonTarget, "the running slot's device: %v", err)
	}
	st, err := os.Stat(r.req.Target)
	if err != nil {
		return 0, refuse(ReasonTarget, "slot %s's device: %v", p.Slot, err)
	}
	flag := os.O_RDWR
	switch {
	case isBlock(st):
		flag |= os.O_EXCL
	case st.Mode().IsRegular():
	default:
		return 0, refuse(ReasonTarget, "slot %s's device %s is a %s, neither a block device nor a file", p.Slot, r.req.Target, kind(st.Mode()))
	}
	f, err := r.open(r.req.Target, flag, 0)
	if errors.Is(err, unix.EBUSY) {
		return 0, refuse(ReasonTarget, "slot %s's device %s is in use (mounted, or held by device-mapper): it is not an idle slot", p.Slot, r.req.Target)
	}
	if err != nil {
		return 0, fmt.Errorf("opening slot %s's device: %w", p.Slot, err)
	}
	r.f = f
	// The identity of what was opened, not of what the path named before.
	if st, err = f.Stat(); err != nil {
		return 0, fmt.Errorf("slot %s's device %s: %w", p.Slot, r.req.Target, err)
	}
	if same(st, run) {
		return 0, refuse(ReasonTarget, "%s (slot %s) is the running slot's device %s: the running slot is never written", r.req.Target, p.Slot, r.req.Running)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("measuring slot %s's device %s: %w", p.Slot, r.req.Target, err)
	}
	if size < p.Root.Bytes {
		return 0, refuse(ReasonTarget, "slot %s's device %s has %d bytes; the root image needs %d", p.Slot, r.req.Target, size, p.Root.Bytes)
	}
	return 0, nil
}

// kind names a file type in words.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

func isBlock(fi os.FileInfo) bool {
	return fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// same says a and b are one device or one file.
func same(a, b os.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return os.SameFile(a, b)
	}
	if isBlock(a) && isBlock(b) {
		return sa.Rdev == sb.Rdev
	}
	return !isBlock(a) && !isBlock(b) && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// readUKI fetches the new UKI whole, keeping only its .cmdline and
// .osrel sections, and checks them. Whole, not its start only: the
// download checks the repository's hash, so that a corrupt UKI is refused
// before the ESP is pruned or the slot written; it costs one more download
// of the UKI (the root image, too big to hold, is checked as it is
// written). stageUKI fetches it again onto the ESP and checks it carries
// these very sections.
func (r *runner) readUKI(ctx context.Context) (int64, error) {
	sc := newUKIScanner(false)
	if err := r.req.Fetcher.Fetch(ctx, r.plan.Release, repo.KindUKI, sc); err != nil {
		return sc.n, err
	}
	info, err := sc.info()
	if err != nil {
		return sc.n, refuse(ReasonUKI, "release %s's UKI: %v", r.plan.To, err)
	}
	param, err := checkUKI(info, r.plan)
	if err != nil {
		return sc.n, err
	}
	r.uki, r.param = info, param
	r.log.Info("new UKI's command line read", "cmdline", info.Cmdline)
	return sc.n, nil
}

// checkUKI checks that a UKI boots what the plan writes, and returns the
// verity parameters its command line gives the kernel.
func checkUKI(info ukiInfo, p Plan) (verity.Param, error) {
	bad := func(format string, args ...any) (verity.Param, error) {
		return verity.Param{}, refuse(ReasonUKI, "release %s's UKI: "+format, append([]any{p.To}, args...)...)
	}
	if want, ok := peMachines[p.Arch]; !ok || info.Machine != want {
		return bad("PE machine %#x, not %s's", info.Machine, p.Arch)
	}
	if v, _ := osReleaseValue(info.OSRel, "VERSION_ID"); v != p.To {
		return bad("its os-release has VERSION_ID %q, the release is %s: systemd-boot would order it by the wrong version", v, p.To)
	}
	cl := cmdline.Parse(info.Cmdline)
	// A UKI finds its root slot by the root hash it seals; one built
	// before that also names the slot (berth.slot=), which must then be
	// the one the update writes.
	if s, ok := cl.Get(partition.SlotKey); ok {
		if slot, err := partition.ParseSlot(s); err != nil {
			return bad("its command line: %v", err)
		} else if slot != p.Slot {
			return bad("its command line boots slot %s (%s=%s), but the update writes slot %s (the node runs from %s)", slot, partition.SlotKey, s, p.Slot, p.RunningSlot)
		}
	}
	v, ok := cl.Get(verity.ParamKey)
	if !ok {
		return bad("its command line has no %s=", verity.ParamKey)
	}
	param, err := verity.ParseParam(v)
	if err != nil {
		return bad("its command line: %v", err)
	}
	switch {
	case param.RootHash != p.Release.RootHash:
		return bad("its command line seals root hash %s, the release's is %s", param.RootHash, p.Release.RootHash)
	case param.DataBlocks != p.Root.DataBlocks || param.HashStartBlock != p.Root.HashStartBlock:
		return bad("its command line has %d data blocks with the hash tree at block %d; the %d-byte root image holds %d data blocks with the tree at block %d",
			param.DataBlocks, param.HashStartBlock, p.Root.Bytes, p.Root.DataBlocks, p.Root.HashStartBlock)
	}
	return param, nil
}

// pruneESP leaves on the ESP only the running version's UKIs, after
// checking that none of those names the target slot: from here until the
// commit, no UKI boots the slot being written. It also makes room for the
// new UKI (the ESP is sized for two).
func (r *runner) pruneESP(context.Context) (int64, error) {
	es, err := r.esp.List()
	if err != nil {
		return 0, err
	}
	var read int64
	for _, en := range es {
		if !strings.EqualFold(en.Version, r.plan.Running.Version) {
			continue // pruned below
		}
		n, err := r.checkStays(en)
		read += n
		if err != nil {
			return read, err
		}
	}
	return read, r.esp.Prune(r.plan.Running)
}

// checkStays checks that en, a UKI the update leaves on the ESP, does not
// boot the target slot.
func (r *runner) checkStays(en bootcount.Entry) (int64, error) {
	path := filepath.Join(r.esp.Root, filepath.FromSlash(bootcount.Dir), en.Name)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	sc := newUKIScanner(true)
	if _, err := io.Copy(sc, f); err != nil && !errors.Is(err, errEnough) {
		return sc.n, refuse(ReasonESP, "%s stays on the ESP, and which slot it boots cannot be told: %v", path, err)
	}
	info, err := sc.info()
	if err != nil {
		return sc.n, refuse(ReasonESP, "%s stays on the ESP, and which slot it boots cannot be told: %v", path, err)
	}
	cl := cmdline.Parse(info.Cmdline)
	hint, _ := cl.Get(partition.SlotKey)
	if partition.Slot(hint) == r.plan.Slot {
		return sc.n, refuse(ReasonESP, "%s stays on the ESP and boots slot %s (%s=%s), which the update would write", path, hint, partition.SlotKey, hint)
	}
	v, ok := cl.Get(verity.ParamKey)
	if !ok {
		return sc.n, nil // not a disk boot: no slot at all
	}
	param, err := verity.ParseParam(v)
	if err != nil {
		return sc.n, nil // berth refuses to boot it: no slot either
	}
	// Which slot it boots is what berth will choose from what the slots
	// hold, and the target's top block stays as it is until the tree is
	// written, after the data: choose now, as a cut mid-write would
	// leave it.
	reads, err := r.slotReads(param)
	if err != nil {
		return sc.n, err
	}
	if c, err := diskboot.ChooseSlot(reads, param, hint); err == nil && c.Slot == r.plan.Slot {
		return sc.n, refuse(ReasonESP, "%s stays on the ESP and boots slot %s, which holds its root hash %s and which the update would write", path, c.Slot, param.RootHash)
	}
	return sc.n, nil
}

// slotReads reads the top block, at p's position, of the running slot
// (Request.Running) and the target (already open), for
// diskboot.ChooseSlot: what a UKI sealing p would find at the next boot.
func (r *runner) slotReads(p verity.Param) ([]diskboot.SlotRead, error) {
	run, err := os.Open(r.req.Running)
	if err != nil {
		return nil, fmt.Errorf("opening the running slot's device %s: %w", r.req.Running, err)
	}
	defer run.Close()
	reads := []diskboot.SlotRead{
		{Slot: r.plan.RunningSlot, Partition: r.req.Running},
		{Slot: r.plan.Slot, Partition: r.req.Target},
	}
	reads[0].Top, reads[0].Err = diskboot.ReadTop(run, p)
	reads[1].Top, reads[1].Err = diskboot.ReadTop(r.f, p)
	return reads, nil
}

// writeRoot streams the root image into the slot from offset 0 (the slot
// is larger: nothing past the image is touched, and a block device is
// never truncated), then fsyncs it. Memory is the fetch's copy buffer.
func (r *runner) writeRoot(ctx context.Context) (int64, error) {
	w := &slotWriter{ctx: ctx, f: r.f, limit: r.plan.Root.Bytes}
	if err := r.req.Fetcher.Fetch(ctx, r.plan.Release, repo.KindRoot, w); err != nil {
		return w.off, err
	}
	if w.off != r.plan.Root.Bytes {
		return w.off, fmt.Errorf("wrote %d bytes of the %d-byte root image", w.off, r.plan.Root.Bytes)
	}
	if err := r.f.Sync(); err != nil {
		return w.off, fmt.Errorf("fsync %s: %w", r.req.Target, err)
	}
	return w.off, nil
}

// slotWriter writes sequentially into the slot, up to limit.
type slotWriter struct {
	ctx   context.Context
	f     *os.File
	off   int64
	limit int64
}

func (w *slotWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if int64(len(p)) > w.limit-w.off {
		return 0, fmt.Errorf("the root image runs past its %d bytes", w.limit)
	}
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("writing the slot at byte %d: %w", w.off, err)
	}
	return n, nil
}

// verifyRoot reads the slot back and checks it with the new UKI's verity
// parameters. The page cache is dropped first (the data was fsynced, so
// the pages are clean), so that what is read is what the device holds,
// as the kernel will read it at the next boot.
func (r *runner) verifyRoot(ctx context.Context) (int64, error) {
	if r.req.Verify != nil {
		// The slot is written and synced; the kernel's verity target
		// must claim the device, which our O_EXCL open would refuse it.
		r.close()
		return r.req.Verify(ctx, r.req.Target, r.param)
	}
	if err := unix.Fadvise(int(r.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		r.log.Warn("could not drop the slot's cached pages; verifying what the cache holds", "target", r.req.Target, "err", err)
	}
	return verifySlot(ctx, r.f, r.param)
}

// stageUKI fetches the UKI whole onto the ESP through esp.StageFrom; the
// write succeeds only when the repository's hash check passed and the
// UKI's headers and sections are the ones readUKI checked, so only that
// UKI is renamed into place.
func (r *runner) stageUKI(ctx context.Context) (int64, error) {
	var n int64
	staged, err := r.esp.StageFrom(r.plan.Running, r.plan.To, func(w io.Writer) error {
		sc := newUKIScanner(false)
		cw := &counter{ctx: ctx, w: io.MultiWriter(w, sc)}
		defer func() { n = cw.n }()
		if err := r.req.Fetcher.Fetch(ctx, r.plan.Release, repo.KindUKI, cw); err != nil {
			return err
		}
		// The last moment to stop before the commit.
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := sc.info()
		if err != nil {
			return refuse(ReasonUKI, "release %s's UKI: %v", r.plan.To, err)
		}
		if info != r.uki {
			return refuse(ReasonUKI, "release %s's UKI fetched whole differs from its start read before writing the slot (command line %q, then %q): the server changed it", r.plan.To, r.uki.Cmdline, info.Cmdline)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	r.out.Entry = staged.Name
	return n, nil
}

// counter counts what passes through it, and stops it once ctx is done.
type counter struct {
	ctx context.Context
	w   io.Writer
	n   int64
}

func (c *counter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
