//go:build components

// The oracle test holds berth's verdict on user data to the real kubelet's
// and containerd's (built by components.mk, found under
// BERTH_COMPONENTS_DIR): `make test-components-node` runs it.

package nodeconfig_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/manifest/builtin"
	"github.com/berth-node/berth/config/nodeconfig"
	imagespec "github.com/berth-node/berth/image/spec"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/runtime/containerd"
	"github.com/berth-node/berth/runtime/kubelet"
)

// oracleCase is one entry of testdata/oracle/corpus.yaml.
type oracleCase struct {
	Name string `yaml:"name"`
	// Reason says in one line what the input is and why it gets its
	// verdict; for Want berth, the berth rule that refuses it.
	Reason string `yaml:"reason"`
	// Want is the verdict: accept (berth, kubelet and containerd all
	// accept), refuse (berth refuses, and so does kubelet or containerd
	// given the same values, or there is nothing they could be given), or
	// berth (berth refuses by a documented rule of its own where kubelet
	// and containerd would run).
	Want string `yaml:"want"`
	// Spec is YAML put under the base document's spec: (base.yaml), or
	// UserData is the whole user data instead.
	// UserData may hold {{base}} (base.yaml's text) and {{ca}} (its CA's
	// base64); File names user data elsewhere in the repository, relative
	// to this package.
	Spec     string `yaml:"spec"`
	UserData string `yaml:"userData"`
	File     string `yaml:"file"`
}

// oracleInstance is the instance every case renders for, as
// `berth render --metadata` would get it.
var oracleInstance = imds.Metadata{
	InstanceID: "i-0123456789abcdef0", InstanceType: "m5.large", LocalIPv4: "10.0.12.34",
	LocalHostname: "ip-10-0-12-34.us-west-2.compute.internal", AvailabilityZone: "us-west-2a", Region: "us-west-2",
	IPv6s: []string{"2600:1f14:aaaa::1"},
}

