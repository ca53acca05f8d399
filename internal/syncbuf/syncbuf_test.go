package syncbuf

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/berth-node/berth/internal/safe"
)

// Writers and a reader at once (the race detector checks the locking);
// every write arrives whole.
func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		safe.Go(slog.Default(), "writer", func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		}, func(p *safe.Panic) { t.Error(p) })
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "w") || !strings.Contains(l, "-") {
			t.Errorf("torn line %q", l)
		}
	}
}
