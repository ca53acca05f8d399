// Command gen writes the maxpods ENI table (eni_table.go) from nodeadm's
// instance-info.jsonl. Its defaults suit the repository root
// (`go run ./runtime/kubelet/maxpods/gen`); `go generate
// ./runtime/kubelet/maxpods` passes paths relative to the package.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/runtime/kubelet/maxpods/internal/tablegen"
)

func main() {
	in := flag.String("in", "runtime/kubelet/maxpods/data/instance-info.jsonl", "instance-info.jsonl to read")
	out := flag.String("out", "runtime/kubelet/maxpods/eni_table.go", "Go file to write")
	source := flag.String("source", "runtime/kubelet/maxpods/data/instance-info.jsonl", "input name recorded in the generated header (kept stable so output does not depend on where it runs)")
	flag.Parse()
	if err := run(*in, *out, *source); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(in, out, source string) error {
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("opening instance info: %w", err)
	}
	defer f.Close()
	src, err := tablegen.Generate(f, source)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(out, src, 0o644)
}
