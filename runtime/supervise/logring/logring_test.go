package logring

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestKeepsLastLines(t *testing.T) {
	r := New(3, 1<<20)
	for i := range 10 {
		r.Add(fmt.Sprintf("line %d", i))
	}
	if got, want := r.Tail(0), []string{"line 7", "line 8", "line 9"}; !slices.Equal(got, want) {
		t.Errorf("Tail(0) = %q, want %q", got, want)
	}
	if got, want := r.Tail(2), []string{"line 8", "line 9"}; !slices.Equal(got, want) {
		t.Errorf("Tail(2) = %q, want %q", got, want)
	}
	if got := r.Tail(100); len(got) != 3 {
		t.Errorf("Tail(100) has %d lines, want 3", len(got))
	}
}

func TestByteLimit(t *testing.T) {
	r := New(100, 10)
	r.Add("aaaa")
	r.Add("bbbb")
	if r.Bytes() != 8 {
		t.Errorf("Bytes = %d after two 4-byte lines, want 8", r.Bytes())
	}
	r.Add("cccc") // 12 bytes: "aaaa" must go
	if got, want := r.Tail(0), []string{"bbbb", "cccc"}; !slices.Equal(got, want) {
		t.Errorf("Tail = %q, want %q", got, want)
	}
	if r.Bytes() != 8 {
		t.Errorf("Bytes = %d once the oldest line went, want 8", r.Bytes())
	}
	r.Add(strings.Repeat("x", 25)) // longer than the whole ring: kept alone, truncated
	if got, want := r.Tail(0), []string{strings.Repeat("x", 10)}; !slices.Equal(got, want) {
		t.Errorf("Tail = %q, want %q", got, want)
	}
	if r.Bytes() != 10 {
		t.Errorf("Bytes = %d, want the bound, 10", r.Bytes())
	}
}

func TestEmpty(t *testing.T) {
	r := New(5, 100)
	if got := r.Tail(3); len(got) != 0 || r.Len() != 0 {
		t.Errorf("empty ring: Tail = %q, Len = %d", got, r.Len())
	}
}

func TestMemoryBounded(t *testing.T) {
	r := New(4, 1<<20)
	for i := range 10000 {
		r.Add(fmt.Sprint(i))
	}
	if cap(r.lines) > 64 {
		t.Errorf("backing array grew to %d for a 4-line ring", cap(r.lines))
	}
	if got, want := r.Tail(0), []string{"9996", "9997", "9998", "9999"}; !slices.Equal(got, want) {
		t.Errorf("Tail = %q, want %q", got, want)
	}
}

func TestConcurrent(t *testing.T) {
	r := New(50, 1<<20)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				r.Add(fmt.Sprintf("%d-%d", w, i))
				_ = r.Tail(5)
			}
		}()
	}
	wg.Wait()
	if r.Len() != 50 {
		t.Errorf("Len = %d, want 50", r.Len())
	}
}
