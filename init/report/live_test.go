package report

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/berth-node/berth/internal/safe"
)

func TestReadLiveCountsThisProcess(t *testing.T) {
	before, err := ReadLive(7)
	if err != nil {
		t.Fatal(err)
	}
	if before.AtMs != 7 || before.RSSKiB <= 0 || before.HeapLiveKiB < 0 || before.Goroutines < 1 || before.FDs < 3 {
		t.Fatalf("ReadLive = %+v: want atMs 7, positive RSS, a goroutine, stdio open", before)
	}
	// The kernel's VmRSS is the sum of its split; Go holds a heap and at
	// least this goroutine's stack.
	if sum := before.RSSAnonKiB + before.RSSFileKiB + before.RSSShmemKiB; sum != before.RSSKiB || before.RSSAnonKiB <= 0 {
		t.Errorf("RSS split anon %d + file %d + shmem %d, want a positive anon and the sum %d", before.RSSAnonKiB, before.RSSFileKiB, before.RSSShmemKiB, before.RSSKiB)
	}
	if before.GoHeapKiB < before.HeapLiveKiB || before.StacksKiB <= 0 {
		t.Errorf("Go's heap %d KiB under the live heap %d KiB, or stacks %d KiB: want heap ≥ live, stacks > 0", before.GoHeapKiB, before.HeapLiveKiB, before.StacksKiB)
	}
	// Files held open and goroutines parked must show. The bounds leave room
	// for the rest of the process: a goroutine of the test before this one
	// may still be ending when "before" is read, so the goroutine check is
	// absolute, and the file count may move by a couple either way.
	const held, parked = 8, 64
	for range held {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	stop := make(chan struct{})
	defer close(stop)
	var started sync.WaitGroup
	for range parked {
		started.Add(1)
		safe.Go(slog.New(slog.DiscardHandler), "parked", func() { started.Done(); <-stop }, nil)
	}
	started.Wait()
	after, err := ReadLive(8)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.FDs - before.FDs; d < held-2 || d > held+2 {
		t.Errorf("FDs with %d more files open: %d, want about %d", held, after.FDs, before.FDs+held)
	}
	if after.Goroutines < parked+1 {
		t.Errorf("goroutines with %d parked: %d, want at least %d", parked, after.Goroutines, parked+1)
	}
}

func TestParseMemKiB(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    MemKiB
		wantErr bool
	}{
		{in: "Name:\tberth\nVmRSS:\t  16480 kB\nRssAnon:\t    9000 kB\nRssFile:\t    7400 kB\nRssShmem:\t      80 kB\n", want: MemKiB{RSS: 16480, Anon: 9000, File: 7400, Shmem: 80}},
		// Before Linux 4.5 there is no split.
		{in: "VmRSS:\t 100 kB\n", want: MemKiB{RSS: 100}},
		{in: "RssAnon:\t 100 kB\n", wantErr: true},
		{in: "VmRSS:\t 100 MB\n", wantErr: true},
		{in: "VmRSS:\t 100 kB\nRssFile:\t -3 kB\n", wantErr: true},
		// A longer key with a known prefix is not the key.
		{in: "VmRSS: 5 kB\nRssAnonX: 9 kB\n", want: MemKiB{RSS: 5}},
	} {
		got, err := ParseMemKiB(strings.NewReader(tc.in))
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("ParseMemKiB(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseMemKiB: /proc text; must not panic, and never negative.
func FuzzParseMemKiB(f *testing.F) {
	f.Add("VmRSS:\t 100 kB\nRssAnon:\t 60 kB\nRssFile:\t 40 kB\nRssShmem:\t 0 kB\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMemKiB(strings.NewReader(s))
		if err == nil && (m.RSS < 0 || m.Anon < 0 || m.File < 0 || m.Shmem < 0) {
			t.Fatalf("negative figure %+v from %q", m, s)
		}
	})
}
