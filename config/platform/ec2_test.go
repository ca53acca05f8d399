package platform

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// unreadable marks a file the test makes unreadable: a directory stands
// where the file should be, which fails to read as root too.
const unreadable = "\x00unreadable"

// sysTree writes files (paths under the sysfs root) into a directory.
func sysTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if content == unreadable {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The DMI values are as the kernel shows them on each machine (a newline
// at the end of each): an m5.large (Nitro), a t2.micro (Xen HVM), QEMU's
// q35 machine with SeaBIOS, and a Dell server.
var (
	nitro = map[string]string{
		FileSysVendor:      "Amazon EC2\n",
		FileBIOSVendor:     "Amazon EC2\n",
		FileBIOSVersion:    "1.0\n",
		FileProductName:    "m5.large\n",
		FileProductVersion: "\n",
		FileBoardAssetTag:  "i-0123456789abcdef0\n",
		FileProductUUID:    "ec2e1916-9099-7caf-fd21-012345abcdef\n",
	}
	xen = map[string]string{
		FileSysVendor:      "Xen\n",
		FileBIOSVendor:     "Xen\n",
		FileBIOSVersion:    "4.11.amazon\n",
		FileProductName:    "HVM domU\n",
		FileProductVersion: "4.11.amazon\n",
		FileBoardAssetTag:  "\n",
		FileProductUUID:    "ec2f8a7b-3c4d-5e6f-7a8b-9c0d1e2f3a4b\n",
		FileHypervisorUUID: "ec2f8a7b-3c4d-5e6f-7a8b-9c0d1e2f3a4b\n",
	}
	qemu = map[string]string{
		FileSysVendor:      "QEMU\n",
		FileBIOSVendor:     "SeaBIOS\n",
		FileBIOSVersion:    "1.16.3-debian-1.16.3-2\n",
		FileProductName:    "Standard PC (Q35 + ICH9, 2009)\n",
		FileProductVersion: "pc-q35-8.2\n",
		FileProductUUID:    "5a1c2b3d-4e5f-6071-8293-a4b5c6d7e8f9\n",
	}
)

// with returns m with changes applied; an empty value removes the file.
func with(m map[string]string, changes ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i+1] == "" {
			delete(out, changes[i])
		} else {
			out[changes[i]] = changes[i+1]
		}
	}
	return out
}

