package publish

import (
	"strings"
	"testing"
)

// FuzzParseManifest feeds arbitrary manifests (outside input): no panic,
// and an accepted one names a disk beside it with a SHA-256 and an
// architecture EC2 knows.
func FuzzParseManifest(f *testing.F) {
	sha := strings.Repeat("0f", 32)
	f.Add(`{"berthVersion":"v1","arch":"arm64","disk":{"path":"disk.raw","size":1048576,"sha256":"` + sha + `"}}`)
	f.Add(`{"berthVersion":"v1","disk":{"path":"../x","size":1,"sha256":"` + sha + `"}}`)
	f.Add(`{"disk":null}`)
	f.Fuzz(func(t *testing.T, data string) {
		img, err := ParseManifest([]byte(data), "dir/manifest.json")
		if err != nil {
			return
		}
		if !strings.HasPrefix(img.DiskPath, "dir/") || strings.Contains(img.DiskPath[4:], "/") || len(img.SHA256) != 64 || img.Size <= 0 || img.Version == "" {
			t.Fatalf("accepted %+v from %s", img, data)
		}
		if _, err := EC2Architecture(img.Arch); err != nil {
			t.Fatal(err)
		}
		if n := AMIName(img); len(n) < 3 || len(n) > 128 || nameUnsafe.MatchString(n) {
			t.Fatalf("AMI name %q from version %q", n, img.Version)
		}
	})
}

// FuzzNewPlan checks the plan against a byte map: every block holding a
// data byte is sent, every other block skipped, in order.
func FuzzNewPlan(f *testing.F) {
	f.Add(int64(5*BlockSize+3), int64(10), int64(100), int64(BlockSize*2), int64(7))
	f.Fuzz(func(t *testing.T, size, off1, len1, off2, len2 int64) {
		if size <= 0 || size > 64*BlockSize {
			return
		}
		ext := []Extent{{off1, len1}, {off2, len2}}
		p, err := NewPlan(size, ext)
		if err != nil {
			return
		}
		data := map[int32]bool{}
		for _, e := range ext {
			for b := e.Off; b < e.Off+e.Len; b++ {
				data[int32(b/BlockSize)] = true
			}
		}
		if len(p.Send) != len(data) {
			t.Fatalf("sent %v for extents %v", p.Send, ext)
		}
		for i, idx := range p.Send {
			if !data[idx] || (i > 0 && p.Send[i-1] >= idx) {
				t.Fatalf("sent %v for extents %v", p.Send, ext)
			}
		}
	})
}
