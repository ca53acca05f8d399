package devlinks

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReplaceChars: udev_replace_chars, case by case from its source.
func TestReplaceChars(t *testing.T) {
	for _, c := range []struct{ in, extra, want string }{
		{"Amazon Elastic Block Store", "", "Amazon_Elastic_Block_Store"},
		{"Amazon Elastic Block Store", "/ ", "Amazon Elastic Block Store"},
		{"a\tb", allowedInput, "a b"}, // whitespace becomes a space where spaces are allowed
		{"a\tb", "", "a_b"},
		{"a/b", "", "a_b"},
		{"a/b", "/", "a/b"},
		{"#+-.:=@_", "", "#+-.:=@_"},
		{"a$b%c?d,e", "", "a_b_c_d_e"},
		{"a$b%c?d,e", allowedInput, "a$b%c?d,e"},
		{`a\x20b`, "", `a\x20b`}, // hex escapes are kept
		{`a\b`, "", "a_b"},
		{"caf\u00e9", "", "caf\u00e9"}, // valid UTF-8 is kept
		{"\u65e5\u672c", "", "\u65e5\u672c"},
		{"a\xffb", "", "a_b"},           // invalid UTF-8 is not
		{"a\xc3", "", "a_"},             // truncated sequence
		{"a\xed\xa0\x80b", "", "a___b"}, // a surrogate
		{"a\xef\xb7\x90b", "", "a___b"}, // U+FDD0, a noncharacter
		{"a\xef\xbf\xbeb", "", "a___b"}, // U+FFFE
		{"a\xc0\xafb", "", "a__b"},      // overlong '/'
	} {
		if got := replaceChars(c.in, c.extra); got != c.want {
			t.Errorf("replaceChars(%q, %q) = %q, want %q", c.in, c.extra, got, c.want)
		}
	}
}

