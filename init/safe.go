package main

import (
	"log/slog"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/safe"
)

// maxStackInReport bounds one panic's stack in boot.json; the console line
// has it whole.
const maxStackInReport = 4 << 10

// goSafe starts fn on its own goroutine through package safe. A panic is
// logged with its stack and recorded in the boot report, and the rest of
// PID 1 goes on.
func (b *boot) goSafe(log *slog.Logger, name string, fn func()) {
	safe.Go(log, name, fn, b.notePanic)
}

// notePanic records a recovered panic in the boot report, and rewrites
// boot.json when the report is already out.
func (b *boot) notePanic(p *safe.Panic) {
	stack := p.Stack
	if len(stack) > maxStackInReport {
		stack = stack[:maxStackInReport]
	}
	at := b.clock().Milliseconds()
	b.updateReport("panic", func(r *report.Report) {
		r.Panics = append(r.Panics, report.Panic{Goroutine: p.Goroutine, Error: p.Error(), AtMs: at, Stack: string(stack)})
	})
}