func TestDetectEC2(t *testing.T) {
	all := map[string]EC2{}
	for _, tc := range []struct {
		name       string
		files      map[string]string
		noRoot     bool
		verdict    Verdict
		reason     string
		instanceID string
	}{
		{name: "nitro", files: nitro, verdict: Yes, instanceID: "i-0123456789abcdef0",
			reason: `class/dmi/id/sys_vendor is "Amazon EC2"; class/dmi/id/board_asset_tag is "i-0123456789abcdef0"; class/dmi/id/bios_vendor is "Amazon EC2"; class/dmi/id/product_uuid is "ec2e1916-9099-7caf-fd21-012345abcdef"`},
		{name: "nitro, asset tag alone", files: map[string]string{FileBoardAssetTag: "i-0abc1234\n"}, verdict: Yes, instanceID: "i-0abc1234",
			reason: `class/dmi/id/board_asset_tag is "i-0abc1234"`},
		{name: "xen", files: xen, verdict: Yes,
			reason: `class/dmi/id/bios_version is "4.11.amazon"; class/dmi/id/product_version is "4.11.amazon"; hypervisor/uuid is "ec2f8a7b-3c4d-5e6f-7a8b-9c0d1e2f3a4b"; class/dmi/id/product_uuid is "ec2f8a7b-3c4d-5e6f-7a8b-9c0d1e2f3a4b"`},
		{name: "xen paravirtual, no DMI", files: map[string]string{FileHypervisorUUID: "EC2A1B2C-0000-1111-2222-333344445555\n"}, verdict: Yes,
			reason: `hypervisor/uuid is "EC2A1B2C-0000-1111-2222-333344445555"`},
		{name: "xen, UUID in the other byte order", files: with(xen, FileHypervisorUUID, "", FileBIOSVersion, "4.2\n", FileProductVersion, "4.2\n", FileProductUUID, "45E12AEC-DCD1-B213-94ED-012345ABCDEF\n"), verdict: Yes,
			reason: `class/dmi/id/product_uuid is "45E12AEC-DCD1-B213-94ED-012345ABCDEF"`},
		{name: "qemu", files: qemu, verdict: No,
			reason: `sys_vendor is "QEMU" and no file says EC2`},
		{name: "qemu with a UUID that starts with ec2", files: with(qemu, FileProductUUID, "ec212345-0000-4000-8000-000000000000\n"), verdict: No,
			reason: `sys_vendor is "QEMU" and no file says EC2`},
		{name: "bare metal", files: map[string]string{FileSysVendor: "Dell Inc.\n", FileBIOSVendor: "Dell Inc.\n", FileProductName: "PowerEdge R650\n", FileBoardAssetTag: "ASSET-0042\n"}, verdict: No,
			reason: `sys_vendor is "Dell Inc." and no file says EC2`},
		{name: "sys_vendor unreadable", files: with(qemu, FileSysVendor, unreadable), verdict: Unknown,
			reason: "could not read class/dmi/id/sys_vendor, which could say EC2"},
		{name: "qemu, bios_version unreadable", files: with(qemu, FileBIOSVersion, unreadable), verdict: Unknown,
			reason: "could not read class/dmi/id/bios_version, which could say EC2"},
		{name: "qemu, product_uuid unreadable (does not count)", files: with(qemu, FileProductUUID, unreadable), verdict: No,
			reason: `sys_vendor is "QEMU" and no file says EC2`},
		{name: "nitro, other files unreadable", files: with(nitro, FileBIOSVersion, unreadable, FileProductUUID, unreadable), verdict: Yes, instanceID: "i-0123456789abcdef0",
			reason: `class/dmi/id/sys_vendor is "Amazon EC2"; class/dmi/id/board_asset_tag is "i-0123456789abcdef0"; class/dmi/id/bios_vendor is "Amazon EC2"`},
		{name: "no dmi directory", files: map[string]string{"kernel/mm/x": "1\n"}, verdict: Unknown,
			reason: "no DMI tables (class/dmi/id: no such file or directory) and no hypervisor/uuid"},
		{name: "dmi without sys_vendor", files: map[string]string{FileBIOSVendor: "EDK II\n"}, verdict: Unknown,
			reason: "DMI has no sys_vendor"},
		{name: "no sysfs at all", noRoot: true, verdict: Unknown,
			reason: "no DMI tables (class/dmi/id: no such file or directory) and no hypervisor/uuid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "absent")
			if !tc.noRoot {
				root = sysTree(t, tc.files)
			}
			got := DetectEC2(os.DirFS(root))
			all[tc.name] = got
			if got.Verdict != tc.verdict || got.Reason != tc.reason || got.InstanceID != tc.instanceID {
				t.Errorf("got %s (%s) instance %q\nwant %s (%s) instance %q", got.Verdict, got.Reason, got.InstanceID, tc.verdict, tc.reason, tc.instanceID)
			}
			if len(got.Evidence) != 8 {
				t.Errorf("%d files in the evidence, want all 8 read", len(got.Evidence))
			}
			for _, e := range got.Evidence {
				want, present := tc.files[e.File]
				switch {
				case want == unreadable:
					if e.Err == "" || e.Value != "" {
						t.Errorf("%s: unreadable, yet %+v", e.File, e)
					}
				case !present:
					if !e.Missing || e.Err != "" {
						t.Errorf("%s: absent, yet %+v", e.File, e)
					}
				case e.Missing || e.Err != "":
					t.Errorf("%s: present, yet %+v", e.File, e)
				}
			}
		})
	}
	// The whole answers, evidence included, as the boot report will show
	// them.
	got, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/ec2.golden.json", append(got, '\n'), *update)
}

func TestEC2UUID(t *testing.T) {
	for u, want := range map[string]bool{
		"ec2e1916-9099-7caf-fd21-012345abcdef": true,
		"EC2E1916-9099-7CAF-FD21-012345ABCDEF": true,
		"45E12AEC-DCD1-B213-94ED-012345ABCDEF": true, // byte-swapped
		"5a1c2b3d-4e5f-6071-8293-a4b5c6d7e8f9": false,
		"2aec0000-0000-0000-0000-000000000000": false,
		"ec":                                   false,
		"zzzzzzzz-0000":                        false,
	} {
		if got := ec2UUID(u); got != want {
			t.Errorf("ec2UUID(%q) = %v, want %v", u, got, want)
		}
	}
}
