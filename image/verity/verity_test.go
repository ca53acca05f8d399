package verity

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// -update re-records testdata/veritysetup.json by running veritysetup (not
// this package), so the golden file stays an independent vector.
var update = flag.Bool("update", false, "re-record testdata/veritysetup.json with veritysetup")

// Block counts around the tree's level boundaries: one block (no levels),
// one hash block exactly full (128), one over (129: two levels), and
// 128*128+1 (three levels).
var cases = []uint64{1, 5, 128, 129, 300, 128*128 + 1}

const testSalt = "9f2c1e0a7b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"

func testData(blocks uint64) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(blocks), byte(blocks >> 8), 7}))
	b := make([]byte, blocks*BlockSize)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

type golden struct {
	Blocks   uint64 `json:"blocks"`
	Salt     string `json:"salt"`
	RootHash string `json:"root_hash"`
	HashSize int64  `json:"hash_size"`
}

var rootRE = regexp.MustCompile(`(?m)^Root hash:\s+([0-9a-f]+)\s*$`)

// veritysetup runs `veritysetup format` and returns the root hash; extra
// are its flags (e.g. --no-superblock, --hash-offset).
func veritysetup(t *testing.T, data, hash string, extra ...string) string {
	t.Helper()
	args := append([]string{"format", data, hash}, extra...)
	out, err := exec.Command("veritysetup", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("veritysetup %v: %v\n%s (CI needs Debian's cryptsetup-bin)", args, err, out)
	}
	m := rootRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no root hash in veritysetup output:\n%s", out)
	}
	return string(m[1])
}

