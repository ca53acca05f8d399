package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/berth-node/berth/runtime/awsauth"
)

// maxStdin bounds the request kubelet writes to the plugin.
const maxStdin = 1 << 20

// cmdECRCredentialProvider is kubelet's image credential provider for ECR
// (--image-credential-provider-config); kubelet runs it by name from the
// bin dir, a link to berth, and berth dispatches on argv[0].
func cmdECRCredentialProvider(e env, args []string) int {
	fs := flag.NewFlagSet("ecr-credential-provider", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	imdsURL := fs.String("imds", "", "") // hidden: tests point it at a stand-in
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "usage: berth ecr-credential-provider < CredentialProviderRequest (JSON)")
		return 2
	}
	in, err := io.ReadAll(io.LimitReader(os.Stdin, maxStdin+1))
	if err != nil {
		fmt.Fprintf(e.stderr, "berth ecr-credential-provider: reading stdin: %v\n", err)
		return 1
	}
	opts, err := awsOptions(e, *imdsURL)
	if err != nil {
		fmt.Fprintf(e.stderr, "berth ecr-credential-provider: %v\n", err)
		return 1
	}
	out, err := awsauth.ECRCredentials(e.ctx, in, opts)
	if err != nil {
		fmt.Fprintf(e.stderr, "berth %v\n", err)
		return 1
	}
	if _, err := e.stdout.Write(out); err != nil {
		fmt.Fprintf(e.stderr, "berth ecr-credential-provider: writing stdout: %v\n", err)
		return 1
	}
	return 0
}
