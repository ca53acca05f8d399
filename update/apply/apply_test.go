package apply

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/image/disk"
	iverity "github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/internal/syncbuf"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
)

var applyTime = time.Date(2026, 11, 24, 2, 9, 52, 0, time.UTC)

// world is a repository offering newVersion and the release it lists.
type world struct {
	repo   *testRepo
	image  slotImage
	newUKI []byte
	client *repo.Client
	rel    repo.Release
}

// newWorld publishes newVersion for slot b, as image/disk would build it
// for that slot; mut changes the release before it is published.
func newWorld(t testing.TB, mut func(*release)) *world {
	t.Helper()
	img := newSlotImage(t, dataBlocks, 2)
	rel := release{arch: "amd64", version: newVersion, image: img,
		uki: ukiSpec{cmdline: diskCmdline(img.param), osrel: disk.OSRelease(newVersion)}}
	if mut != nil {
		mut(&rel)
	}
	w := &world{repo: newTestRepo(t), image: rel.image}
	w.newUKI = w.repo.add(t, rel)
	w.client = w.repo.client(t, runningVersion)
	var err error
	if w.rel, err = w.client.Latest(context.Background(), rel.arch); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) plan(t testing.TB, n *node, arch string) Plan {
	t.Helper()
	p, err := Decide(Input{Running: n.status(), Arch: arch, Release: w.rel, SlotSize: slotSize})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (w *world) request(t testing.TB, n *node) Request {
	return Request{Plan: w.plan(t, n, "amd64"), Fetcher: w.client, Target: n.slotB, Running: n.slotA, ESP: n.esp,
		Now: func() time.Time { return applyTime }}
}

// checkStaged checks a node Apply finished on: slot b holds the image
// (and past it what it held), the ESP the running UKI and the new one,
// which systemd-boot starts next.
func (w *world) checkStaged(t testing.TB, n *node, lu status.LastUpdate) {
	t.Helper()
	if lu.Result != status.ResultStaged || lu.Reason != "" || lu.From != runningVersion || lu.To != newVersion ||
		lu.Slot != "b" || lu.Entry != stagedEntry || !lu.At.Equal(applyTime) {
		t.Errorf("LastUpdate = %+v", lu)
	}
	files := n.espFiles(t)
	if len(files) != 2 || !bytes.Equal(files[runningEntry], n.runningUKI) || !bytes.Equal(files[stagedEntry], w.newUKI) {
		t.Errorf("EFI/Linux holds %q; want %s and %s, whole", slices.Sorted(maps.Keys(files)), runningEntry, stagedEntry)
	}
	if name, _ := n.boots(t); name != stagedEntry {
		t.Errorf("systemd-boot would start %s, not the staged %s", name, stagedEntry)
	}
	b := n.readSlotB(t)
	if !bytes.Equal(b[:len(w.image.bytes)], w.image.bytes) || !bytes.Equal(b[len(w.image.bytes):], n.slotBBefore[len(w.image.bytes):]) || len(b) != slotSize {
		t.Error("slot b does not hold the root image followed by what it held past it")
	}
	// The disk image's own builder agrees: the data in the slot hashes to
	// the release's root hash, and the tree after it is the builder's.
	size := int64(w.image.param.DataBlocks) * 4096
	tree, err := iverity.Build(bytes.NewReader(b), size, iverity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tree.RootHashHex() != w.rel.RootHash || !bytes.Equal(b[size:size+int64(len(tree.Hash))], tree.Hash) {
		t.Errorf("image/verity over slot b: root hash %s, release %s", tree.RootHashHex(), w.rel.RootHash)
	}
	n.checkSlotAUntouched(t)
}

func (n *node) checkSlotAUntouched(t testing.TB) {
	t.Helper()
	a, err := os.ReadFile(n.slotA)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, n.slotABefore) {
		t.Error("the running slot a was written")
	}
}

func TestApply(t *testing.T) {
	w := newWorld(t, nil)
	// An older version's UKI, for slot b: it must be gone before slot b
	// is written.
	old := buildUKI(t, ukiSpec{cmdline: slotCmdline("b", newSlotImage(t, 10, 9).param), osrel: disk.OSRelease("0.9")})
	n := newNode(t, map[string][]byte{"berth-0.9.efi": old, "loader.txt": []byte("not a UKI")})
	var logs syncbuf.Buffer
	lu, err := Apply(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), w.request(t, n))
	if err != nil {
		t.Fatal(err)
	}
	if files := n.espFiles(t); string(files["loader.txt"]) != "not a UKI" {
		t.Errorf("a file that is no UKI was touched: %q", files["loader.txt"])
	}
	os.Remove(filepath.Join(n.esp, "EFI", "Linux", "loader.txt"))
	w.checkStaged(t, n, lu)

	var names []string
	for _, s := range lu.Steps {
		names = append(names, s.Name)
		if s.Error != "" || s.Ms < 0 {
			t.Errorf("step %+v", s)
		}
		if !strings.Contains(logs.String(), "step="+s.Name) {
			t.Errorf("no log line for step %s", s.Name)
		}
	}
	want := []string{StepTarget, StepReadUKI, StepPruneESP, StepWriteRoot, StepVerifyRoot, StepStageUKI}
	if !slices.Equal(names, want) {
		t.Fatalf("steps %q, want %q", names, want)
	}
	ukiLen, rootLen := int64(len(w.newUKI)), int64(len(w.image.bytes))
	bytesOf := func(name string) int64 { return lu.Steps[slices.Index(names, name)].Bytes }
	if b := bytesOf(StepReadUKI); b != int64(ukiLen) {
		t.Errorf("read-uki fetched %d bytes of the %d-byte UKI; want it whole, its hash checked before anything is written", b, ukiLen)
	}
	if bytesOf(StepWriteRoot) != rootLen || bytesOf(StepVerifyRoot) != rootLen || bytesOf(StepStageUKI) != ukiLen {
		t.Errorf("steps moved %+v; root image %d bytes, UKI %d", lu.Steps, rootLen, ukiLen)
	}
}

