package publish

import (
	"log/slog"

	"fmt"
	"github.com/berth-node/berth/internal/safe"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ProgressLine says how far an upload is: done of total bytes after
// elapsed, the rate so far, and the time left at that rate.
func ProgressLine(done, total int64, elapsed time.Duration) string {
	const mib = 1 << 20
	pct := 100.0
	if total > 0 {
		pct = float64(done) * 100 / float64(total)
	}
	line := fmt.Sprintf("uploaded %.1f of %.1f MiB (%.0f%%)", float64(done)/mib, float64(total)/mib, pct)
	if elapsed <= 0 || done == 0 {
		return line
	}
	rate := float64(done) / elapsed.Seconds()
	left := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
	return line + fmt.Sprintf(", %.1f MiB/s, %s left", rate/mib, left)
}

// startProgress writes ProgressLine to o.Progress until the returned stop
// is called, which writes the last line (and ends a terminal's line).
func startProgress(o UploadOptions, total int64, done *atomic.Int64) (stop func()) {
	if o.Progress == nil {
		return func() {}
	}
	began := time.Now()
	every := o.ProgressEvery
	if o.Terminal {
		every = time.Second
	}
	write := func(w io.Writer) {
		line := ProgressLine(done.Load(), total, time.Since(began))
		if o.Terminal {
			fmt.Fprintf(w, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A panic in a progress line must not take the upload down with it:
	// it is logged and the line stops.
	safe.Go(log, "publish-progress", func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				write(o.Progress)
			}
		}
	}, nil)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-finished
			write(o.Progress)
			if o.Terminal {
				fmt.Fprintln(o.Progress)
			}
		})
	}
}
