// Command orphaner is a test helper baked into the test image. Run as a
// berth.exec hook, it starts a grandchild that outlives it (an orphan that
// PID 1 must reap) and then exits with a chosen code, so a QEMU test can
// check both that berth reaps orphans and that it still reports its own
// child's exit status right.
//
//	orphaner [-code N] [-orphans K] [-linger DURATION]
//
// The grandchild is this same program run with -child, which sleeps for
// -linger and exits.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"
)

func main() {
	code := flag.Int("code", 7, "exit code of the parent")
	orphans := flag.Int("orphans", 3, "grandchildren left behind")
	linger := flag.Duration("linger", 2*time.Second, "how long each grandchild outlives the parent")
	child := flag.Bool("child", false, "internal: be the grandchild")
	flag.Parse()
	if *child {
		time.Sleep(*linger)
		os.Exit(3)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orphaner:", err)
		os.Exit(2)
	}
	for i := 0; i < *orphans; i++ {
		cmd := exec.Command(self, "-child", "-linger", linger.String())
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "orphaner:", err)
			os.Exit(2)
		}
		// Never waited for: when this process exits, the grandchild is
		// re-parented to PID 1, which must reap it.
		fmt.Printf("orphaner: left grandchild pid %d\n", cmd.Process.Pid)
	}
	fmt.Printf("orphaner: exiting with code %d\n", *code)
	os.Exit(*code)
}