// A release whose UKI was built before UKIs stopped naming their slot
// (berth.slot=b, the slot the update writes) is applied as one that
// names none.
func TestApplyOlderUKINamingSlot(t *testing.T) {
	w := newWorld(t, func(r *release) { r.uki.cmdline = slotCmdline("b", r.image.param) })
	n := newNode(t, nil)
	lu, err := Apply(context.Background(), discard, w.request(t, n))
	if err != nil {
		t.Fatal(err)
	}
	w.checkStaged(t, n, lu)
}

// The same release in both slots (the running one and the target, as an
// earlier update may leave them): the running UKI, which stays, boots
// slot a by its root hash (berth takes a when both hold it), so slot b
// may be written.
func TestApplyBothSlotsHoldRunning(t *testing.T) {
	w := newWorld(t, nil)
	n := newNode(t, nil)
	n.putSlotB(t, runningImage(t).bytes)
	lu, err := Apply(context.Background(), discard, w.request(t, n))
	if err != nil {
		t.Fatal(err)
	}
	w.checkStaged(t, n, lu)
}

// cutFetcher cancels the context once the call-th fetch of kind has
// written after bytes, as a shutdown would in the middle of it.
type cutFetcher struct {
	f      Fetcher
	kind   repo.Kind
	call   int
	after  int64
	cancel context.CancelFunc
	calls  int
}

func (c *cutFetcher) Fetch(ctx context.Context, rel repo.Release, kind repo.Kind, w io.Writer) error {
	if kind == c.kind {
		c.calls++
		if c.calls == c.call {
			w = &cutWriter{w: w, after: c.after, cancel: c.cancel}
		}
	}
	return c.f.Fetch(ctx, rel, kind, w)
}

type cutWriter struct {
	w      io.Writer
	n      int64
	after  int64
	cancel context.CancelFunc
}

func (c *cutWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.n += int64(n); c.n >= c.after {
		c.cancel()
	}
	return n, err
}

