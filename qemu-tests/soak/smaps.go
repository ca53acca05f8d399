package main

import (
	"bufio"
	"strconv"
	"strings"
)

// smapsSplit sums /proc/PID/smaps's Rss by what the pages are: the
// binary's text, read-only data and writable data (mappings of binary,
// the executable's path), anonymous memory (the Go heap, stacks, runtime
// metadata, bss) and everything else ([stack], [vdso], other files), in
// KiB. The binary's pages are file (or, from an initramfs, shmem) pages:
// the kernel maps them in as they run or are read, up to 64 KiB around
// each fault.
func smapsSplit(smaps, binary string) map[string]int64 {
	out := map[string]int64{}
	cat := ""
	sc := bufio.NewScanner(strings.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			// A mapping's header: range perms offset dev inode [path].
			path := ""
			if len(f) >= 6 {
				path = f[5]
			}
			switch {
			case path == binary && f[1][2] == 'x':
				cat = "binaryText"
			case path == binary && f[1][1] == 'w':
				cat = "binaryData"
			case path == binary:
				cat = "binaryRodata"
			case path == "":
				cat = "anon"
			default:
				cat = "other"
			}
			continue
		}
		if len(f) == 3 && f[0] == "Rss:" && f[2] == "kB" && cat != "" {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out[cat] += n
				out["total"] += n
			}
		}
	}
	return out
}
