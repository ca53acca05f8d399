package main

import (
	"maps"
	"testing"
)

func TestSmapsSplit(t *testing.T) {
	smaps := `00400000-00c08000 r-xp 00000000 00:02 9                                  /init
Size:               8224 kB
Rss:                6560 kB
Pss:                6560 kB
00c08000-014d2000 r--p 00808000 00:02 9                                  /init
Rss:                7144 kB
014d2000-01542000 rw-p 010d2000 00:02 9                                  /init
Rss:                 448 kB
01542000-03589000 rw-p 00000000 00:00 0 
Rss:                 112 kB
3c3f6a000000-3c3f6a800000 rw-p 00000000 00:00 0 
Rss:                5576 kB
7fff589df000-7fff58a00000 rw-p 00000000 00:00 0                          [stack]
Rss:                  12 kB
7fff58a75000-7fff58a77000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   4 kB
VmFlags: rd ex mr mw me sd 
`
	want := map[string]int64{"binaryText": 6560, "binaryRodata": 7144, "binaryData": 448, "anon": 5688, "other": 16, "total": 19856}
	if got := smapsSplit(smaps, "/init"); !maps.Equal(got, want) {
		t.Errorf("smapsSplit = %v, want %v", got, want)
	}
}