// TestApplyCutAfterEachStep stops Apply after each step, as a crash or a
// power cut between them would: until the last step the ESP boots the
// running version from an untouched slot a; after it, the new one. A
// fresh Apply then finishes the update.
func TestApplyCutAfterEachStep(t *testing.T) {
	w := newWorld(t, nil)
	steps := newRunner(discard, Request{}).steps()
	for k := 0; k <= len(steps); k++ {
		n := newNode(t, map[string][]byte{"berth-0.9.efi": []byte("MZ an older UKI")})
		r := newRunner(discard, w.request(t, n))
		for _, s := range r.steps()[:k] {
			if err := r.do(context.Background(), s); err != nil {
				t.Fatalf("step %s: %v", s.name, err)
			}
		}
		r.close()
		when := "cut after no step"
		if k > 0 {
			when = "cut after " + steps[k-1].name
		}
		if k < len(steps) {
			n.checkBootsRunning(t, when)
		} else if name, _ := n.boots(t); name != stagedEntry {
			t.Errorf("%s: boots %s, want the staged %s", when, name, stagedEntry)
		}
		lu, err := Apply(context.Background(), discard, w.request(t, n))
		if err != nil {
			t.Fatalf("Apply after a %s: %v", when, err)
		}
		w.checkStaged(t, n, lu)
	}
}

// TestApplyInterrupted cuts Apply in the middle of a step: the context
// cancelled while the root image or the UKI streams, the connection
// dropped, the slot failing a write. Each leaves a node that boots the
// running version and that a fresh Apply updates.
func TestApplyInterrupted(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		name, step string
		setup      func(n *node, r *runner, cancel context.CancelFunc)
		want       string
	}{
		{"cancelled writing the root", StepWriteRoot, func(n *node, r *runner, cancel context.CancelFunc) {
			r.req.Fetcher = &cutFetcher{f: w.client, kind: repo.KindRoot, call: 1, after: 300 << 10, cancel: cancel}
		}, "context canceled"},
		{"cancelled staging the UKI", StepStageUKI, func(n *node, r *runner, cancel context.CancelFunc) {
			r.req.Fetcher = &cutFetcher{f: w.client, kind: repo.KindUKI, call: 2, after: 200 << 10, cancel: cancel}
		}, "context canceled"},
		{"connection dropped", StepWriteRoot, func(n *node, r *runner, cancel context.CancelFunc) {
			w.repo.setHandler(func(rw http.ResponseWriter, req *http.Request) bool {
				if !strings.HasSuffix(req.URL.Path, ".root.img") {
					return false
				}
				rw.Header().Set("Content-Length", strconv.Itoa(len(w.image.bytes)))
				rw.WriteHeader(http.StatusOK)
				rw.Write(w.image.bytes[:500<<10])
				panic(http.ErrAbortHandler)
			})
		}, "unexpected EOF"},
		{"write error", StepWriteRoot, func(n *node, r *runner, cancel context.CancelFunc) {
			r.open = func(name string, _ int, _ os.FileMode) (*os.File, error) { return os.Open(name) }
		}, "writing the slot at byte 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer w.repo.setHandler(nil)
			n := newNode(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := newRunner(discard, w.request(t, n))
			c.setup(n, r, cancel)
			lu, err := r.run(ctx)
			r.close()
			if err == nil || !strings.Contains(err.Error(), c.step+": ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Apply = %v; want an error in %s with %q", err, c.step, c.want)
			}
			last := lu.Steps[len(lu.Steps)-1]
			if lu.Result != status.ResultFailed || last.Name != c.step || last.Error == "" || lu.Reason != last.Error || lu.Entry != "" {
				t.Errorf("LastUpdate = %+v", lu)
			}
			n.checkBootsRunning(t, c.name)
			if files := n.espFiles(t); len(files) != 1 {
				t.Errorf("%s: EFI/Linux holds %q, want only the running UKI", c.name, slices.Sorted(maps.Keys(files)))
			}
			w.repo.setHandler(nil)
			lu, err = Apply(context.Background(), discard, w.request(t, n))
			if err != nil {
				t.Fatal(err)
			}
			w.checkStaged(t, n, lu)
		})
	}
}