func mustSalt(t *testing.T) []byte {
	s, err := hex.DecodeString(testSalt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGolden checks Build against root hashes veritysetup computed for the
// same data and salt, recorded in testdata (works without veritysetup).
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "veritysetup.json")
	if *update {
		dir := t.TempDir()
		var gs []golden
		for _, n := range cases {
			d := filepath.Join(dir, "d"+strconv.FormatUint(n, 10))
			if err := os.WriteFile(d, testData(n), 0o644); err != nil {
				t.Fatal(err)
			}
			root := veritysetup(t, d, d+".h", "--no-superblock", "--salt="+testSalt)
			st, err := os.Stat(d + ".h")
			if err != nil {
				t.Fatal(err)
			}
			gs = append(gs, golden{Blocks: n, Salt: testSalt, RootHash: root, HashSize: st.Size()})
		}
		b, _ := json.MarshalIndent(gs, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gs []golden
	if err := json.Unmarshal(b, &gs); err != nil {
		t.Fatal(err)
	}
	if len(gs) != len(cases) {
		t.Fatalf("%s has %d cases, want %d (run with -update)", path, len(gs), len(cases))
	}
	for _, g := range gs {
		data := testData(g.Blocks)
		salt, _ := hex.DecodeString(g.Salt)
		tr, err := Build(bytes.NewReader(data), int64(len(data)), Options{Salt: salt})
		if err != nil {
			t.Fatal(err)
		}
		if tr.RootHashHex() != g.RootHash {
			t.Errorf("%d blocks: root hash %s, veritysetup said %s", g.Blocks, tr.RootHashHex(), g.RootHash)
		}
		// veritysetup's hash file is at least one block even with no levels.
		if want := max(g.HashSize, BlockSize); max(int64(len(tr.Hash)), BlockSize) != want {
			t.Errorf("%d blocks: hash area %d bytes, veritysetup wrote %d", g.Blocks, len(tr.Hash), g.HashSize)
		}
		if HashSize(g.Blocks, false) != int64(len(tr.Hash)) {
			t.Errorf("%d blocks: HashSize %d, Build wrote %d", g.Blocks, HashSize(g.Blocks, false), len(tr.Hash))
		}
	}
}

// TestAgainstVeritysetup compares root hash and every hash-area byte with
// veritysetup's, on a separate hash file without superblock, and on the
// data file itself after the data (--hash-offset) with a superblock.
func TestAgainstVeritysetup(t *testing.T) {
	salt := mustSalt(t)
	dir := t.TempDir()
	uuid := "0b5e7a52-3c0d-4f8e-9b41-0c5e2d8a17b3"
	var u [16]byte
	h, _ := hex.DecodeString(regexp.MustCompile("-").ReplaceAllString(uuid, ""))
	copy(u[:], h)
	for _, n := range cases {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			data := testData(n)
			d := filepath.Join(dir, fmt.Sprintf("d%d", n))
			if err := os.WriteFile(d, data, 0o644); err != nil {
				t.Fatal(err)
			}
			root := veritysetup(t, d, d+".h", "--no-superblock", "--salt="+testSalt)
			tr, err := Build(bytes.NewReader(data), int64(len(data)), Options{Salt: salt})
			if err != nil {
				t.Fatal(err)
			}
			if tr.RootHashHex() != root {
				t.Fatalf("root hash %s, veritysetup %s", tr.RootHashHex(), root)
			}
			want, _ := os.ReadFile(d + ".h")
			if tr.Levels > 0 && !bytes.Equal(tr.Hash, want) {
				t.Fatalf("hash tree differs from veritysetup's (%d vs %d bytes)", len(tr.Hash), len(want))
			}

			// Same device, after the data, with superblock.
			off := int64(len(data))
			root2 := veritysetup(t, d, d, "--hash-offset="+strconv.FormatInt(off, 10), "--salt="+testSalt, "--uuid="+uuid)
			tr2, err := Build(bytes.NewReader(data), off, Options{Salt: salt, Superblock: true, UUID: u})
			if err != nil {
				t.Fatal(err)
			}
			if tr2.RootHashHex() != root2 || root2 != root {
				t.Fatalf("with superblock: root hash %s, veritysetup %s", tr2.RootHashHex(), root2)
			}
			all, _ := os.ReadFile(d)
			if !bytes.Equal(all[:off], data) {
				t.Fatal("veritysetup changed the data")
			}
			got := all[off:]
			if !bytes.Equal(tr2.Hash[:len(got)], got) || int64(len(tr2.Hash)) != HashSize(n, true) {
				t.Fatalf("superblock+tree differs from veritysetup's (%d vs %d bytes)", len(tr2.Hash), len(got))
			}
			if tr2.HashStartBlock(off) != uint64(off)/BlockSize+1 {
				t.Fatalf("hash start block %d", tr2.HashStartBlock(off))
			}
			// veritysetup itself must accept what Build wrote.
			f := filepath.Join(dir, fmt.Sprintf("mine%d", n))
			if err := os.WriteFile(f, append(append([]byte{}, data...), tr2.Hash...), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("veritysetup", "verify", f, f, tr2.RootHashHex(), "--hash-offset="+strconv.FormatInt(off, 10)).CombinedOutput(); err != nil {
				t.Fatalf("veritysetup verify of Build's output: %v\n%s", err, out)
			}
		})
	}
}

// TestSaltReproducible: no salt given means one derived from the data:
// the same data gives the same tree, other data another salt.
func TestSaltReproducible(t *testing.T) {
	a := testData(3)
	t1, err := Build(bytes.NewReader(a), int64(len(a)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t2, _ := Build(bytes.NewReader(a), int64(len(a)), Options{})
	if !bytes.Equal(t1.RootHash, t2.RootHash) || !bytes.Equal(t1.Hash, t2.Hash) || len(t1.Salt) != SaltSize {
		t.Fatalf("not reproducible or wrong salt size %d", len(t1.Salt))
	}
	b := bytes.Clone(a)
	b[len(b)-1] ^= 1
	t3, _ := Build(bytes.NewReader(b), int64(len(b)), Options{})
	if bytes.Equal(t1.Salt, t3.Salt) || bytes.Equal(t1.RootHash, t3.RootHash) {
		t.Fatal("a changed byte gave the same salt or root hash")
	}
}

func TestBuildRejects(t *testing.T) {
	for _, size := range []int64{0, 100, BlockSize + 1} {
		if _, err := Build(bytes.NewReader(make([]byte, size)), size, Options{}); err == nil {
			t.Errorf("size %d accepted", size)
		}
	}
	if _, err := Build(bytes.NewReader(make([]byte, BlockSize)), BlockSize, Options{Salt: make([]byte, 257)}); err == nil {
		t.Error("257-byte salt accepted")
	}
	// Short data (reader smaller than size) must fail, not hash zeros.
	if _, err := Build(bytes.NewReader(make([]byte, BlockSize)), 2*BlockSize, Options{Salt: []byte{1}}); err == nil {
		t.Error("short reader accepted")
	}
}
