package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/manifest/builtin"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/internal/redact"
)

// cmdCheck validates NodeConfig files (YAML, JSON, MIME user data, gzip or
// base64 of those; AL2 scripts, eksctl's cloud-config, Bottlerocket
// settings) as one node would merge them, builds the plan from them on a
// stand-in instance as render and the node do, and prints every problem.
// It checks against what the image's kubelet and containerd accept
// (--manifest), or without a manifest against what the kubelet and
// containerd berth was built with accept (config/manifest/builtin), and
// says which. With --seed DIR it checks a NoCloud seed instead of files:
// its user-data as a file is checked, and its meta-data and
// network-config as a node booted from the seed would read them
// (nocloud.Inspect), every problem naming the seed file, line and key.
func cmdCheck(e env, args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	strict := fs.Bool("strict", false, "treat unknown fields, feature gates and berth.dev/ annotations as errors")
	manifestPath := fs.String("manifest", "", "the image's manifest: check kubelet's and containerd's settings against what its kubelet and containerd accept (default: what the kubelet and containerd berth was built with accept)")
	seed := fs.String("seed", "", "check the NoCloud seed in this directory (user-data, meta-data, network-config, as on a cidata volume) instead of FILEs")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: berth check [--strict] [--manifest FILE] FILE...\n       berth check [--strict] [--manifest FILE] --seed DIR")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *seed != "" && fs.NArg() != 0 {
		fmt.Fprintf(e.stderr, "berth check: --seed %s and FILE arguments (%s): the seed's user-data is the node's user data; give one or the other\n", *seed, strings.Join(fs.Args(), " "))
		fs.Usage()
		return 2
	}
	if *seed == "" && fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	man, against, err := checkManifest(*manifestPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "berth check: %v\n", err)
		return 1
	}
	opts := nodeconfig.Options{Accepts: man.Accepts}
	var seedProblems []nodeconfig.Problem
	var res *nodeconfig.Result
	var problems []nodeconfig.Problem
	ok := false
	if *seed != "" {
		in, err := nocloud.InspectDir(*seed)
		if err != nil {
			fmt.Fprintf(e.stderr, "berth check: %v\n", err)
			return 1
		}
		seedProblems = in.NodeConfigProblems()
		if srcs := in.Sources(); srcs != nil {
			res, problems, ok = nodeconfig.CheckSources(opts, *strict, srcs)
		}
	} else {
		res, problems, ok = nodeconfig.CheckResult(opts, *strict, fs.Args()...)
	}
	if ok && res != nil {
		// One verdict: what render and the node refuse in the plan, check
		// refuses too.
		problems = append(problems, planProblems(res, man)...)
	}
	problems = append(seedProblems, problems...)
	ok = !nodeconfig.HasErrors(problems)
	// The problems quote values, and a value may hold a secret (a URL's
	// password, a token): redacted as render's are, and check has no
	// reason to show them.
	for _, p := range problems {
		fmt.Fprintln(e.stdout, redact.Text(p.String()))
	}
	fmt.Fprintln(e.stdout, "berth check: checked against "+against)
	if why := opts.NotChecked(); why != "" {
		fmt.Fprintln(e.stdout, "warning: "+why)
	}
	// Count, not len: past nodeconfig.MaxProblems one line stands for the
	// problems left out, and the summary must still give the true numbers.
	errs, warns := nodeconfig.Count(problems)
	if !ok {
		fmt.Fprintf(e.stdout, "berth check: %d error(s), %d warning(s)\n", errs, warns)
		return 1
	}
	fmt.Fprintf(e.stdout, "berth check: ok (%d warning(s))\n", warns)
	return 0
}

// checkManifest is the manifest check and render judge with: the one at
// path, or the built-in one; against says which, for the output.
func checkManifest(path string) (man *manifest.Manifest, against string, err error) {
	if path == "" {
		if man, err = builtin.Manifest(); err != nil {
			return nil, "", err
		}
		return man, "what " + builtin.Versions(man) + " accept, as built into berth (--manifest FILE checks against an image's own)", nil
	}
	if man, err = manifest.Load(path); err != nil {
		return nil, "", err
	}
	if v := builtin.Versions(man); v != "" {
		return man, "what the image's " + v + " accept (" + path + ")", nil
	}
	return man, "the image's manifest " + path + ", which records nothing of what its kubelet and containerd accept", nil
}

// planProblems builds the plan from a config check accepted, on the
// stand-in instance (plan.Check), and returns its refusal as problems
// named after the document (or, for several, the merged config): the
// plan's errors name the field. User data that leaves the cluster to
// DescribeCluster gets a stand-in answer, as render gets the real one.
func planProblems(res *nodeconfig.Result, man *manifest.Manifest) []nodeconfig.Problem {
	// The document, when one alone was read (Used names it as the other
	// problems do: a MIME part, an AL2 script's line, Bottlerocket
	// settings).
	source := nodeconfig.MergedSource
	if len(res.Used) == 1 {
		source = res.Used[0]
	}
	if res.DescribeCluster != nil {
		if err := nodeconfig.FillFromEKS(res, plan.StandInCluster()); err != nil {
			var out []nodeconfig.Problem
			for _, p := range res.Problems {
				if p.Severity == nodeconfig.SeverityError {
					out = append(out, p)
				}
			}
			return out
		}
	}
	err := plan.Check(res.Config, man)
	if err == nil {
		return nil
	}
	var out []nodeconfig.Problem
	for _, e := range flattenErrors(err) {
		for line := range strings.SplitSeq(e.Error(), "\n") {
			if nodeconfig.IsBottlerocketSource(source) {
				line = bottlerocketHint(line)
			}
			out = append(out, nodeconfig.Problem{Severity: nodeconfig.SeverityError, Source: source, Message: line})
		}
	}
	return out
}

// bottlerocketHint adds, to a plan error at one of berth's annotations,
// the Bottlerocket setting the annotation was read from.
func bottlerocketHint(line string) string {
	for ann, setting := range nodeconfig.BottlerocketSettings() {
		if strings.HasPrefix(line, fmt.Sprintf("metadata.annotations[%q]", ann)) {
			return line + " (from " + setting + ")"
		}
	}
	return line
}

// flattenErrors undoes (nested) errors.Join.
func flattenErrors(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flattenErrors(e)...)
	}
	return out
}
