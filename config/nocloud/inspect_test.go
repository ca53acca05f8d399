package nocloud

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/internal/golden"
	"github.com/berth-node/berth/network"
)

// inspectText is what a golden file records of one seed: Describe, then
// every problem as `berth check` prints it, then the user-data source.
func inspectText(in *Inspection) []byte {
	var b bytes.Buffer
	b.Write(in.Describe())
	b.WriteString("\nproblems:\n")
	for _, p := range in.NodeConfigProblems() {
		b.WriteString("  " + p.String() + "\n")
	}
	b.WriteString("\nsources:\n")
	for _, s := range in.Sources() {
		b.WriteString("  " + s.Name + " (" + strconv.Itoa(len(s.Data)) + " bytes)\n")
	}
	if in.Network != nil {
		b.WriteString("\nnode-ip: " + in.NodeIP() + "\nnameservers: " + strings.Join(in.Nameservers(), " ") + "\n")
	}
	return b.Bytes()
}

// TestInspectGolden inspects every seed directory under testdata/seed
// and compares what check and render would show of it with
// testdata/seed/NAME.golden.txt.
func TestInspectGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/seed/*")
	if err != nil {
		t.Fatal(err)
	}
	var seeds int
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		seeds++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in, err := InspectDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if in.Dir != dir {
				t.Errorf("Dir %q, want %q", in.Dir, dir)
			}
			golden.Check(t, dir+".golden.txt", inspectText(in), *update)
		})
	}
	if seeds < 8 {
		t.Fatalf("%d seed directories under testdata/seed; the glob looks wrong", seeds)
	}
}

// TestInspectGoodSeed: a seed with a NodeConfig, meta-data and a static
// version 2 network-config has no problems, and what it decides is the
// network package's Config that NetworkConfig makes of it.
func TestInspectGoodSeed(t *testing.T) {
	dir := "testdata/seed/static-v2"
	in, err := InspectDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Errors) != 0 || len(in.Warnings) != 0 {
		t.Fatalf("problems in a good seed: %v %v", in.Errors, in.Warnings)
	}
	ud, err := os.ReadFile(filepath.Join(dir, FileUserData))
	if err != nil {
		t.Fatal(err)
	}
	want := []nodeconfig.Source{{Name: filepath.Join(dir, FileUserData), Data: ud}}
	if got := in.Sources(); !reflect.DeepEqual(got, want) {
		t.Errorf("sources %+v", got)
	}
	if in.Network == nil || in.Network.Mode != network.ModeStatic || in.Network.Interface != "52:54:00:12:34:56" ||
		in.Network.Address.String() != "192.0.2.10/24" || in.Network.Gateway.String() != "192.0.2.1" || in.Network.MTU != 9000 {
		t.Errorf("network %+v", in.Network)
	}
	if in.NodeIP() != "192.0.2.10" || !reflect.DeepEqual(in.Nameservers(), []string{"192.0.2.53", "192.0.2.54"}) {
		t.Errorf("node IP %q, nameservers %q", in.NodeIP(), in.Nameservers())
	}
	if in.Seed.MetaData != (MetaData{InstanceID: "iid-lab-node-1", LocalHostname: "lab-node-1"}) {
		t.Errorf("meta-data %+v", in.Seed.MetaData)
	}
}

// TestInspectAgreesWithRead: what Read refuses, Inspect refuses, naming
// the same problem; Inspect refuses more only where its doc says so.
func TestInspectAgreesWithRead(t *testing.T) {
	const ud, md = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n", "instance-id: x\n"
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		// more is the message Inspect alone gives, if any.
		more string
	}{
		{"good", fstest.MapFS{FileUserData: {Data: []byte(ud)}, FileMetaData: {Data: []byte(md)}}, ""},
		{"no user-data", fstest.MapFS{FileMetaData: {Data: []byte(md)}}, ""},
		{"no meta-data", fstest.MapFS{FileUserData: {Data: []byte(ud)}}, ""},
		{"bad meta-data", fstest.MapFS{FileUserData: {Data: []byte(ud)}, FileMetaData: {Data: []byte("local-hostname: [a]\n")}}, ""},
		{"network-config a directory", fstest.MapFS{FileUserData: {Data: []byte(ud)}, FileMetaData: {Data: []byte(md)}, FileNetworkConfig + "/x": {}}, ""},
		{"empty user-data", fstest.MapFS{FileUserData: {Data: []byte(" \n")}, FileMetaData: {Data: []byte(md)}},
			"user-data: empty: a node booted from this seed has no NodeConfig"},
		{"two interfaces", fstest.MapFS{FileUserData: {Data: []byte(ud)}, FileMetaData: {Data: []byte(md)},
			FileNetworkConfig: {Data: []byte("version: 2\nethernets:\n  a: {dhcp4: true}\n  b: {dhcp4: true}\n")}},
			"network-config: line 4: ethernets.b: 2 interfaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rerr := Read(tc.files)
			in := Inspect(tc.files, "")
			var got []string
			for _, p := range in.Errors {
				got = append(got, p.Error())
			}
			switch {
			case rerr != nil:
				var ps Problems
				if !errors.As(rerr, &ps) {
					t.Fatalf("Read: %v", rerr)
				}
				for _, p := range ps {
					if !contains(got, p.Error()) {
						t.Errorf("Read refuses %q, Inspect does not: %q", p.Error(), got)
					}
				}
			case tc.more != "":
				if len(got) != 1 || !strings.HasPrefix(got[0], tc.more) {
					t.Errorf("Inspect: %q, want one error starting %q", got, tc.more)
				}
			case len(got) != 0:
				t.Errorf("Read takes the seed, Inspect refuses it: %q", got)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestInspectEveryFile: one run names the problems of every file, not
// the first file's only; a file with errors leaves its part zero.
func TestInspectEveryFile(t *testing.T) {
	in, err := InspectDir("testdata/seed/all-bad")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, p := range in.Errors {
		files[p.File] = true
	}
	if !files[FileUserData] || !files[FileMetaData] || !files[FileNetworkConfig] {
		t.Errorf("errors name %v, want all three files: %v", files, in.Errors)
	}
	if in.Seed.UserData != nil || in.Seed.MetaData != (MetaData{}) || in.Network != nil || in.Sources() != nil {
		t.Errorf("parts kept beside their errors: %+v", in)
	}
	// Warnings of a file with errors are still reported.
	if len(in.Warnings) != 1 || in.Warnings[0].Path != "public-keys" {
		t.Errorf("warnings %v, want meta-data's public-keys", in.Warnings)
	}
}

func TestInspectDirRefusals(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	if _, err := InspectDir(missing); err == nil || !strings.HasPrefix(err.Error(), "seed "+missing+": ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
	file := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := InspectDir(file); err == nil || err.Error() != "seed "+file+": not a directory; give the directory holding user-data, meta-data and network-config (a mounted cidata volume, or a copy of its files)" {
		t.Errorf("a file: %v", err)
	}
}

// TestInspectIOError: a file that cannot be read is an error naming it,
// and the other files are still read.
func TestInspectIOError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileUserData), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(FileMetaData, filepath.Join(dir, FileMetaData)); err != nil {
		t.Fatal(err)
	}
	in := Inspect(os.DirFS(dir), dir)
	if len(in.Errors) != 1 || in.Errors[0].File != FileMetaData || !strings.HasPrefix(in.Errors[0].Message, "reading the seed's meta-data: ") {
		t.Errorf("errors %v", in.Errors)
	}
	if string(in.Seed.UserData) != "x" {
		t.Errorf("user-data %q not read beside the bad meta-data", in.Seed.UserData)
	}
	ps := in.NodeConfigProblems()
	if len(ps) != 1 || ps[0].Source != filepath.Join(dir, FileMetaData) || ps[0].Severity != nodeconfig.SeverityError {
		t.Errorf("problems %+v", ps)
	}
}

// FuzzInspect feeds arbitrary files to Inspect: it must not panic, every
// problem names a seed file, a file with errors leaves its part zero, and
// Describe shows whatever was read.
func FuzzInspect(f *testing.F) {
	for _, dir := range []string{"static-v2", "dhcp-v1", "bad-network-config", "all-bad"} {
		read := func(name string) []byte {
			b, _ := os.ReadFile(filepath.Join("testdata", "seed", dir, name))
			return b
		}
		f.Add(read(FileUserData), read(FileMetaData), read(FileNetworkConfig))
	}
	f.Fuzz(func(t *testing.T, ud, md, nc []byte) {
		fsys := fstest.MapFS{FileUserData: {Data: ud}, FileMetaData: {Data: md}, FileNetworkConfig: {Data: nc}}
		in := Inspect(fsys, "seed")
		for _, p := range append(append([]Problem(nil), in.Errors...), in.Warnings...) {
			switch p.File {
			case FileUserData, FileMetaData, FileNetworkConfig:
			default:
				t.Fatalf("problem names no seed file: %+v", p)
			}
		}
		if in.failed(FileNetworkConfig) && in.Network != nil {
			t.Fatal("a network config kept beside network-config's errors")
		}
		if in.failed(FileUserData) != (in.Sources() == nil) {
			t.Fatalf("user-data errors %v, sources %v", in.failed(FileUserData), in.Sources())
		}
		if d := in.Describe(); !bytes.HasPrefix(d, []byte("seed seed:\n")) {
			t.Fatalf("Describe: %q", d)
		}
	})
}
