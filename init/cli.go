package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"text/tabwriter"

	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/version"
	"golang.org/x/sys/unix"
)

// env is what a subcommand gets: no globals, so each is testable.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// command is one CLI subcommand.
type command struct {
	name    string
	summary string
	// run returns the process exit code.
	run func(e env, args []string) int
}

// commands is the CLI's table. New subcommands (render, check, eks-token...)
// are one entry each here, with their code in their own file or package.
func commands() []command {
	return []command{
		{name: "version", summary: "print berth's version", run: cmdVersion},
		{name: "check", summary: "validate NodeConfig files and print every problem", run: cmdCheck},
		{name: "analyze", summary: "blame, critical chain and boot chart (--svg) from a boot report (default " + report.DefaultPath + ")", run: cmdAnalyze},
		{name: "render", summary: "write the files a node would get, offline, under --out", run: cmdRender},
		{name: "convert", summary: "print the NodeConfig that user data means (MIME, an AL2 bootstrap.sh script...), with what was not carried over", run: cmdConvert},
		{name: "modprobe", summary: "load kernel modules with their dependencies (the kernel runs it as " + modprobePath + ")", run: cmdModprobe},
		{name: "eks-token", summary: "print an EKS token from the instance role (kubelet's exec credential plugin)", run: cmdEKSToken},
		{name: "ecr-credential-provider", summary: "kubelet's image credential provider for ECR (request on stdin)", run: cmdECRCredentialProvider},
	}
}

func cmdVersion(e env, args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(e.stderr, "usage: berth version")
		return 2
	}
	fmt.Fprintln(e.stdout, version.Version)
	return 0
}

// runCLI dispatches args to a subcommand and returns the exit code.
func runCLI(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGINT, unix.SIGTERM)
	defer stop()
	out := bootlog.NewOutput()
	out.Attach(stderr, nil)
	e := env{ctx: ctx, stdin: os.Stdin, stdout: stdout, stderr: stderr, log: slog.New(bootlog.New(out, bootlog.Options{}))}

	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "berth: unknown command %q (try `berth help`)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "berth %s: Kubernetes node init (PID 1) and its tools.\n\nUsage: berth COMMAND [ARGS]\n\nCommands:\n", version.Version)
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cs {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
}
