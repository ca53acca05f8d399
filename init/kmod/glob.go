package kmod

// Glob reports whether s matches the shell pattern as fnmatch(3) with no
// flags does, which is what kmod uses for modules.alias: '*' and '?' match
// any byte, '/' included (path.Match would stop at '/'), "[...]" is a byte
// class ("!" or "^" negates, a-z ranges), and '\' escapes. A malformed class
// matches a literal '['. It backtracks to the last '*' only, so it runs in
// O(len(pattern)*len(s)) whatever the pattern: patterns come from a file.
func Glob(pattern, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			case '[':
				if sx < len(s) {
					if ok, n, valid := matchClass(pattern[px:], s[sx]); valid {
						if ok {
							px += n
							sx++
							continue
						}
					} else if s[sx] == '[' {
						px++
						sx++
						continue
					}
				}
			case '\\':
				lit := byte('\\')
				step := 1
				if px+1 < len(pattern) {
					lit, step = pattern[px+1], 2
				}
				if sx < len(s) && s[sx] == lit {
					px += step
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		// Mismatch: let the last '*' swallow one more byte, if there is one.
		if starPx >= 0 && starSx < len(s) {
			starSx++
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}

// matchClass matches b against the class at the start of p (p[0] == '[').
// It returns whether b is in it, the class's length, and whether the class
// is well formed (closed by ']').
func matchClass(p string, b byte) (ok bool, n int, valid bool) {
	i := 1
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate = true
		i++
	}
	first := true
	for i < len(p) {
		c := p[i]
		if c == ']' && !first {
			return ok != negate, i + 1, true
		}
		first = false
		lo := c
		if c == '\\' && i+1 < len(p) {
			i++
			lo = p[i]
		}
		hi := lo
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi = p[i+2]
			if hi == '\\' && i+3 < len(p) {
				i++
				hi = p[i+2]
			}
			i += 2
		}
		if lo <= b && b <= hi {
			ok = true
		}
		i++
	}
	return false, 0, false
}
