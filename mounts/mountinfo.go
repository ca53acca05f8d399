package mounts

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	ID, Parent   int
	Root, Target string
	Options      string
	FSType       string
	Source       string
	SuperOptions string
	// Propagation is the optional fields, space-separated: "shared:1",
	// "master:3", "shared:2 master:1", or "" for a private mount.
	Propagation string
}

// Shared says the mount is in a peer group: mounts made under it propagate
// to its peers (and into containers that mount it Bidirectional).
func (m MountInfo) Shared() bool {
	for _, f := range strings.Fields(m.Propagation) {
		if strings.HasPrefix(f, "shared:") {
			return true
		}
	}
	return false
}

// ParseMountInfo parses the format of /proc/PID/mountinfo (proc(5)), in
// file order, which lists a mount after the mount it sits on.
func ParseMountInfo(r io.Reader) ([]MountInfo, error) {
	var out []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %d: no \" - \" separator: %q", n, line)
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 6 || len(g) < 2 {
			return nil, fmt.Errorf("mountinfo line %d: too few fields: %q", n, line)
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %d: bad mount ids %q %q", n, f[0], f[1])
		}
		m := MountInfo{
			ID: id, Parent: parent,
			Root: unescapeOctal(f[3]), Target: unescapeOctal(f[4]), Options: f[5],
			FSType: g[0], Source: unescapeOctal(g[1]),
		}
		if len(g) > 2 {
			m.SuperOptions = g[2]
		}
		m.Propagation = strings.Join(f[6:], " ")
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo after line %d: %w", n, err)
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline
// and backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// ReadMountInfo reads the calling process's mount table.
func ReadMountInfo() ([]MountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	m, err := ParseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("parsing /proc/self/mountinfo: %w", err)
	}
	return m, nil
}

// TopAt is the mount visible at exactly target: mountinfo lists a mount
// after the one it covers, so the last entry for target is on top.
func TopAt(ms []MountInfo, target string) (MountInfo, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Target == target {
			return ms[i], true
		}
	}
	return MountInfo{}, false
}

// mountedTargets is the set of mount points in a mount table.
func mountedTargets(ms []MountInfo) map[string]bool {
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[m.Target] = true
	}
	return out
}
