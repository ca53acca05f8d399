// Command e2erepolist writes the KUBE_TEST_REPO_LIST file that points
// Kubernetes' e2e suite at the test cluster's registry stand-in instead of
// registry.k8s.io, docker.io and the others (image/oci/e2erepo says how
// names map):
//
//	e2erepolist -registry registry.berth.test -out build/components/e2e-repo-list-v1.35.4.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/berth-node/berth/image/oci/e2erepo"
	"github.com/berth-node/berth/internal/fsutil"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "e2erepolist:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("e2erepolist", flag.ContinueOnError)
	local := fs.String("registry", "", "the registry every e2e image is pulled from, HOST[:PORT][/PATH] (registry.berth.test)")
	out := fs.String("out", "", "the file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *local == "" || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: e2erepolist -registry HOST[:PORT][/PATH] -out FILE")
	}
	b, err := e2erepo.RepoList(*local)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(*out, b, 0o644); err != nil {
		return fmt.Errorf("writing the KUBE_TEST_REPO_LIST file: %w", err)
	}
	return nil
}
