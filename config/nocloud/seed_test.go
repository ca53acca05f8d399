package nocloud

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMetaDataRefusals(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"hostname a mapping", "instance-id: x\nlocal-hostname:\n  name: a\n",
			"meta-data: line 3: local-hostname: want a hostname, got a mapping"},
		{"hostname a list", "local-hostname: [a, b]\n",
			"meta-data: line 1: local-hostname: want a hostname, got a list"},
		{"instance-id a list", "instance-id: [1]\n",
			"meta-data: line 1: instance-id: want a string, got a list"},
		{"bad hostname", "local-hostname: node_1\n",
			`meta-data: line 1: local-hostname: "node_1" is not a hostname: label "node_1" has '_'; only letters, digits and '-' are allowed`},
		{"hostname too long", "local-hostname: " + strings.Repeat("a.", 40) + "a\n",
			`meta-data: line 1: local-hostname: "` + strings.Repeat("a.", 40) + `a" is not a hostname: 81 characters, more than the kernel's 64`},
		{"control character in instance-id", "instance-id: \"iid\\nlocal-hostname: evil\"\n",
			`meta-data: line 1: instance-id: "iid\nlocal-hostname: evil" has a control character (U+000A) at byte 3; control characters and line breaks are not allowed`},
		{"not a mapping", "- instance-id: x\n",
			"meta-data: line 1: want a mapping of keys (instance-id: ..., local-hostname: ...), got a list"},
		{"repeated key", "local-hostname: a\nlocal-hostname: b\n",
			"meta-data: line 2: local-hostname: key repeated (first at line 1); YAML keeps only the last, so the first would be lost"},
		{"invalid YAML", "instance-id: \"x\n",
			"meta-data: invalid YAML: line 2: found unexpected end of stream"},
		{"too large", "instance-id: x\n#" + strings.Repeat("x", MaxFileSize),
			"meta-data: 65552 bytes, over the 65536-byte limit (nocloud.MaxFileSize)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, _, err := ParseMetaData([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", md)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
			if md != (MetaData{}) {
				t.Errorf("meta-data returned with the error: %+v", md)
			}
		})
	}
}

// writeSeed makes a seed directory holding files.
func writeSeed(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRead(t *testing.T) {
	ud := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
	dir := writeSeed(t, map[string]string{
		FileUserData:      ud,
		FileMetaData:      "instance-id: iid-local01\nlocal-hostname: node-1\n",
		FileNetworkConfig: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
		FileVendorData:    "#cloud-config\n",
	})
	s, err := Read(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if string(s.UserData) != ud {
		t.Errorf("user-data %q, want the file's bytes", s.UserData)
	}
	if s.MetaData != (MetaData{InstanceID: "iid-local01", LocalHostname: "node-1"}) {
		t.Errorf("meta-data %+v", s.MetaData)
	}
	if s.Network == nil || len(s.Network.Ethernets) != 1 || s.Network.Ethernets[0].ID != "eth0" || !s.Network.Ethernets[0].DHCP4 {
		t.Errorf("network %+v", s.Network)
	}
	want := []Problem{{File: FileVendorData, Message: "ignored: berth reads user-data only"}}
	if !reflect.DeepEqual(s.Warnings, want) {
		t.Errorf("warnings %+v, want %+v", s.Warnings, want)
	}
}

func TestReadWithoutNetworkConfig(t *testing.T) {
	s, err := Read(os.DirFS(writeSeed(t, map[string]string{FileUserData: "", FileMetaData: ""})))
	if err != nil {
		t.Fatal(err)
	}
	if s.Network != nil || s.MetaData != (MetaData{}) || len(s.UserData) != 0 || len(s.Warnings) != 0 {
		t.Errorf("seed %+v, want an empty one", s)
	}
}

func TestReadRefusals(t *testing.T) {
	const md = "instance-id: x\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		dirs  []string
		want  string
	}{
		{"no user-data", map[string]string{FileMetaData: md}, nil,
			"user-data: missing: a NoCloud seed holds user-data and meta-data (meta-data may be empty)"},
		{"no meta-data", map[string]string{FileUserData: "x"}, nil,
			"meta-data: missing: a NoCloud seed holds user-data and meta-data (meta-data may be empty)"},
		{"bad meta-data", map[string]string{FileUserData: "x", FileMetaData: "local-hostname: [a]\n"}, nil,
			"meta-data: line 1: local-hostname: want a hostname, got a list"},
		{"bad network-config", map[string]string{FileUserData: "x", FileMetaData: md, FileNetworkConfig: "network:\n  version: 2\n  bonds: {}\n"}, nil,
			"network-config: line 3: network.bonds: not supported (berth configures ethernets only)"},
		{"network-config a directory", map[string]string{FileUserData: "x", FileMetaData: md}, []string{FileNetworkConfig},
			"network-config: is a directory; want a file"},
		{"user-data too large", map[string]string{FileUserData: strings.Repeat("x", MaxUserDataSize+1), FileMetaData: md}, nil,
			"user-data: over the 4194304-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeSeed(t, tc.files)
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Read(os.DirFS(dir))
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if s != nil {
				t.Errorf("a seed returned with the error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestReadIOError(t *testing.T) {
	_, err := Read(os.DirFS(filepath.Join(t.TempDir(), "absent")))
	// The seed's root is missing: user-data is the first file asked for.
	if err == nil || !strings.HasPrefix(err.Error(), "user-data: missing") {
		t.Errorf("error %v", err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		t.Errorf("a missing file came back as an I/O error: %v", err)
	}

	// A file that cannot be opened (a symbolic link to itself) is an I/O
	// error naming the file, not a missing one.
	dir := writeSeed(t, map[string]string{FileUserData: "x"})
	if err := os.Symlink(FileMetaData, filepath.Join(dir, FileMetaData)); err != nil {
		t.Fatal(err)
	}
	_, err = Read(os.DirFS(dir))
	if err == nil || !strings.HasPrefix(err.Error(), "reading the seed's meta-data: ") || !errors.As(err, &pe) {
		t.Errorf("error %v, want an I/O error naming meta-data", err)
	}
}

func TestIsSeedLabel(t *testing.T) {
	for label, want := range map[string]bool{"cidata": true, "CIDATA": true, "CiData": false, "cidata ": false, "config-2": false, "": false} {
		if got := IsSeedLabel(label); got != want {
			t.Errorf("IsSeedLabel(%q) = %v, want %v", label, got, want)
		}
	}
}
