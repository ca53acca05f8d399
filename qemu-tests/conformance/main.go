// Command conformance is `make conformance`: Kubernetes' own e2e suite,
// offline, against berth nodes. It starts a cluster of N berth nodes
// with the cluster command (qemu-tests/cluster, given as -cluster) with
// the e2e images served beside the cluster's own, waits until it is up,
// runs e2e.test under ginkgo with --provider=skeleton and the
// KUBE_TEST_REPO_LIST file that sends every image pull to the registry
// stand-in, stops the cluster, and prints a summary: passed, failed,
// skipped, and each failure's first line. The JUnit report, the suite's
// log and the cluster's (the nodes' consoles among them) stay under -out;
// with -doc it rewrites docs/conformance.md from the run.
//
// Specs that cannot pass for a reason outside berth are skipped by their
// full names from -skips (qemu-tests/conformance/skips.yaml), each with
// its upstream reason, never by a broad pattern.
package main

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/qemu-tests/rigflags"
	"github.com/berth-node/berth/qemu-tests/vcluster"
)

type options struct {
	cluster, e2eDir, kubectl, repoList, e2eImages string
	components, image                             string
	out, skips, doc, subset, shard, parts         string
	selection                                     string
	reruns                                        []string
	rerunSkipped                                  bool
	focus, skip, cni                              string
	n, procs, merge                               int
	upTimeout, suiteTimeout                       time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.cluster, "cluster", "", "the cluster command (go build ./qemu-tests/cluster)")
	flag.StringVar(&o.e2eDir, "e2e", "", "the folder with e2e.test and ginkgo (make e2e)")
	flag.StringVar(&o.kubectl, "kubectl", "", "kubectl, for the specs that run it")
	flag.StringVar(&o.repoList, "repo-list", "", "the KUBE_TEST_REPO_LIST file (make e2e-repo-list)")
	flag.StringVar(&o.e2eImages, "e2e-images", "", "the e2e images' folder (make e2e-images)")
	rigflags.Components(flag.CommandLine, &o.components)
	rigflags.Image(flag.CommandLine, &o.image)
	flag.StringVar(&o.out, "out", filepath.Join("build", "conformance"), "where the JUnit report, the logs and the cluster's files go")
	flag.StringVar(&o.skips, "skips", filepath.Join("qemu-tests", "conformance", "skips.yaml"), "specs skipped by name, each with its reason")
	flag.StringVar(&o.doc, "doc", "", "rewrite this Markdown file (docs/conformance.md) from the run")
	flag.StringVar(&o.focus, "focus", `\[NodeConformance\]`, "ginkgo --focus: the specs to run")
	flag.StringVar(&o.subset, "subset", "", "run exactly the specs this file names (qemu-tests/conformance/subset.yaml, make test's), each of which must pass; replaces -focus")
	flag.StringVar(&o.selection, "selection", "", "run the specs this file selects (qemu-tests/conformance/wider.yaml: a focus, and rules that take specs out of it, each with its reason); replaces -focus, and the doc's section is named for the file")
	flag.StringVar(&o.skip, "skip", "", "ginkgo --skip, besides the skip list")
	flag.Func("rerun", "run again the specs this JUnit report (an earlier run's junit.xml) says failed or never started, or this part's record (docs/conformance-parts/*.json) says failed or were not reached and have not passed run again since; replaces -focus. Given more than once, one cluster runs those of every file, and each part's outcomes are recorded with that part", func(v string) error {
		o.reruns = append(o.reruns, v)
		return nil
	})
	flag.BoolVar(&o.rerunSkipped, "rerun-skipped", false, "with -rerun, also run again the specs the suite skipped at run time (not those the skip list skips): for a skip the rig caused, one it no longer causes; a skip whose reason still holds is skipped again, and the doc says so")
	flag.StringVar(&o.shard, "shard", "", "K/N: run only part K of N of the focus's specs, into OUT/shard-K-of-N, and record its result in -parts; with -doc, the doc is rewritten from the parts recorded so far, naming those not yet run")
	flag.IntVar(&o.merge, "merge", 0, "N: run nothing; record the parts of -focus's run in N parts run under -out (OUT/shard-K-of-N, -shard's) in -parts, put the parts recorded there together, and with -doc rewrite the doc from them")
	flag.StringVar(&o.parts, "parts", "", "where each part of a run in parts is recorded (docs/conformance-parts, kept in the repository so that parts run in different sessions add up); default: -out, the parts' folder")
	flag.IntVar(&o.n, "n", 1, "number of nodes")
	flag.StringVar(&o.cni, "cni", "flannel", "the cluster's CNI (the cluster command's -cni): flannel, or install-cni (each node's pods on its own bridge: enough for one node, and lighter under TCG)")
	flag.IntVar(&o.procs, "procs", 4, "ginkgo processes (specs mostly wait for pods: more than the cores)")
	flag.DurationVar(&o.upTimeout, "up-timeout", 30*time.Minute, "how long the cluster may take to come up")
	flag.DurationVar(&o.suiteTimeout, "timeout", 4*time.Hour, "ginkgo --timeout for the whole suite")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stdout, "conformance: FAILED: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	required := map[string]string{"-e2e": o.e2eDir}
	if o.merge == 0 {
		required = map[string]string{"-cluster": o.cluster, "-e2e": o.e2eDir, "-kubectl": o.kubectl, "-repo-list": o.repoList, "-e2e-images": o.e2eImages}
	}
	for flagName, v := range required {
		if v == "" {
			return fmt.Errorf("%s is required", flagName)
		}
	}
	list, err := loadSkips(o.skips)
	if err != nil {
		return err
	}
	// listed is e2e.test's listing, read once by whichever of -selection,
	// -merge, -shard and -rerun needs it first.
	var listed []string
	readListing := func() error {
		if listed != nil {
			return nil
		}
		var err error
		listed, err = listTests(ctx, filepath.Join(o.e2eDir, "e2e.test"))
		return err
	}
	var sel *selectionInfo
	if o.selection != "" {
		if o.subset != "" || len(o.reruns) > 0 {
			return fmt.Errorf("-selection names a run's specs: not with -subset or -rerun (a rerun's specs come from its report)")
		}
		s, err := loadSelection(o.selection)
		if err != nil {
			return err
		}
		if err := readListing(); err != nil {
			return err
		}
		names, info, err := s.resolve(listed, o.selection)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "conformance: selection %s: %d of the %d specs its focus selects\n", o.selection, info.Kept, info.Matched)
		o.focus, sel = namesPattern(names), &info
	}
	if strings.TrimSpace(o.focus) == "" && o.subset == "" {
		// ginkgo runs every spec of the suite (7000 and more) for an
		// empty focus: never what was meant (an empty FOCUS_FILE, say).
		return fmt.Errorf("-focus is empty: name the specs to run")
	}
	focus, err := regexp.Compile(o.focus)
	if err != nil {
		return fmt.Errorf("-focus %q: %w", o.focus, err)
	}
	asked := focusAsked(focus)
	if o.merge != 0 {
		if o.merge < 2 || o.shard != "" || o.subset != "" || len(o.reruns) > 0 || o.skip != "" {
			return fmt.Errorf("-merge N (N >= 2) puts a run's parts together: not with -shard, -subset, -rerun or -skip")
		}
		if err := readListing(); err != nil {
			return err
		}
		kubeVersion, err := e2eVersion(ctx, filepath.Join(o.e2eDir, "e2e.test"))
		if err != nil {
			return err
		}
		parts := cmp.Or(o.parts, o.out)
		for k := 1; k <= o.merge; k++ {
			sh := shard{K: k, N: o.merge}
			if _, err := os.Stat(filepath.Join(sh.dir(o.out), runRecordFile)); err != nil {
				continue // not run here: only its record, if any, counts
			}
			said, err := recordPart(sh.dir(o.out), parts, sh, focus, kubeVersion, listed, list)
			if err != nil {
				fmt.Fprintf(out, "conformance: part %s's run is not recorded: %v\n", sh, err)
				continue
			}
			fmt.Fprintf(out, "conformance: %s\n", said)
		}
		return mergeParts(parts, o.merge, focus, kubeVersion, listed, list, o.doc, out)
	}
	var sub subset
	if o.subset != "" {
		if o.doc != "" {
			return fmt.Errorf("-doc is for full runs: a subset's result is not the table")
		}
		if sub, err = loadSubset(o.subset); err != nil {
			return err
		}
		o.focus = namesPattern(sub.names())
		asked = sub.asked
	}
	var sh shard
	runFocus := focus // the run's focus, before a part or a rerun narrows it
	if o.shard != "" {
		if o.subset != "" || len(o.reruns) > 0 {
			return fmt.Errorf("-shard splits a run of -focus: not with -subset or -rerun")
		}
		if sh, err = parseShard(o.shard); err != nil {
			return err
		}
		if err := readListing(); err != nil {
			return err
		}
		names, what := sh.names(listed, focus), runInfo{Focus: o.focus, Selection: sel}.shown()
		if len(names) == 0 {
			return fmt.Errorf("-shard %s: %s leaves part %s no spec", sh, what, sh)
		}
		fmt.Fprintf(out, "conformance: part %s: %d of the specs %s selects\n", sh, len(names), what)
		if focus, err = regexp.Compile(namesPattern(names)); err != nil {
			return fmt.Errorf("-shard %s: %w", sh, err)
		}
		o.focus, asked = focus.String(), focusAsked(focus)
		o.out = sh.dir(o.out)
	}
	// reruns are the -rerun files and the specs each gives the run;
	// those of a part (the file is a part's record, or a part's report
	// beside its run.json) are recorded with the part, in the file's
	// parts folder (or -parts). A whole run's rerun is not recorded.
	var reruns []rerunSource
	if o.rerunSkipped && len(o.reruns) == 0 {
		return fmt.Errorf("-rerun-skipped says which of a rerun's specs to run again: not without -rerun")
	}
	if len(o.reruns) > 0 {
		if o.subset != "" {
			return fmt.Errorf("-rerun reruns part of a run: not with -subset")
		}
		if err := readListing(); err != nil {
			return err
		}
		var names []string
		if names, reruns, err = planRerun(o.reruns, o.rerunSkipped, list, listed, out); err != nil {
			return err
		}
		if focus, err = regexp.Compile(namesPattern(names)); err != nil {
			return fmt.Errorf("-rerun %s: %w", strings.Join(o.reruns, ", "), err)
		}
		o.focus, asked = focus.String(), focusAsked(focus)
	}
	skip := list.pattern()
	if o.skip != "" {
		userSkip, err := regexp.Compile(o.skip)
		if err != nil {
			return fmt.Errorf("-skip %q: %w", o.skip, err)
		}
		skip = strings.Trim(skip+"|"+o.skip, "|")
		asked = notSkipped(asked, userSkip)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	junit := filepath.Join(o.out, "junit.xml")
	for _, f := range []string{junit, filepath.Join(o.out, runRecordFile), filepath.Join(o.out, "cluster", "figures.json")} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the last run's %s: %w", f, err)
		}
	}
	kubeVersion, err := e2eVersion(ctx, filepath.Join(o.e2eDir, "e2e.test"))
	if err != nil {
		return err
	}

	// 1. The cluster, its output to OUT/cluster.log and here.
	clusterOut := filepath.Join(o.out, "cluster")
	logf, err := os.Create(filepath.Join(o.out, "cluster.log"))
	if err != nil {
		return fmt.Errorf("creating the cluster's log: %w", err)
	}
	defer logf.Close()
	nodeArgs, err := e2eNodeArgs(o.out, o.n)
	if err != nil {
		return err
	}
	cl := exec.Command(o.cluster, append([]string{"-n", strconv.Itoa(o.n), "-cni", o.cni, "-out", clusterOut, "-e2e-images", o.e2eImages,
		"-components", o.components, "-image", o.image}, nodeArgs...)...)
	cl.Stdout = io.MultiWriter(logf, prefixed(out, "cluster: "))
	cl.Stderr = cl.Stdout
	// Its own process group: a Ctrl-C here reaches it once, as a SIGTERM
	// from stopCluster, and its nodes power off in order.
	cl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cl.Start(); err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	exited := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	safe.Go(log, "cluster wait", func() { exited <- cl.Wait() }, func(p *safe.Panic) { exited <- p })
	stopCluster := func() error {
		select {
		case err := <-exited:
			return fmt.Errorf("the cluster stopped by itself: %v (its log: %s)", err, logf.Name())
		default:
		}
		_ = cl.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("stopping the cluster: %w (its log: %s)", err, logf.Name())
			}
			return nil
		case <-time.After(5 * time.Minute):
			_ = cl.Process.Kill()
			return fmt.Errorf("the cluster did not stop within 5 minutes of SIGTERM; killed")
		}
	}
	ready, err := waitUp(ctx, clusterOut, exited, o.upTimeout)
	if err != nil {
		return errors.Join(err, stopCluster())
	}

	// 2. The suite.
	start := time.Now()
	suiteErr := runSuite(ctx, o, o.focus, skip, filepath.Join(clusterOut, "kubeconfig"), junit, out)
	wall := time.Since(start)
	downErr := stopCluster()

	// 3. What it says.
	j, err := readJUnit(junit)
	if err != nil {
		return errors.Join(fmt.Errorf("the suite: %v", suiteErr), err, downErr)
	}
	s := summarize(j, asked, list)
	shownFocus := o.focus
	switch {
	case sub != nil:
		shownFocus = fmt.Sprintf("the %d specs of %s", len(sub), o.subset)
	case sh != (shard{}):
		shownFocus = runFocus.String()
	}
	ri := runInfo{Date: start, Focus: shownFocus, Selection: sel, Nodes: o.n, Procs: o.procs, Kubernetes: kubeVersion, Image: imageVersion(o.image),
		Wall: wall, ClusterReadySeconds: ready}
	var sum bytes.Buffer
	writeSummary(&sum, s, ri)
	fmt.Fprint(out, sum.String())
	if err := fsutil.WriteFileAtomic(filepath.Join(o.out, "summary.txt"), sum.Bytes(), 0o644); err != nil {
		return err
	}
	rec := runRecord{runInfo: ri}
	if sh != (shard{}) {
		rec.Shard = sh.String()
	}
	if err := writeRunRecord(o.out, rec); err != nil {
		return err
	}
	for _, r := range reruns {
		if r.of == nil {
			if o.doc != "" {
				fmt.Fprintf(out, "conformance: %s is not a part's report (no run.json of a part beside it): the doc is left alone for it\n", r.file)
			}
			continue
		}
		if err := recordRerunOf(*r.of, cmp.Or(o.parts, r.parts), o.doc, kubeVersion, listed, list, rerunRecord{Date: start, Image: ri.Image, Wall: wall, Results: s.among(r.names)}, out); err != nil {
			return errors.Join(err, downErr)
		}
	}
	if sh != (shard{}) {
		// A part's result is not the table: the parts recorded so far
		// are, this one among them unless it did not run as its part.
		parts := cmp.Or(o.parts, filepath.Dir(o.out))
		said, err := recordPart(o.out, parts, sh, runFocus, kubeVersion, listed, list)
		if err != nil {
			fmt.Fprintf(out, "conformance: this part's run is not recorded: %v\n", err)
		} else {
			fmt.Fprintf(out, "conformance: %s\n", said)
		}
		if err := mergeParts(parts, sh.N, runFocus, kubeVersion, listed, list, o.doc, out); err != nil {
			return errors.Join(err, downErr)
		}
	} else if o.doc != "" && len(o.reruns) == 0 {
		if err := writeDocFile(o.doc, s, ri, list, out); err != nil {
			return errors.Join(err, downErr)
		}
	}
	if sub != nil {
		if err := sub.check(s, list); err != nil {
			return errors.Join(fmt.Errorf("%w; JUnit report %s, the suite's log %s", err, junit, filepath.Join(o.out, "e2e.log")), downErr)
		}
	}
	if len(s.Failed)+len(s.Setup) > 0 {
		return errors.Join(fmt.Errorf("%d spec(s) failed; JUnit report %s, the suite's log %s", len(s.Failed)+len(s.Setup), junit, filepath.Join(o.out, "e2e.log")), downErr)
	}
	return downErr
}

