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
	// PID 1 runs without transparent huge pages (gc.go) and this process
	// inherited that; the service gets the kernel's policy back.
	if err := setTHPDisabled(false); err != nil {
		fmt.Fprintf(stderr, "berth %s: %v (the service runs without transparent huge pages)\n", rlimit.Command, err)
	}
	if err := rlimit.Exec(limits, argv, os.Environ()); err != nil {
		fmt.Fprintf(stderr, "berth %s: %v\n", rlimit.Command, err)
		return 1
	}
	return 0
}
