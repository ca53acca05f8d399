// Package devlinks makes the /dev links that udev's persistent-storage
// rules give every EKS node, without udev: /dev/disk/by-id/nvme-<model>_<serial>
// (what the EBS CSI driver looks for a volume by), its -part<N> variants,
// and the EC2 block-device name (/dev/xvdba, /dev/sdf) that EBS volumes
// carry in their NVMe identify data, as amazon-ec2-utils' rules make it.
//
// The naming is pure (escape.go, identify.go, links.go): a device's links
// are a function of its sysfs attributes and identify data, tested against
// udev's own escaping. The acting part (sysfs.go, apply.go, run.go) reads
// sysfs, asks the controller for its identify data, makes and removes the
// symlinks, and follows the kernel's uevents; it reconciles the whole set
// on every block event, so a missed or reordered event still ends right
// and links to devices that are gone are removed.
package devlinks

import (
	"strings"
	"unicode/utf8"
)

// The functions below follow systemd's src/udev (udev-util.c,
// udev-format.c, udev-rules.c, device-nodes.c) byte for byte, because a
// link name that differs from udev's in one character is a volume the
// CSI driver cannot find.

// allowedInput is UDEV_ALLOWED_CHARS_INPUT: what $attr{} substitutions
// keep beyond the devnode set.
const allowedInput = "/ $%?,"

// allowedForDevnode is allow_listed_char_for_devnode.
func allowedForDevnode(c byte, extra string) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' ||
		strings.IndexByte("#+-.:=@_", c) >= 0 || strings.IndexByte(extra, c) >= 0
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// validUnichar reports the length of the valid multi-byte UTF-8 character
// at the start of s, or 0: udev's utf8_encoded_valid_unichar, which also
// refuses surrogates, overlong forms and the Unicode noncharacters.
func validUnichar(s string) int {
	r, n := utf8.DecodeRuneInString(s)
	if n <= 1 { // invalid (RuneError, 1) or ASCII
		return 0
	}
	if r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
		return 0
	}
	return n
}

// replaceChars is udev_replace_chars: keep the devnode set, extra, "\x"
// escapes and valid UTF-8; turn whitespace into a space when extra allows
// spaces; everything else becomes '_'.
func replaceChars(s, extra string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == 0:
			// C strings end here; sysfs text and identify strings never
			// hold a NUL, and keeping the bytes after it is the safe reading.
			b[i] = '_'
			i++
		case allowedForDevnode(c, extra):
			i++
		case c == '\\' && i+1 < len(b) && b[i+1] == 'x':
			i += 2
		default:
			if n := validUnichar(string(b[i:])); n > 1 {
				i += n
				continue
			}
			if isSpace(c) && strings.IndexByte(extra, ' ') >= 0 {
				b[i] = ' '
			} else {
				b[i] = '_'
			}
			i++
		}
	}
	return string(b)
}

// replaceWhitespace is udev_replace_whitespace: leading and trailing
// whitespace dropped, each run inside turned into one '_'.
func replaceWhitespace(s string) string {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\r", s[i]) >= 0 {
		i++
	}
	var out []byte
	space := false
	for ; i < len(s); i++ {
		if isSpace(s[i]) {
			space = true
			continue
		}
		if space {
			out = append(out, '_')
			space = false
		}
		out = append(out, s[i])
	}
	return string(out)
}

// attrValue is what a $attr{} substitution yields from a sysfs attribute's
// text: the C string (up to a NUL), trailing whitespace (and the newline)
// dropped, then replaceChars with the input set.
func attrValue(raw string) string {
	raw, _, _ = strings.Cut(raw, "\x00")
	return replaceChars(strings.TrimRight(raw, " \t\n\r"), allowedInput)
}