// writeDocFile rewrites doc (docs/conformance.md) with the run's section.
func writeDocFile(doc string, s summary, ri runInfo, list skipList, out io.Writer) error {
	previous, err := os.ReadFile(doc)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", doc, err)
	}
	var b bytes.Buffer
	writeDoc(&b, s, ri, list, previous)
	if err := fsutil.WriteFileAtomic(doc, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", doc, err)
	}
	fmt.Fprintf(out, "conformance: wrote %s\n", doc)
	return nil
}

// recordRerunOf records rerun r of some of part's specs with the part in
// parts, when the part's record there is of the run whose specs the
// rerun took, and with doc rewrites the doc from the parts recorded. A
// rerun that is not recorded is said, not an error: its own result
// stands under -out.
func recordRerunOf(part runRecord, parts, doc, kubeVersion string, listed []string, list skipList, r rerunRecord, out io.Writer) error {
	sh, err := parseShard(part.Shard)
	if err != nil {
		return fmt.Errorf("the rerun's part: %w", err)
	}
	if part.Kubernetes != kubeVersion {
		fmt.Fprintf(out, "conformance: the rerun is not recorded with part %s: its run was of e2e.test %s, this one's is %s\n", sh, part.Kubernetes, kubeVersion)
		return nil
	}
	said, err := recordRerun(parts, part.Focus, sh, part.Date, r)
	if err != nil {
		fmt.Fprintf(out, "conformance: the rerun is not recorded with part %s: %v\n", sh, err)
		return nil
	}
	fmt.Fprintf(out, "conformance: %s\n", said)
	focus, err := regexp.Compile(part.Focus)
	if err != nil {
		return fmt.Errorf("part %s's focus %q: %w", sh, part.Focus, err)
	}
	return mergeParts(parts, sh.N, focus, kubeVersion, listed, list, doc, out)
}

