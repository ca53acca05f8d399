package apply

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-node/berth/image/disk"
	"github.com/berth-node/berth/image/disk/uki"
	iverity "github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/esp"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
)

// The tests' releases: the node runs runningVersion from slot a; the
// repository offers newVersion, for slot b.
const (
	runningVersion = "1.0"
	newVersion     = "2.0"
	runningEntry   = "berth-1.0.efi"
	stagedEntry    = "berth-2.0+3.efi"
	// dataBlocks gives a two-level hash tree (300 → 3 → 1).
	dataBlocks = 300
	slotSize   = 2 << 20
)

var discard = slog.New(slog.DiscardHandler)

// slotImage is a root image as a slot holds it, built by image/verity
// (the disk image's builder) over random data: the data, then the tree.
type slotImage struct {
	bytes []byte
	param verity.Param
}

func newSlotImage(t testing.TB, blocks int, seed uint64) slotImage {
	t.Helper()
	data := make([]byte, blocks*verity.BlockSize)
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}))
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	tree, err := iverity.Build(bytes.NewReader(data), int64(len(data)), iverity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	return slotImage{
		bytes: append(data, tree.Hash...),
		param: verity.Param{DataBlocks: tree.DataBlocks, HashStartBlock: tree.HashStartBlock(size), RootHash: tree.RootHashHex(), Salt: tree.SaltHex()},
	}
}

// ukiSpec is a UKI to build with image/disk/uki, the disk image's own
// builder (systemd's stub and objcopy).
type ukiSpec struct {
	arch    string // amd64 when empty
	cmdline string
	osrel   string
}

var ukis = struct {
	sync.Mutex
	dir   string
	built map[ukiSpec][]byte
}{built: map[ukiSpec][]byte{}}

