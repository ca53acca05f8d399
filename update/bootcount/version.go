package bootcount

// VersionCompare orders two version strings as systemd-boot orders boot
// entries: negative when a is older than b, zero when they are equal,
// positive when a is newer. It is a port of strverscmp_improved() from
// systemd 252 (src/fundamental/string-util-fundamental.c), the version of
// Debian's systemd-boot-efi that the disk image boots with: '-' and '.'
// separate segments, a segment after '~' is older than none at all, one
// after '^' newer than one after '-', numeric segments compare as numbers
// and are newer than alphabetic ones, and every other character only
// separates. It works on bytes: a non-ASCII character (several bytes in
// Go, one UTF-16 unit in systemd-boot) is a separator either way, and runs
// of separators are skipped together.
func VersionCompare(a, b string) int {
	i, j := 0, 0
	at := func(s string, k int) byte {
		if k < len(s) {
			return s[k]
		}
		return 0 // the C string's NUL
	}
	for {
		// Drop leading invalid characters.
		for i < len(a) && !versionChar(a[i]) {
			i++
		}
		for j < len(b) && !versionChar(b[j]) {
			j++
		}
		ca, cb := at(a, i), at(b, j)

		// '~' marks a pre-release: the side that has it is older.
		if ca == '~' || cb == '~' {
			if r := cmpBool(ca != '~', cb != '~'); r != 0 {
				return r
			}
			i++
			j++
			ca, cb = at(a, i), at(b, j)
		}

		// With '~' handled, the string with more segments is newer; this
		// compares the NUL with the other side's character as C does.
		if ca == 0 || cb == 0 {
			return cmpInt(int(ca), int(cb))
		}

		// '-' separates version and release: the side with it is older.
		for _, sep := range []byte{'-', '^', '.'} {
			if ca == sep || cb == sep {
				if r := cmpBool(ca != sep, cb != sep); r != 0 {
					return r
				}
				i++
				j++
				ca, cb = at(a, i), at(b, j)
			}
		}

		if isDigit(ca) || isDigit(cb) {
			ea, eb := i, j
			for ea < len(a) && isDigit(a[ea]) {
				ea++
			}
			for eb < len(b) && isDigit(b[eb]) {
				eb++
			}
			// A numeric segment is newer than an empty one.
			if r := cmpBool(ea != i, eb != j); r != 0 {
				return r
			}
			// Leading zeros do not count: 00123 is 123.
			for i < len(a) && a[i] == '0' {
				i++
			}
			for j < len(b) && b[j] == '0' {
				j++
			}
			// The longer number is the larger; equal lengths compare as
			// strings (C's strncmp over the first number's length).
			if r := cmpInt(ea-i, eb-j); r != 0 {
				return r
			}
			if r := strncmp(a[i:], b[j:], ea-i); r != 0 {
				return r
			}
			i, j = ea, eb
		} else {
			ea, eb := i, j
			for ea < len(a) && isAlpha(a[ea]) {
				ea++
			}
			for eb < len(b) && isAlpha(b[eb]) {
				eb++
			}
			if r := strncmp(a[i:], b[j:], min(ea-i, eb-j)); r != 0 {
				return r
			}
			// The longer alphabetic segment is newer: abc < abcde.
			if r := cmpInt(ea-i, eb-j); r != 0 {
				return r
			}
			i, j = ea, eb
		}
	}
}

func versionChar(c byte) bool {
	return isDigit(c) || isAlpha(c) || c == '~' || c == '-' || c == '^' || c == '.'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// strncmp is C's, on strings whose end reads as NUL, reduced to -1, 0, 1
// as systemd's CMP(strncmp(...), 0) does.
func strncmp(a, b string, n int) int {
	for k := 0; k < n; k++ {
		var ca, cb byte
		if k < len(a) {
			ca = a[k]
		}
		if k < len(b) {
			cb = b[k]
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
		if ca == 0 {
			return 0
		}
	}
	return 0
}

// cmpBool is systemd's CMP on two booleans: false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