// mergeParts prints the result of the n parts of focus's run recorded
// in partsDir (mergeShards), each part not yet recorded named, and with
// doc rewrites its section: the parts not yet run are named there, their
// specs in no count.
func mergeParts(partsDir string, n int, focus *regexp.Regexp, kubeVersion string, listed []string, list skipList, doc string, out io.Writer) error {
	s, recs, missing := mergeShards(partsDir, n, focus, kubeVersion, listed)
	for _, m := range missing {
		fmt.Fprintf(out, "conformance: not yet counted: %v\n", m)
	}
	if len(recs) == 0 {
		return fmt.Errorf("no part of %d of focus %.120q is recorded in %s", n, focus, partsDir)
	}
	ri := shardsInfo(recs, n, missing)
	var sum bytes.Buffer
	writeSummary(&sum, s, ri)
	fmt.Fprintf(out, "conformance: the %d of %d parts run: %s", len(recs), n, strings.TrimPrefix(sum.String(), "conformance: "))
	if doc == "" {
		return nil
	}
	return writeDocFile(doc, s, ri, list, out)
}

// waitUp waits until the cluster command has written OUT/figures.json,
// which it does once every node is Ready and the add-ons run, and returns
// the seconds it says that took.
func waitUp(ctx context.Context, clusterOut string, exited <-chan error, timeout time.Duration) (float64, error) {
	deadline := time.After(timeout)
	f := filepath.Join(clusterOut, "figures.json")
	for {
		if b, err := os.ReadFile(f); err == nil {
			var fig struct {
				AddonsSeconds float64 `json:"addonsSeconds"`
			}
			if err := json.Unmarshal(b, &fig); err != nil {
				return 0, fmt.Errorf("the cluster's %s: %w", f, err)
			}
			return fig.AddonsSeconds, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("the cluster stopped before it was up: %v", err)
		case <-deadline:
			return 0, fmt.Errorf("the cluster was not up within %s", timeout)
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(2 * time.Second):
		}
	}
}