// TestApplyCorruptSlot: the slot does not keep what was written (a
// failing disk, another writer); the check names the block, fails the
// update, and the ESP is left as it was.
func TestApplyCorruptSlot(t *testing.T) {
	w := newWorld(t, nil)
	dataLen := int64(dataBlocks * 4096)
	for _, c := range []struct {
		name  string
		off   int64
		level int
		block uint64
	}{
		{"data block", 7*4096 + 100, -1, 7},
		{"last data block", dataLen - 1, -1, dataBlocks - 1},
		{"top hash block", dataLen + 5, 1, 0},
		{"level 0 hash block", dataLen + 4096*2 + 17, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t, nil)
			r := newRunner(discard, w.request(t, n))
			defer r.close()
			steps := r.steps()
			i := slices.IndexFunc(steps, func(s step) bool { return s.name == StepVerifyRoot })
			for _, s := range steps[:i] {
				if err := r.do(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			}
			before := n.espFiles(t)
			f, err := os.OpenFile(n.slotB, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte{0}
			f.ReadAt(b, c.off)
			f.WriteAt([]byte{b[0] ^ 0x40}, c.off)
			f.Close()
			err = r.do(context.Background(), steps[i])
			var me *MismatchError
			if !errors.As(err, &me) || me.Level != c.level || me.Block != c.block || me.Offset != c.off/4096*4096 {
				t.Fatalf("verify-root = %v; want a mismatch at level %d block %d (byte %d)", err, c.level, c.block, c.off/4096*4096)
			}
			if !strings.Contains(err.Error(), "at byte ") || !strings.Contains(err.Error(), w.rel.RootHash) {
				t.Errorf("error %q does not name the offset and the root hash", err)
			}
			if after := n.espFiles(t); !equalFiles(before, after) {
				t.Errorf("the ESP changed: %q → %q", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
			}
			n.checkBootsRunning(t, c.name)
		})
	}
}

func equalFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestApplyRefuses: releases whose UKI would not boot what the update
// writes, targets that are the running slot, an ESP whose remaining UKI
// boots the target slot, a root image whose bytes are not the signed
// ones. Each is refused before anything that changes what boots is
// written, the slot untouched unless said.
func TestApplyRefuses(t *testing.T) {
	img := newSlotImage(t, dataBlocks, 2)
	other := newSlotImage(t, dataBlocks, 3)
	forAnySlot := diskCmdline(img.param)
	for _, c := range []struct {
		name string
		rel  func(*release)
		req  func(t *testing.T, n *node, w *world, r *Request)
		// extra UKIs on the ESP.
		extra       func(t *testing.T) map[string][]byte
		reason      Reason
		want        string
		slotWritten bool
	}{
		{name: "older UKI naming the running slot", rel: func(r *release) { r.uki.cmdline = slotCmdline("a", img.param) },
			reason: ReasonUKI, want: "boots slot a (berth.slot=a), but the update writes slot b"},
		{name: "older UKI naming no slot", rel: func(r *release) { r.uki.cmdline = slotCmdline("", img.param) },
			reason: ReasonUKI, want: `berth.slot="": want "a" or "b"`},
		{name: "UKI sealing another root hash", rel: func(r *release) { r.uki.cmdline = diskCmdline(other.param) },
			reason: ReasonUKI, want: "seals root hash " + other.param.RootHash + ", the release's is " + img.param.RootHash},
		{name: "UKI of another version", rel: func(r *release) { r.uki.osrel = disk.OSRelease("2.1") },
			reason: ReasonUKI, want: `VERSION_ID "2.1", the release is 2.0`},
		{name: "UKI of another architecture", rel: func(r *release) { r.uki.arch = "arm64" },
			reason: ReasonUKI, want: "PE machine 0xaa64, not amd64's"},
		{name: "UKI with another layout", rel: func(r *release) {
			p := img.param
			p.DataBlocks, p.HashStartBlock = 299, 300
			r.uki.cmdline = diskCmdline(p)
		}, reason: ReasonUKI, want: "has 299 data blocks with the hash tree at block 300; the 1245184-byte root image holds 300 data blocks"},
		{name: "target is the running slot", req: func(t *testing.T, n *node, w *world, r *Request) { r.Target = n.slotA },
			reason: ReasonTarget, want: "is the running slot's device"},
		{name: "target is a link to the running slot", req: func(t *testing.T, n *node, w *world, r *Request) {
			r.Target = filepath.Join(n.dir, "slot-b-link")
			if err := os.Link(n.slotA, r.Target); err != nil {
				t.Fatal(err)
			}
		}, reason: ReasonTarget, want: "is the running slot's device"},
		{name: "target is a symlink to the running slot", req: func(t *testing.T, n *node, w *world, r *Request) {
			r.Target = filepath.Join(n.dir, "by-partlabel-berth-root-b")
			if err := os.Symlink(n.slotA, r.Target); err != nil {
				t.Fatal(err)
			}
		}, reason: ReasonTarget, want: "is the running slot's device"},
		{name: "running slot unknown", req: func(t *testing.T, n *node, w *world, r *Request) { r.Running = "" },
			reason: ReasonTarget, want: "the running slot's device is not known"},
		{name: "target too small", req: func(t *testing.T, n *node, w *world, r *Request) {
			if err := os.Truncate(n.slotB, 1<<20); err != nil {
				t.Fatal(err)
			}
			n.slotBBefore = n.slotBBefore[:1<<20]
		}, reason: ReasonTarget, want: "has 1048576 bytes; the root image needs 1245184"},
		{name: "target is a directory", req: func(t *testing.T, n *node, w *world, r *Request) { r.Target = n.esp },
			reason: ReasonTarget, want: "is a directory, neither a block device nor a file"},
		{name: "a UKI that stays names the target slot", extra: func(t *testing.T) map[string][]byte {
			return map[string][]byte{"berth-1.0+0-3.efi": buildUKI(t, ukiSpec{cmdline: slotCmdline("b", other.param), osrel: disk.OSRelease(runningVersion)})}
		}, reason: ReasonESP, want: "berth-1.0+0-3.efi stays on the ESP and boots slot b (berth.slot=b)"},
		{name: "a UKI that stays boots the target slot by its root hash", extra: func(t *testing.T) map[string][]byte {
			return map[string][]byte{"berth-1.0+0-3.efi": buildUKI(t, ukiSpec{cmdline: diskCmdline(other.param), osrel: disk.OSRelease(runningVersion)})}
		}, req: func(t *testing.T, n *node, w *world, r *Request) { n.putSlotB(t, other.bytes) },
			reason: ReasonESP, want: "berth-1.0+0-3.efi stays on the ESP and boots slot b, which holds its root hash " + other.param.RootHash + " and which the update would write"},
		{name: "a UKI that stays cannot be read", extra: func(t *testing.T) map[string][]byte {
			return map[string][]byte{"berth-1.0+0-3.efi": []byte("MZ torn")}
		}, reason: ReasonESP, want: "which slot it boots cannot be told: not a PE file"},
		{name: "root image corrupt on the server", req: func(t *testing.T, n *node, w *world, r *Request) {
			p := w.repo.targetFile(t, repo.KindRoot)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[12345] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "length or hash does not match the signed metadata", slotWritten: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, func(r *release) {
				r.image = img
				r.uki.cmdline = forAnySlot
				if c.rel != nil {
					c.rel(r)
				}
			})
			var extra map[string][]byte
			if c.extra != nil {
				extra = c.extra(t)
			}
			n := newNode(t, extra)
			req := w.request(t, n)
			if c.req != nil {
				c.req(t, n, w, &req)
			}
			before := n.espFiles(t)
			lu, err := Apply(context.Background(), discard, req)
			var ref *Refusal
			switch {
			case c.reason != "" && (!errors.As(err, &ref) || ref.Reason != c.reason):
				t.Fatalf("Apply = %v; want a %s refusal", err, c.reason)
			case c.reason == "" && !errors.Is(err, repo.ErrCorrupt):
				t.Fatalf("Apply = %v; want repo.ErrCorrupt", err)
			case !strings.Contains(err.Error(), c.want):
				t.Errorf("Apply = %v\nwant it to say %q", err, c.want)
			}
			if lu.Result != status.ResultRefused || lu.Reason == "" || !strings.HasSuffix(err.Error(), lu.Reason) || lu.Entry != "" {
				t.Errorf("LastUpdate = %+v", lu)
			}
			if after := n.espFiles(t); !equalFiles(before, after) {
				t.Errorf("the ESP changed: %q → %q", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
			}
			if !c.slotWritten && !bytes.Equal(n.readSlotB(t), n.slotBBefore) {
				t.Error("slot b was written")
			}
			n.checkBootsRunning(t, c.name)
		})
	}
}

// TestApplyUKIForgedBeforeWriting: the server hands out another UKI the
// first time (a command line the checks accept, but not the signed one):
// the first read is whole and hash-checked, so it is refused before the
// ESP is pruned or the slot written.
func TestApplyUKIForgedBeforeWriting(t *testing.T) {
	w := newWorld(t, nil)
	n := newNode(t, nil)
	forged := bytes.Replace(w.newUKI, []byte("console=ttyS0"), []byte("console=ttyS1"), 1)
	if bytes.Equal(forged, w.newUKI) {
		t.Fatal("the UKI has no console=ttyS0 to change")
	}
	served := 0
	w.repo.setHandler(func(rw http.ResponseWriter, req *http.Request) bool {
		if !strings.HasSuffix(req.URL.Path, ".berth.efi") {
			return false
		}
		if served++; served > 1 {
			return false
		}
		rw.Write(forged)
		return true
	})
	// The first read is whole and hash-checked: the forgery is refused
	// there, before the ESP or the slot is touched.
	lu, err := Apply(context.Background(), discard, w.request(t, n))
	if !errors.Is(err, repo.ErrCorrupt) || !strings.Contains(err.Error(), StepReadUKI+": ") {
		t.Fatalf("Apply = %v; want the UKI refused as corrupt at %s", err, StepReadUKI)
	}
	if steps := lu.Steps; len(steps) != 2 || steps[1].Name != StepReadUKI {
		t.Errorf("steps %+v: want nothing after %s", steps, StepReadUKI)
	}
	if lu.Result != status.ResultRefused || served != 1 {
		t.Errorf("LastUpdate = %+v after %d UKI requests", lu, served)
	}
	if files := n.espFiles(t); len(files) != 1 {
		t.Errorf("EFI/Linux holds %q, want only the running UKI", slices.Sorted(maps.Keys(files)))
	}
	n.checkBootsRunning(t, "UKI changed")
}

// TestApplyCanceledBefore: a context done before Apply starts writes
// nothing.
func TestApplyCanceledBefore(t *testing.T) {
	w := newWorld(t, nil)
	n := newNode(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lu, err := Apply(ctx, discard, w.request(t, n))
	if !errors.Is(err, context.Canceled) || lu.Result != status.ResultFailed || len(lu.Steps) != 1 {
		t.Fatalf("Apply = %+v, %v", lu, err)
	}
	if !bytes.Equal(n.readSlotB(t), n.slotBBefore) {
		t.Error("slot b was written")
	}
	n.checkBootsRunning(t, "cancelled")
}

// The tests' entry names are what bootcount makes of the versions.
func TestEntryNames(t *testing.T) {
	s, err := bootcount.Staged(newVersion)
	if err != nil || s.Name != stagedEntry {
		t.Fatalf("Staged(%s) = %v, %v", newVersion, s, err)
	}
}

// TestApplyVerifyHook: a node checks the written slot through the
// kernel's dm-verity (Request.Verify) with the parameters of the new
// UKI's command line; a failed check stops the update before its commit.
func TestApplyVerifyHook(t *testing.T) {
	w := newWorld(t, nil)
	n := newNode(t, nil)
	req := w.request(t, n)
	var got verity.Param
	var dev string
	req.Verify = func(_ context.Context, d string, p verity.Param) (int64, error) {
		dev, got = d, p
		// The kernel's verity target must be able to claim the device:
		// Apply holds it open with O_EXCL while writing, and must not now.
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); l == d {
				t.Errorf("the target %s is still open (fd %s) while it is verified", d, fd.Name())
			}
		}
		return 0, &MismatchError{Offset: 4096, Level: -1, Block: 1, RootHash: p.RootHash}
	}
	lu, err := Apply(context.Background(), discard, req)
	var me *MismatchError
	if !errors.As(err, &me) || lu.Result != status.ResultFailed {
		t.Fatalf("Apply with a failing check = %+v, %v; want failed with the mismatch", lu, err)
	}
	if dev != req.Target || got != w.image.param {
		t.Errorf("Verify got %s %+v; want the target %s with the new UKI's %+v", dev, got, req.Target, w.image.param)
	}
	if last := lu.Steps[len(lu.Steps)-1]; last.Name != StepVerifyRoot || last.Error == "" {
		t.Errorf("last step %+v, want %s failed", last, StepVerifyRoot)
	}
	n.checkBootsRunning(t, "after a failed check")

	req.Verify = func(_ context.Context, d string, p verity.Param) (int64, error) { return 42, nil }
	lu, err = Apply(context.Background(), discard, req)
	if err != nil || lu.Result != status.ResultStaged {
		t.Fatalf("Apply with a passing check = %+v, %v", lu, err)
	}
	if s := lu.Steps[slices.IndexFunc(lu.Steps, func(s status.Step) bool { return s.Name == StepVerifyRoot })]; s.Bytes != 42 {
		t.Errorf("verify-root step %+v, want the check's 42 bytes", s)
	}
}
