package seedimage

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/sigprobe"
)

// TestWrite makes a seed of each filesystem with the real tools and reads
// it back as a node would find it: sigprobe sees the filesystem and the
// cidata label, and the files are on it (mtools' mtype, isoinfo's -x for
// the Rock Ridge name).
func TestWrite(t *testing.T) {
	files := map[string][]byte{
		"user-data": []byte("#cloud-config\n"),
		"meta-data": []byte("instance-id: iid-1\nlocal-hostname: node-x\n"),
	}
	for _, fs := range []FS{VFAT, ISO9660} {
		t.Run(string(fs), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seed.img")
			if err := Write(context.Background(), path, fs, files); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			head := make([]byte, sigprobe.ReadLen)
			n, err := io.ReadFull(f, head)
			if err != nil && err != io.ErrUnexpectedEOF {
				t.Fatal(err)
			}
			sig := sigprobe.Probe(head[:n])
			if string(sig.Kind) != string(fs) || sig.Label != Label {
				t.Fatalf("sigprobe says %+v, want %s labelled %s", sig, fs, Label)
			}
			var out []byte
			if fs == VFAT {
				out, err = exec.Command("mtype", "-i", path, "::meta-data").CombinedOutput()
			} else {
				out, err = exec.Command("isoinfo", "-R", "-i", path, "-x", "/meta-data").CombinedOutput()
			}
			if err != nil || !strings.Contains(string(out), "local-hostname: node-x") {
				t.Fatalf("meta-data on the %s seed: %v %q", fs, err, out)
			}
		})
	}
	if _, err := ParseFS("ext4"); err == nil {
		t.Error("ParseFS(ext4): no error")
	}
	if err := Write(context.Background(), filepath.Join(t.TempDir(), "x"), VFAT, map[string][]byte{"a/b": nil}); err == nil {
		t.Error("a file name with a slash: no error")
	}
}