// notSkipped narrows asked by the run's -skip: what the run left out was
// not asked for, and is no result (the skip list's specs, by contrast,
// are asked for and counted as listed).
func notSkipped(asked func(string) bool, skip *regexp.Regexp) func(string) bool {
	return func(name string) bool { return asked(name) && !specMatches(skip, name) }
}

// runSuite runs e2e.test under ginkgo against kubeconfig, its output to
// OUT/e2e.log and here. A failed spec makes ginkgo exit non-zero; the
// JUnit report says which, so that is not an error here unless no report
// was written.
func runSuite(ctx context.Context, o options, focus, skip, kubeconfig, junit string, out io.Writer) error {
	args := []string{"-p", "--procs=" + strconv.Itoa(o.procs), "--timeout=" + o.suiteTimeout.String(),
		"--junit-report=" + filepath.Base(junit), "--output-dir=" + filepath.Dir(junit), "--no-color", "--focus=" + focus}
	if skip != "" {
		args = append(args, "--skip="+skip)
	}
	args = append(args, filepath.Join(o.e2eDir, "e2e.test"), "--",
		// --num-nodes: the skeleton provider leaves it at -1, and specs
		// that need two nodes or more (Networking Granular Checks) then
		// skip themselves ("Requires at least 2 nodes (not -1)").
		"--provider=skeleton", "--num-nodes="+strconv.Itoa(o.n), "--kubeconfig="+kubeconfig, "--kubectl-path="+o.kubectl,
		"--report-dir="+filepath.Dir(junit), "--non-blocking-taints=node-role.kubernetes.io/control-plane")
	logf, err := os.Create(filepath.Join(o.out, "e2e.log"))
	if err != nil {
		return fmt.Errorf("creating the suite's log: %w", err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(o.e2eDir, "ginkgo"), args...)
	// Ctrl-C interrupts ginkgo as a terminal's Ctrl-C would, in its own
	// process group: its suite processes take the SIGINT themselves (the
	// CLI does not pass one on: a SIGINT to the CLI alone left the last
	// spec running), clean up, and the report is written, so a run cut
	// short still says what passed and failed. Killed only if that takes
	// too long.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 3 * time.Minute
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+o.repoList)
	cmd.Stdout = io.MultiWriter(logf, prefixed(out, "e2e: "))
	cmd.Stderr = cmd.Stdout
	fmt.Fprintf(out, "conformance: %s %s\n", cmd.Path, strings.Join(args, " "))
	return cmd.Run()
}

