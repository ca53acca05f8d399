// Command berth is the node's PID 1 and, run any other way, its CLI.
//
// As PID 1 it runs the boot pipeline (pipeline.go lists the phases, each in
// its own phase_<name>.go), prints the boot report, supervises containerd
// and kubelet, and shuts the machine down in order on the power button or a
// signal (power.go). It never exits: the kernel panics when PID 1 does.
//
// As a CLI it runs a subcommand (cli.go, cmd_*.go): version, check, render,
// modprobe, eks-token and ecr-credential-provider.
package main

import (
	"os"
	"path/filepath"

	"github.com/berth-node/berth/runtime/rlimit"
)

func main() {
	if os.Getpid() == 1 {
		startWithoutTHP(os.Args, os.Environ())
		tuneGC(os.Getenv)
		pid1() // never returns
	}
	args := os.Args[1:]
	// The supervisor starts services through berth to set their rlimits;
	// not a CLI command, so no signal handling stands between berth and
	// the exec.
	if len(args) > 0 && args[0] == rlimit.Command {
		os.Exit(cmdRlimitExec(args[1:], os.Stderr))
	}
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
