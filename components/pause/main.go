// Command pause is the sandbox ("pause") container of every pod on a berth
// node: it holds the pod's namespaces open, reaps children when it is the
// pod's PID 1 (shareProcessNamespace), and exits 0 on SIGTERM or SIGINT so
// pod teardown is quick. It is static and tiny, and is packed into an OCI
// image by image/oci so nodes need no registry for it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (berth)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", s)
		os.Exit(0)
	}
}

// reap collects every exited child: several may exit per SIGCHLD.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
