package report

import (
	"os"
	"testing"
)

func TestReadLiveCountsThisProcess(t *testing.T) {
	before, err := ReadLive(7)
	if err != nil {
		t.Fatal(err)
	}
	if before.AtMs != 7 || before.RSSKiB <= 0 || before.HeapLiveKiB < 0 || before.Goroutines < 1 || before.FDs < 3 {
		t.Fatalf("ReadLive = %+v: want atMs 7, positive RSS, a goroutine, stdio open", before)
	}
	// A file held open and a goroutine parked must show.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stop := make(chan struct{})
	started := make(chan struct{})
	go func() { close(started); <-stop }()
	<-started
	defer close(stop)
	after, err := ReadLive(8)
	if err != nil {
		t.Fatal(err)
	}
	if after.FDs != before.FDs+1 {
		t.Errorf("FDs with one more file open: %d, want %d", after.FDs, before.FDs+1)
	}
	if after.Goroutines < before.Goroutines+1 {
		t.Errorf("goroutines with one more parked: %d, want at least %d", after.Goroutines, before.Goroutines+1)
	}
}
