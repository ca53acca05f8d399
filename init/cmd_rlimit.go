package main

import (
	"fmt"
	"io"
	"os"

	"github.com/berth-node/berth/runtime/rlimit"
)

// cmdRlimitExec is `berth rlimit-exec LIMIT... -- PROGRAM ARGS...`, how the
// supervisor starts a service with its limits (package rlimit). It is
// dispatched before runCLI, without the CLI's signal handling, so a
// SIGTERM that comes before the exec ends it as it would the service.
// It returns only on failure.
func cmdRlimitExec(args []string, stderr io.Writer) int {
	limits, argv, err := rlimit.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "berth %s: %v\nusage: berth %s RESOURCE=SOFT:HARD... -- PROGRAM [ARGS...]\n", rlimit.Command, err, rlimit.Command)
		return 2
	}
	if err := rlimit.Exec(limits, argv, os.Environ()); err != nil {
		fmt.Fprintf(stderr, "berth %s: %v\n", rlimit.Command, err)
		return 1
	}
	return 0
}