// e2eVersion is e2e.test's Kubernetes version.
func e2eVersion(ctx context.Context, bin string) (string, error) {
	b, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", fmt.Errorf("%s --version printed nothing", bin)
	}
	return f[len(f)-1], nil
}

// imageVersion is the node image's berth version and components, from
// its manifest (its accepts are not needed, so not decoded).
func imageVersion(dir string) string {
	m, _, err := manifest.LoadDeferred(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return fmt.Sprintf("berth %s, kernel %s, containerd %s, runc %s", m.BerthVersion, m.KernelVersion, m.Components["containerd"], m.Components["runc"])
}

// prefixWriter writes each whole line to w behind prefix; a partial
// line waits for its end.
type prefixWriter struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  string
	partial []byte
}

func prefixed(w io.Writer, prefix string) io.Writer {
	return &prefixWriter{w: w, prefix: prefix}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, p.partial[:i+1]); err != nil {
			return 0, err
		}
		p.partial = p.partial[i+1:]
	}
	// A line without end (a progress bar) is shown once it is long.
	if len(p.partial) > 16<<10 {
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.partial); err != nil {
			return 0, err
		}
		p.partial = p.partial[:0]
	}
	return len(b), nil
}

// e2eNodeConfig is the NodeConfig part every node of a run is given
// besides its join: what the suite expects of an e2e node (the file says
// what and why).
//
//go:embed e2e-node.yaml
var e2eNodeConfig []byte

// e2eNodeArgs writes e2eNodeConfig under dir and returns the cluster
// command's flags that give it to each of n nodes.
func e2eNodeArgs(dir string, n int) ([]string, error) {
	path := filepath.Join(dir, "e2e-node.yaml")
	if err := fsutil.WriteFileAtomic(path, e2eNodeConfig, 0o644); err != nil {
		return nil, fmt.Errorf("writing the e2e nodes' NodeConfig part: %w", err)
	}
	var args []string
	for i := range n {
		args = append(args, "-node-config", vcluster.NodeAt(i).Name+"="+path)
	}
	return args, nil
}
