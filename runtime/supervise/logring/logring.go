// Package logring keeps the last lines a service wrote, in memory, so a
// crash loop can be shown with its cause long after the console scrolled.
package logring

import "sync"

// Ring holds at most MaxLines lines and MaxBytes bytes of them; the oldest
// go first. It is safe for concurrent use. The zero value holds nothing;
// use New.
type Ring struct {
	mu       sync.Mutex
	maxLines int
	maxBytes int
	lines    []string // circular; start is the oldest
	start    int
	bytes    int
}

// New returns a ring keeping the last maxLines lines, and no more than
// maxBytes bytes of them (a single longer line is kept, truncated).
func New(maxLines, maxBytes int) *Ring {
	if maxLines < 1 {
		maxLines = 1
	}
	if maxBytes < 1 {
		maxBytes = 1
	}
	return &Ring{maxLines: maxLines, maxBytes: maxBytes}
}

// Add appends a line.
func (r *Ring) Add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(line) > r.maxBytes {
		line = line[:r.maxBytes]
	}
	r.lines = append(r.lines, line)
	r.bytes += len(line)
	for len(r.lines)-r.start > 1 && (len(r.lines)-r.start > r.maxLines || r.bytes > r.maxBytes) {
		r.bytes -= len(r.lines[r.start])
		r.lines[r.start] = "" // let the string go
		r.start++
	}
	// Compact once the dropped prefix dominates, so memory stays bounded
	// by the limits and the copying is amortised.
	if r.start > 0 && r.start >= len(r.lines)/2 {
		n := copy(r.lines, r.lines[r.start:])
		clear(r.lines[n:])
		r.lines, r.start = r.lines[:n], 0
	}
}

// Tail returns up to the last n lines, oldest first; n <= 0 means all.
func (r *Ring) Tail(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.lines[r.start:]
	if n > 0 && n < len(all) {
		all = all[len(all)-n:]
	}
	return append([]string(nil), all...)
}

// Len returns the number of lines held.
func (r *Ring) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines) - r.start
}

// Bytes returns the bytes of the lines held, at most the ring's maxBytes.
func (r *Ring) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}
