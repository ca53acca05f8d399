package main

import (
	"flag"
	"fmt"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/internal/redact"
)

// cmdCheck validates NodeConfig files (YAML, JSON, MIME user data, gzip or
// base64 of those) as one node would merge them, and prints every problem.
func cmdCheck(e env, args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	strict := fs.Bool("strict", false, "treat unknown fields and feature gates as errors")
	manifestPath := fs.String("manifest", "", "the image's manifest: check kubelet's and containerd's settings against what its kubelet and containerd accept (without it, a warning names the checks not made)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: berth check [--strict] [--manifest FILE] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var opts nodeconfig.Options
	if *manifestPath != "" {
		man, err := manifest.Load(*manifestPath)
		if err != nil {
			fmt.Fprintf(e.stderr, "berth check: %v\n", err)
			return 1
		}
		opts.Accepts = man.Accepts
	}
	problems, ok := nodeconfig.CheckWith(opts, *strict, fs.Args()...)
	// The problems quote values, and a value may hold a secret (a URL's
	// password, a token): redacted as render's are, and check has no
	// reason to show them.
	for _, p := range problems {
		fmt.Fprintln(e.stdout, redact.Text(p.String()))
	}
	// Count, not len: past nodeconfig.MaxProblems one line stands for the
	// problems left out, and the summary must still give the true numbers.
	if why := opts.NotChecked(); why != "" {
		fmt.Fprintln(e.stdout, "warning: "+why)
	}
	errs, warns := nodeconfig.Count(problems)
	if !ok {
		fmt.Fprintf(e.stdout, "berth check: %d error(s), %d warning(s)\n", errs, warns)
		return 1
	}
	fmt.Fprintf(e.stdout, "berth check: ok (%d warning(s))\n", warns)
	return 0
}