// oracleManifest is the image's: the components under test, and what
// they accept as `make accepts` generated it for the image.
func oracleManifest(t testing.TB, dir, kubeletBin, containerdBin string) *manifest.Manifest {
	t.Helper()
	// The default image's preload list (the plan refuses to block a
	// module the image preloads), as check and render take it without
	// --manifest.
	def, err := builtin.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{
		Components:   map[string]string{"kubelet": version(kubeletBin, "kube-"), "containerd": version(containerdBin, "containerd-")},
		SandboxImage: "registry.k8s.io/pause:3.10",
		Preload:      def.Preload,
		Accepts:      &accepts.Accepts{},
	}
	for _, f := range []string{"kubelet-" + m.Components["kubelet"], "containerd-" + m.Components["containerd"]} {
		a, err := accepts.Load(filepath.Join(dir, "accepts", f+".json"))
		if err != nil {
			t.Fatalf("%v: run `make accepts`", err)
		}
		if err := m.Accepts.Merge(a); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// version is the version in a component's build directory's name
// (build/components/kube-v1.35.4/kubelet).
func version(bin, prefix string) string {
	return strings.TrimPrefix(filepath.Base(filepath.Dir(bin)), prefix)
}

func loadCorpus(t testing.TB) ([]oracleCase, []byte) {
	t.Helper()
	data, err := os.ReadFile("testdata/oracle/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []oracleCase
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cases); err != nil {
		t.Fatalf("testdata/oracle/corpus.yaml: %v", err)
	}
	base, err := os.ReadFile("testdata/oracle/base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, c := range cases {
		switch {
		case c.Name == "" || seen[c.Name]:
			t.Fatalf("corpus entry %d: name %q empty or repeated", i, c.Name)
		case strings.TrimSpace(c.Reason) == "" || strings.Contains(strings.TrimSpace(c.Reason), "\n"):
			t.Fatalf("corpus entry %s: want a one-line reason", c.Name)
		case !slices.Contains([]string{"accept", "refuse", "berth"}, c.Want):
			t.Fatalf("corpus entry %s: want is %q; want accept, refuse or berth", c.Name, c.Want)
		case btoi(c.Spec != "")+btoi(c.UserData != "")+btoi(c.File != "") != 1:
			t.Fatalf("corpus entry %s: give one of spec, userData and file", c.Name)
		}
		seen[c.Name] = true
	}
	return cases, base
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

var caRE = regexp.MustCompile(`certificateAuthority: (\S+)`)

// userData is the case's user data: base.yaml with Spec under spec:, or
// its UserData or File.
func (c oracleCase) userData(base []byte) ([]byte, error) {
	switch {
	case c.File != "":
		return os.ReadFile(c.File)
	case c.UserData != "":
		ca := caRE.FindSubmatch(base)
		if ca == nil {
			return nil, fmt.Errorf("base.yaml has no certificateAuthority")
		}
		r := strings.NewReplacer("{{base}}", string(base), "{{ca}}", string(ca[1]))
		return []byte(r.Replace(c.UserData)), nil
	}
	var b bytes.Buffer
	b.Write(base)
	for _, line := range strings.SplitAfter(strings.TrimRight(c.Spec, "\n")+"\n", "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
	}
	return b.Bytes(), nil
}

// nodeInput is what kubelet and containerd are given for one case.
type nodeInput struct {
	files       map[string][]byte
	kubeletArgv []string
	// containerdArgv are containerd's arguments, without argv[0].
	containerdArgv []string
	// none says why there is no input: the user data is not a NodeConfig
	// berth or nodeadm could take values from.
	none string
}

// berthVerdict judges data as `berth render` does (load, merge, validate,
// plan) and returns the node's files and kubelet's arguments when it
// accepts, and its problems when it refuses.
func berthVerdict(ctx context.Context, man *manifest.Manifest, data []byte) (*plan.Plan, *nodeconfig.Result, string) {
	res, err := nodeconfig.LoadWith(ctx, slog.New(slog.DiscardHandler), []nodeconfig.Source{{Name: nodeconfig.UserDataSource, Data: data}}, nodeconfig.Options{Accepts: man.Accepts})
	if err != nil {
		var lines []string
		for _, p := range res.Problems {
			if p.Severity == nodeconfig.SeverityError {
				lines = append(lines, p.String())
			}
		}
		return nil, res, strings.Join(lines, "; ")
	}
	if res.DescribeCluster != nil {
		return nil, res, "leaves the cluster to DescribeCluster (no answer in the oracle)"
	}
	in := oracleInstance
	p, err := plan.Build(plan.Inputs{Config: res.Config, Instance: &in, Manifest: man, Host: plan.Host{CPUs: 2}})
	if err != nil {
		return nil, res, err.Error()
	}
	return p, res, ""
}

func planInput(p *plan.Plan) nodeInput {
	in := nodeInput{files: map[string][]byte{}}
	for _, f := range p.Files {
		in.files[f.Path] = f.Data
	}
	for _, s := range p.Services {
		switch s.Name {
		case "kubelet":
			in.kubeletArgv = s.Argv[1:]
		case "containerd":
			in.containerdArgv = s.Argv[1:]
		}
	}
	return in
}

// rawInput is what kubelet and containerd would be given for user data
// berth refuses, if berth wrote the user's kubelet config, flags and
// containerd config as nodeadm does (unchecked) over the base case's
// node: so that each refusal is held to the components' verdict too.
func rawInput(man *manifest.Manifest, base *plan.Plan, res *nodeconfig.Result) nodeInput {
	if res == nil || res.Config == nil || len(res.Used) == 0 {
		return nodeInput{none: "no NodeConfig was read"}
	}
	in := planInput(base)
	u := res.Config.Spec
	if len(u.Kubelet.Config) > 0 {
		if d, err := kubelet.DropIn(u.Kubelet.Config); err == nil {
			in.files[kubelet.DropInPath] = d
			if !slices.Contains(in.kubeletArgv, "--config-dir="+kubelet.ConfigDir) {
				in.kubeletArgv = append([]string{"--config-dir=" + kubelet.ConfigDir}, in.kubeletArgv...)
			}
		}
	}
	in.kubeletArgv = append(in.kubeletArgv, kubelet.SplitUserFlags(u.Kubelet.Flags)...)
	if u.Containerd.Config != "" {
		if c, err := containerd.Config(containerd.ConfigInputs{Schema: 3, SandboxImage: man.SandboxImage, User: u.Containerd.Config}); err == nil {
			in.files[containerd.ConfigPath] = c
		} else {
			in.files[containerd.ConfigPath] = []byte(u.Containerd.Config)
		}
	}
	if len(u.Containerd.BaseRuntimeSpec) > 0 {
		if s, err := containerd.BaseRuntimeSpec(u.Containerd.BaseRuntimeSpec); err == nil {
			in.files[containerd.BaseRuntimeSpecPath] = s
		}
	}
	return in
}

func componentsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		t.Fatal("BERTH_COMPONENTS_DIR is not set: run `make kube containerd` and set it to build/components")
	}
	return dir
}

func newest(t testing.TB, pattern string) string {
	t.Helper()
	bins, err := filepath.Glob(pattern)
	if err != nil || len(bins) == 0 {
		t.Fatalf("nothing matches %s (%v): run `make kube containerd`", pattern, err)
	}
	slices.Sort(bins)
	return bins[len(bins)-1]
}

// containerdVerdict is containerd's `config dump` of the config.toml.
func containerdVerdict(ctx context.Context, bin, dir string, cfg []byte) (verdict, error) {
	f := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(f, cfg, 0o600); err != nil {
		return verdict{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--config", f, "config", "dump").CombinedOutput()
	if ctx.Err() != nil {
		return verdict{}, fmt.Errorf("containerd config dump ran past its deadline")
	}
	if err != nil {
		return verdict{why: strings.TrimSpace(tail(string(out), 400))}, nil
	}
	return verdict{accepted: true}, nil
}

// oracleResult is one case's outcome.
type oracleResult struct {
	c                oracleCase
	berthOK          bool
	berthWhy         string
	none             string
	kubelet, ctrd    verdict
	componentsRan    bool
	componentsAccept bool
	err              error
}

// outcome is the verdict the case got, in the corpus's words.
func (r oracleResult) outcome() string {
	switch {
	case r.berthOK && r.componentsAccept:
		return "accept"
	case r.berthOK:
		return "disagree: berth accepts what " + r.refuser() + " refuses"
	case r.none != "" || !r.componentsAccept:
		return "refuse"
	default:
		return "berth"
	}
}

func (r oracleResult) refuser() string {
	switch {
	case !r.kubelet.accepted && !r.ctrd.accepted:
		return "kubelet and containerd"
	case !r.kubelet.accepted:
		return "kubelet"
	default:
		return "containerd"
	}
}

// TestOracle renders every corpus case with berth, in process, and hands
// what berth would write (or, for a case berth refuses, the user's values
// written unchecked) to the real kubelet and containerd. It fails when
// berth accepts what either refuses, when berth refuses what both accept
// and the case does not name a berth rule for it (want: berth), and when
// a case's outcome is not the one it records.
func TestOracle(t *testing.T) {
	start := time.Now()
	dir := componentsDir(t)
	kubeletBin := newest(t, filepath.Join(dir, "kube-v*", "kubelet"))
	containerdBin := newest(t, filepath.Join(dir, "containerd-v*", "containerd"))
	cases, base := loadCorpus(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	sb := newSandbox(t)

	man := oracleManifest(t, dir, kubeletBin, containerdBin)
	basePlan, _, why := berthVerdict(ctx, man, base)
	if basePlan == nil {
		t.Fatalf("base.yaml: berth refuses it: %s", why)
	}
	extra := harnessKubeletFlags(t)
	image := imageFiles(t)

	// berth's side, in process; then each distinct kubelet input and
	// each distinct containerd input once (most cases change only one of
	// them), GOMAXPROCS at a time.
	results := make([]oracleResult, len(cases))
	inputs := make([]nodeInput, len(cases))
	for i, c := range cases {
		results[i], inputs[i] = judgeBerth(ctx, man, basePlan, image, c, base)
	}
	jobs := map[string]*componentJob{}
	var order []*componentJob
	for i := range cases {
		if results[i].err != nil || inputs[i].none != "" {
			continue
		}
		for _, j := range []*componentJob{kubeletJob(inputs[i], extra), containerdJob(inputs[i])} {
			if jobs[j.key] == nil {
				jobs[j.key] = j
				order = append(order, j)
			}
		}
	}
	limit := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, j := range order {
		dir, err := sb.tempDir()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		limit <- struct{}{}
		safe.Go(log, "oracle "+j.component, func() {
			defer wg.Done()
			defer func() { <-limit }()
			t0 := time.Now()
			// A panic is the job's error, not the whole test's.
			j.err = safe.Call(log, "oracle "+j.component, func() error {
				var err error
				j.v, err = j.run(ctx, log, sb, kubeletBin, containerdBin, dir)
				return err
			})
			j.took = time.Since(t0)
		}, nil)
	}
	wg.Wait()
	var took [2]time.Duration
	var runs [2]int
	var slowest *componentJob
	for _, j := range order {
		k := 0
		if j.component == "containerd" {
			k = 1
		}
		took[k] += j.took
		runs[k]++
		if slowest == nil || j.took > slowest.took {
			slowest = j
		}
	}
	for i := range cases {
		r := &results[i]
		if r.err != nil || inputs[i].none != "" {
			continue
		}
		kj, cj := jobs[kubeletJob(inputs[i], extra).key], jobs[containerdJob(inputs[i]).key]
		r.kubelet, r.ctrd, r.err = kj.v, cj.v, errors.Join(kj.err, cj.err)
		r.componentsAccept = r.kubelet.accepted && r.ctrd.accepted
	}
	t.Logf("oracle: %d kubelet runs (%s on average), %d containerd runs (%s on average), %d at a time; slowest: %s %s",
		runs[0], avg(took[0], runs[0]), runs[1], avg(took[1], runs[1]), cap(limit), slowest.component, slowest.took.Round(time.Millisecond))
	counts := map[string]int{}
	for _, r := range results {
		t.Run(r.c.Name, func(t *testing.T) {
			if r.err != nil {
				t.Fatalf("could not judge: %v", r.err)
			}
			got := r.outcome()
			counts[got]++
			detail := fmt.Sprintf("reason: %s\nberth: %v %s\nkubelet: %v %s\ncontainerd: %v %s\nno input: %s",
				r.c.Reason, r.berthOK, r.berthWhy, r.kubelet.accepted, r.kubelet.why, r.ctrd.accepted, r.ctrd.why, r.none)
			if strings.HasPrefix(got, "disagree") {
				t.Errorf("%s\n%s", got, detail)
				return
			}
			if got != r.c.Want {
				t.Errorf("outcome %s, the corpus says %s\n%s", got, r.c.Want, detail)
			}
		})
	}
	t.Logf("oracle: %d cases in %s: %d accepted by berth, kubelet and containerd; %d refused by berth and by kubelet or containerd (or not a NodeConfig); %d refused by berth's own rules; %d other",
		len(cases), time.Since(start).Round(time.Millisecond), counts["accept"], counts["refuse"], counts["berth"], len(cases)-counts["accept"]-counts["refuse"]-counts["berth"])
	if len(cases) < 150 {
		t.Errorf("the corpus has %d cases; issue 25 wants at least 150", len(cases))
	}
}

// harnessKubeletFlags are added after berth's: the node has cgroup v2,
// and kubelet 1.35 refuses to start on a cgroup v1 host unless told.
func harnessKubeletFlags(t testing.TB) []string {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return nil
	}
	return []string{"--fail-cgroupv1=false"}
}

// judgeBerth is berth's verdict on one case, and what kubelet and
// containerd are then given: what berth wrote or, when berth refused, the
// user's values written unchecked.
func judgeBerth(ctx context.Context, man *manifest.Manifest, basePlan *plan.Plan, image map[string][]byte, c oracleCase, base []byte) (oracleResult, nodeInput) {
	r := oracleResult{c: c}
	data, err := c.userData(base)
	if err != nil {
		r.err = err
		return r, nodeInput{}
	}
	p, res, why := berthVerdict(ctx, man, data)
	var in nodeInput
	if p != nil {
		r.berthOK = true
		in = planInput(p)
	} else {
		r.berthWhy = why
		in = rawInput(man, basePlan, res)
	}
	if in.none != "" {
		r.none = in.none
		return r, in
	}
	for p, data := range image {
		if _, ok := in.files[p]; !ok {
			in.files[p] = data
		}
	}
	return r, in
}

// componentJob is one run of kubelet or containerd on one input.
type componentJob struct {
	component string
	// key tells inputs apart: the files the component reads and its
	// arguments.
	key  string
	run  func(ctx context.Context, log *slog.Logger, sb *sandbox, kubeletBin, containerdBin, dir string) (verdict, error)
	v    verdict
	err  error
	took time.Duration
}

// Minutes, not seconds: unloaded each component gets there in about a
// second, but make test runs this beside image builds on 2 cores.
const componentDeadline = 3 * time.Minute

func kubeletJob(in nodeInput, extra []string) *componentJob {
	files := map[string][]byte{}
	for p, d := range in.files {
		if !strings.HasPrefix(p, "/etc/containerd/") {
			files[p] = d
		}
	}
	argv := append(slices.Clone(in.kubeletArgv), extra...)
	return &componentJob{component: "kubelet", key: inputKey("kubelet", files, argv),
		run: func(ctx context.Context, log *slog.Logger, sb *sandbox, kubeletBin, _, dir string) (verdict, error) {
			ctx, cancel := context.WithTimeout(ctx, componentDeadline)
			defer cancel()
			return runKubelet(ctx, log, sb, kubeletBin, dir, kubelet.ContainerRuntimeSock, files, argv)
		}}
}

func containerdJob(in nodeInput) *componentJob {
	files := map[string][]byte{}
	for p, d := range in.files {
		if strings.HasPrefix(p, "/etc/containerd/") || strings.HasPrefix(p, "/etc/") && !strings.HasPrefix(p, "/etc/kubernetes/") && !strings.HasPrefix(p, "/etc/eks/") {
			files[p] = d
		}
	}
	argv := in.containerdArgv
	return &componentJob{component: "containerd", key: inputKey("containerd", files, argv),
		run: func(ctx context.Context, log *slog.Logger, sb *sandbox, _, containerdBin, dir string) (verdict, error) {
			ctx, cancel := context.WithTimeout(ctx, componentDeadline)
			defer cancel()
			// config dump first: it names a bad key by its place in the
			// file, where containerd itself would only stop.
			v, err := containerdVerdict(ctx, containerdBin, dir, files[containerd.ConfigPath])
			if err != nil || !v.accepted {
				return v, err
			}
			return runContainerd(ctx, log, sb, containerdBin, dir, containerd.Socket, files, argv)
		}}
}

func inputKey(component string, files map[string][]byte, argv []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00", component, argv)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(files[p]))
		h.Write(files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func avg(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return (d / time.Duration(n)).Round(time.Millisecond)
}

// imageFiles are what the node image has, besides berth's rendered
// files, at the paths kubelet reads at start: image/spec.yaml's inline
// /etc files (passwd and group for kubelet's user namespace mappings,
// hosts), and the credential provider kubelet checks for (a link to
// berth there; never run here).
func imageFiles(t testing.TB) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile("../../image/spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The variables name build outputs, none of which is read here.
	data = []byte(os.Expand(string(data), func(string) string { return "/nonexistent" }))
	sp, err := imagespec.Parse(data)
	if err != nil {
		t.Fatalf("image/spec.yaml: %v", err)
	}
	files := map[string][]byte{kubelet.CredentialProviderBinDir + "/ecr-credential-provider": []byte("#!/bin/false\n")}
	for _, f := range sp.Root.Files {
		if f.Content != "" && strings.HasPrefix(f.Dst, "/etc/") {
			files[f.Dst] = []byte(f.Content)
		}
	}
	if files["/etc/passwd"] == nil {
		t.Fatal("image/spec.yaml has no inline /etc/passwd: the oracle's sandbox needs the image's")
	}
	return files
}

// FuzzOracle feeds the oracle's harness mutations of the corpus: user
// data berth accepts must start kubelet and containerd. Refusals are not
// judged here (a mutation berth refuses proves nothing about the
// components), so most inputs cost only berth's verdict. make
// fuzz-oracle runs it for a few minutes.
func FuzzOracle(f *testing.F) {
	dir := componentsDir(f)
	kubeletBin := newest(f, filepath.Join(dir, "kube-v*", "kubelet"))
	containerdBin := newest(f, filepath.Join(dir, "containerd-v*", "containerd"))
	cases, base := loadCorpus(f)
	man := oracleManifest(f, dir, kubeletBin, containerdBin)
	sb := newSandbox(f)
	extra := harnessKubeletFlags(f)
	image := imageFiles(f)
	log := slog.New(slog.DiscardHandler)
	basePlan, _, why := berthVerdict(context.Background(), man, base)
	if basePlan == nil {
		f.Fatalf("base.yaml: berth refuses it: %s", why)
	}
	// The seeds are TestOracle's cases, judged there: only mutations run
	// the components (the baseline would otherwise start both for each of
	// the hundred cases berth accepts, in every worker).
	seeds := map[string]bool{}
	for _, c := range cases {
		if data, err := c.userData(base); err == nil {
			f.Add(data)
			seeds[string(data)] = true
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if seeds[string(data)] {
			return
		}
		ctx := context.Background()
		c := oracleCase{Name: "fuzz", UserData: string(data)}
		r, in := judgeBerth(ctx, man, basePlan, image, c, base)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.berthOK {
			return
		}
		for _, j := range []*componentJob{kubeletJob(in, extra), containerdJob(in)} {
			jdir, err := sb.tempDir()
			if err != nil {
				t.Fatal(err)
			}
			v, err := j.run(ctx, log, sb, kubeletBin, containerdBin, jdir)
			os.RemoveAll(jdir)
			if err != nil {
				t.Fatalf("%s: %v", j.component, err)
			}
			if !v.accepted {
				t.Fatalf("berth accepts what %s refuses: %s\nuser data:\n%s", j.component, v.why, data)
			}
		}
	})
}