// TestReplaceWhitespace: udev_replace_whitespace.
func TestReplaceWhitespace(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"QEMU NVMe Ctrl", "QEMU_NVMe_Ctrl"},
		{"  lead  and   trail  ", "lead_and_trail"},
		{"a\t\n b", "a_b"},
		{"\vx", "_x"}, // leading \v is not in WHITESPACE, but isspace()
		{"", ""},
		{"   ", ""},
	} {
		if got := replaceWhitespace(c.in); got != c.want {
			t.Errorf("replaceWhitespace(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestLinks is the escaping table: what udev makes of model and serial
// as sysfs shows them (newline included), worked out from its rules and
// source for each case.
func TestLinks(t *testing.T) {
	const ebsWWID = "nvme.1d0f-766f6c30313233343536373839616263646566-416d617a6f6e20456c617374696320426c6f636b2053746f7265-00000001\n"
	for _, c := range []struct {
		name string
		d    Device
		want []string
	}{
		{"EBS volume", Device{Name: "nvme1n1", Model: "Amazon Elastic Block Store\n", Serial: "vol0123456789abcdef0\n", NSID: "1\n", WWID: ebsWWID, EC2Name: "xvdba"}, []string{
			"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0",
			"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0_1",
			"disk/by-id/nvme-" + strings.TrimSpace(ebsWWID),
			"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0-ns-1",
			"xvdba",
		}},
		{"EBS partition", Device{Name: "nvme1n1p2", Model: "Amazon Elastic Block Store\n", Serial: "vol0123456789abcdef0\n", NSID: "1\n", EC2Name: "sdf"}, []string{
			"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0-part2",
			"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0_1-part2",
			"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0-ns-1-part2",
			"sdf2",
		}},
		{"QEMU", Device{Name: "nvme0n1", Model: "QEMU NVMe Ctrl\n", Serial: "berth-data1\n"}, []string{
			"disk/by-id/nvme-QEMU_NVMe_Ctrl_berth-data1",
			"disk/by-id/nvme-QEMU_NVMe_Ctrl_berth-data1-ns-1",
		}},
		{"runs of spaces and trailing spaces", Device{Name: "nvme0n1", Model: "Big  Disk   \n", Serial: "S 1  \n"}, []string{
			"disk/by-id/nvme-Big__Disk_S_1", // escaped: one '_' per space
			"disk/by-id/nvme-Big_Disk_S_1",  // compat: runs folded
			"disk/by-id/nvme-Big_Disk_S_1-ns-1",
		}},
		{"leading space", Device{Name: "nvme0n1", Model: " Lead\n", Serial: "X\n"}, []string{
			"disk/by-id/nvme-_Lead_X",
			"disk/by-id/nvme-Lead_X",
			"disk/by-id/nvme-Lead_X-ns-1",
		}},
		{"slash: no compat link, no directory", Device{Name: "nvme0n1", Model: "RAID/1 Disk\n", Serial: "S1\n"}, []string{
			"disk/by-id/nvme-RAID_1_Disk_S1",
		}},
		{"non-ASCII kept, invalid bytes replaced", Device{Name: "nvme0n1", Model: "Disque \u00e9t\u00e9\n", Serial: "s\xff1\n"}, []string{
			"disk/by-id/nvme-Disque_\u00e9t\u00e9_s_1",
			"disk/by-id/nvme-Disque_\u00e9t\u00e9_s_1-ns-1",
		}},
		{"tab and $ in the model", Device{Name: "nvme0n1", Model: "A\tB$C\n", Serial: "1\n"}, []string{
			"disk/by-id/nvme-A_B_C_1",
			"disk/by-id/nvme-A_B_C_1-ns-1",
		}},
		{"no model: only the wwid", Device{Name: "nvme0n1", Model: "\n", Serial: "S\n", WWID: "eui.0025388b71b0a1c2\n"}, []string{
			"disk/by-id/nvme-eui.0025388b71b0a1c2",
		}},
		{"multipath path device: none", Device{Name: "nvme0c0n1", Model: "M\n", Serial: "S\n"}, nil},
	} {
		var got []string
		for _, l := range Links(c.d) {
			if l.Target != c.d.Name {
				t.Errorf("%s: link %s targets %s, want %s", c.name, l.Name, l.Target, c.d.Name)
			}
			got = append(got, l.Name)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: links\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
}

// TestLinkSetSharedName: two namespaces of one controller share the
// model_serial link; the first by number keeps it, whatever the input
// order, and nvme2 sorts before nvme10.
func TestLinkSetSharedName(t *testing.T) {
	a := Device{Name: "nvme10n1", Model: "M\n", Serial: "S\n", NSID: "1\n"}
	b := Device{Name: "nvme2n2", Model: "M\n", Serial: "S\n", NSID: "2\n"}
	for _, devs := range [][]Device{{a, b}, {b, a}} {
		got := map[string]string{}
		for _, l := range LinkSet(devs) {
			got[l.Name] = l.Target
		}
		if got["disk/by-id/nvme-M_S"] != "nvme2n2" || got["disk/by-id/nvme-M_S_1"] != "nvme10n1" || got["disk/by-id/nvme-M_S_2"] != "nvme2n2" {
			t.Errorf("LinkSet = %v", got)
		}
	}
}

// FuzzLinks: whatever a controller reports, every link is one name in
// disk/by-id (or /dev itself), with no whitespace, no '/', no NUL, and
// only the bytes udev lets through.
func FuzzLinks(f *testing.F) {
	f.Add("Amazon Elastic Block Store\n", "vol0123456789abcdef0\n", "1\n", "nvme.1d0f-76\n", 2)
	f.Add(" a/b\t$ \xff", "..", "", "../x", 0)
	f.Fuzz(func(t *testing.T, model, serial, nsid, wwid string, part int) {
		name := "nvme3n1"
		if part > 0 && part < 1000 {
			name += "p" + strings.Repeat("1", part%4)
		}
		for _, l := range Links(Device{Name: name, Model: model, Serial: serial, NSID: nsid, WWID: wwid}) {
			base, ok := strings.CutPrefix(l.Name, "disk/by-id/nvme-")
			if !ok {
				t.Fatalf("link %q outside disk/by-id/nvme-", l.Name)
			}
			if base == "" || strings.ContainsAny(base, "/ \t\n\r\v\f\x00") || !utf8.ValidString(base) {
				t.Fatalf("link %q from model %q serial %q", l.Name, model, serial)
			}
			for i := 0; i < len(base); i++ {
				if c := base[i]; c < 0x80 && !allowedForDevnode(c, "") && c != '\\' {
					t.Fatalf("link %q keeps %q", l.Name, c)
				}
			}
		}
	})
}