// buildUKI builds (once per test binary) a UKI of a random 256 KiB
// "kernel" and 64 KiB "initramfs".
func buildUKI(t testing.TB, s ukiSpec) []byte {
	t.Helper()
	ukis.Lock()
	defer ukis.Unlock()
	if b, ok := ukis.built[s]; ok {
		return b
	}
	if ukis.dir == "" {
		d, err := os.MkdirTemp("", "apply-uki-")
		if err != nil {
			t.Fatal(err)
		}
		ukis.dir = d
		r := rand.New(rand.NewChaCha8([32]byte{7}))
		for name, size := range map[string]int{"kernel": 256 << 10, "initrd": 64 << 10} {
			b := make([]byte, size)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(filepath.Join(d, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	stub, machine, ok := uki.StubFor(s.arch)
	if !ok {
		t.Fatalf("no stub for %q", s.arch)
	}
	out := filepath.Join(ukis.dir, fmt.Sprintf("uki-%d.efi", len(ukis.built)))
	err := uki.Build(context.Background(), discard, out,
		uki.Inputs{OSRelease: []byte(s.osrel), Cmdline: s.cmdline, Kernel: filepath.Join(ukis.dir, "kernel"), Initrd: filepath.Join(ukis.dir, "initrd")},
		uki.Options{Stub: stub, Machine: machine, Objcopy: uki.ObjcopyFor(s.arch), Epoch: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ukis.built[s] = b
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ukis.dir != "" {
		os.RemoveAll(ukis.dir)
	}
	os.Exit(code)
}

// diskCmdline is the command line image/disk seals into a UKI: the root
// hash, no slot (berth boots from the slot whose tree has the root hash).
func diskCmdline(p verity.Param) string {
	return "console=ttyS0 berth.verity=" + p.String()
}

// slotCmdline is the command line of a UKI built before that, which also
// names its slot.
func slotCmdline(slot string, p verity.Param) string {
	return "console=ttyS0 berth.slot=" + slot + " berth.verity=" + p.String()
}

// release is a release to publish; zero fields take the defaults.
type release struct {
	arch, version string
	image         slotImage
	// rootHash is the root hash the metadata names; the image's when
	// empty.
	rootHash string
	uki      ukiSpec
}

// testRepo is an update repository made by update/repo's builder,
// served over HTTP, read by its real client.
type testRepo struct {
	dir  string
	keys *repo.Keys
	srv  *httptest.Server
	// handler, when set, serves a request before the file server does;
	// it returns false to pass it on.
	handler func(w http.ResponseWriter, r *http.Request) bool
	mu      sync.Mutex
}

func newTestRepo(t testing.TB) *testRepo {
	t.Helper()
	keys, err := repo.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	r := &testRepo{dir: filepath.Join(t.TempDir(), "repo"), keys: keys}
	if err := repo.Init(context.Background(), r.dir, keys, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(r.dir))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		h := r.handler
		r.mu.Unlock()
		if h != nil && h(w, req) {
			return
		}
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *testRepo) setHandler(h func(w http.ResponseWriter, req *http.Request) bool) {
	r.mu.Lock()
	r.handler = h
	r.mu.Unlock()
}

// add publishes rel and returns its UKI's bytes.
func (r *testRepo) add(t testing.TB, rel release) []byte {
	t.Helper()
	src := t.TempDir()
	u := buildUKI(t, rel.uki)
	ukiPath, rootPath := filepath.Join(src, "uki.efi"), filepath.Join(src, "root.img")
	if err := os.WriteFile(ukiPath, u, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rootPath, rel.image.bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	h := rel.rootHash
	if h == "" {
		h = rel.image.param.RootHash
	}
	if err := repo.Add(context.Background(), r.dir, r.keys, repo.NewRelease{Arch: rel.arch, Version: rel.version, RootHash: h, UKI: ukiPath, Root: rootPath}, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	return u
}

func (r *testRepo) client(t testing.TB, running string) *repo.Client {
	t.Helper()
	root, err := os.ReadFile(filepath.Join(r.dir, "root.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.NewClient(repo.ClientConfig{TrustedRoot: root, MetadataURL: r.srv.URL, CacheDir: t.TempDir(), Running: running, Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// targetFile is the file in the repository that serves rel's kind.
func (r *testRepo) targetFile(t testing.TB, kind repo.Kind) string {
	t.Helper()
	var found []string
	suffix := ".root.img"
	if kind == repo.KindUKI {
		suffix = ".berth.efi"
	}
	filepath.WalkDir(filepath.Join(r.dir, "targets"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) {
			found = append(found, p)
		}
		return err
	})
	if len(found) != 1 {
		t.Fatalf("%s targets in the repository: %v", kind, found)
	}
	return found[0]
}

// node is a node's disk as Apply sees it: the two slots' devices (files)
// and the mounted ESP.
type node struct {
	dir, slotA, slotB, esp string
	runningUKI             []byte
	slotBBefore            []byte
	slotABefore            []byte
}

// runningImage is the root image the node runs, in slot a.
func runningImage(t testing.TB) slotImage { return newSlotImage(t, 200, 1) }

// newNode makes a node running runningVersion from slot a, its UKI the
// ESP's only one (plus extra files), slot b holding an older version's
// leftovers.
func newNode(t testing.TB, extra map[string][]byte) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{dir: dir, slotA: filepath.Join(dir, "slot-a"), slotB: filepath.Join(dir, "slot-b"), esp: filepath.Join(dir, "esp")}
	running := runningImage(t)
	n.runningUKI = buildUKI(t, ukiSpec{cmdline: diskCmdline(running.param), osrel: disk.OSRelease(runningVersion)})
	n.slotABefore = append(slices.Clone(running.bytes), make([]byte, slotSize-len(running.bytes))...)
	n.slotBBefore = bytes.Repeat([]byte{0xee}, slotSize)
	files := map[string][]byte{runningEntry: n.runningUKI}
	maps.Copy(files, extra)
	for p, b := range map[string][]byte{n.slotA: n.slotABefore, n.slotB: n.slotBBefore} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	linux := filepath.Join(n.esp, filepath.FromSlash(bootcount.Dir))
	if err := os.MkdirAll(linux, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(linux, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// status is what status.Of says of the node's boot.
func (n *node) status() status.Status {
	return status.Status{Version: runningVersion, Slot: "a", Boot: status.BootSystemdBoot, Entry: runningEntry, State: "good"}
}

// espFiles is every file on the ESP under EFI/Linux, by name.
func (n *node) espFiles(t testing.TB) map[string][]byte {
	t.Helper()
	dir := filepath.Join(n.esp, filepath.FromSlash(bootcount.Dir))
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[de.Name()] = b
	}
	return m
}

// boots is the UKI systemd-boot would start next, as package bootcount
// orders the ESP's entries, and its bytes.
func (n *node) boots(t testing.TB) (string, []byte) {
	t.Helper()
	es, err := esp.ESP{Root: n.esp}.List()
	if err != nil {
		t.Fatal(err)
	}
	first, ok := bootcount.Pick(es)
	if !ok {
		t.Fatal("the ESP lists no UKI: the machine cannot boot")
	}
	return first.Name, n.espFiles(t)[first.Name]
}

// checkBootsRunning fails unless the node still boots the running
// version from an untouched slot a.
func (n *node) checkBootsRunning(t testing.TB, when string) {
	t.Helper()
	name, b := n.boots(t)
	if name != runningEntry || !bytes.Equal(b, n.runningUKI) {
		t.Errorf("%s: systemd-boot would start %s (%d bytes), not the running %s", when, name, len(b), runningEntry)
	}
	a, err := os.ReadFile(n.slotA)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, n.slotABefore) {
		t.Errorf("%s: the running slot a was written", when)
	}
}

func (n *node) readSlotB(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(n.slotB)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putSlotB writes b at the start of slot b, as an earlier release left it.
func (n *node) putSlotB(t testing.TB, b []byte) {
	t.Helper()
	copy(n.slotBBefore, b)
	if err := os.WriteFile(n.slotB, n.slotBBefore, 0o644); err != nil {
		t.Fatal(err)
	}
}
