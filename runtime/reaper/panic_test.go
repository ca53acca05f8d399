package reaper

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/internal/syncbuf"
)

// panicWriter panics at its first Write.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("writer bug") }

// TestOutputCopyPanic: a panic in the output copier becomes the call's
// error, nothing waits forever, and the pipe is still drained: the child
// writes well over a pipe's 64 KiB and still exits 3 on its own, neither
// blocked nor killed by SIGPIPE.
func TestOutputCopyPanic(t *testing.T) {
	subreaper(t)
	log := &syncbuf.Buffer{}
	r := startReaper(t, slog.New(slog.NewTextHandler(log, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	st, err := r.combinedOutput(ctx, exec.Command("/bin/sh", "-c",
		`i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; exit 3`), panicWriter{})
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("combinedOutput took %v", took)
	}
	if st.Signal != 0 || st.Code != 3 {
		t.Errorf("child ended %v; want exit status 3 (not SIGPIPE, not killed)", st)
	}
	var p *safe.Panic
	if !errors.As(err, &p) || !strings.Contains(err.Error(), "copying the output of /bin/sh: panic: writer bug") {
		t.Errorf("err = %v; want the copier's panic", err)
	}
	if !strings.Contains(log.String(), `msg="panic recovered" goroutine="output of /bin/sh" panic="writer bug"`) {
		t.Errorf("the panic was not logged:\n%s", log.String())
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombies left: %v", z)
	}
}
