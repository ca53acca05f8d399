// Command berth is the node's PID 1 and, run any other way, its CLI.
//
// As PID 1 it mounts the early filesystems, loads kernel modules, switches
// to the real root, prints the boot report and then waits for the power
// button or a signal to shut the machine down in order (see boot.go). It
// never exits: the kernel panics when PID 1 does.
//
// As a CLI it runs a subcommand (see cli.go): `berth version`, and later
// `berth render`, `berth check`...
package main

import (
	"os"
	"path/filepath"
)

func main() {
	if os.Getpid() == 1 {
		pid1() // never returns
	}
	args := os.Args[1:]
	// The kernel runs /sbin/modprobe (a link to berth) to load modules on
	// demand.
	if filepath.Base(os.Args[0]) == "modprobe" {
		args = append([]string{"modprobe"}, args...)
	}
	// kubelet runs its image credential provider by name from
	// --image-credential-provider-bin-dir, where it is a link to berth.
	if filepath.Base(os.Args[0]) == "ecr-credential-provider" {
		args = append([]string{"ecr-credential-provider"}, args...)
	}
	os.Exit(runCLI(args, os.Stdout, os.Stderr))
}
