package nodeconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/berth-node/berth/config/al2"
	"github.com/berth-node/berth/config/bottlerocket"
	"github.com/berth-node/berth/config/userdata"
)

// DefaultConfigDir holds NodeConfigs baked into the image, read first.
const DefaultConfigDir = "/etc/berth/config.d"

// UserDataSource is the Name to give IMDS user data in a Source.
const UserDataSource = "user-data"

// CmdlineConfigKey is the kernel command-line key naming extra config files,
// read last: berth.config=/path/a.yaml[,/path/b.yaml]. It may repeat. The
// cmdline package parses the command line; SplitConfigPaths splits values.
const CmdlineConfigKey = "berth.config"

// Source is raw config from one place: a file (Name is its path) or IMDS
// user data (Name is UserDataSource). Data may be anything userdata.Decode
// accepts, so a file may hold MIME or gzip too. User data is held to EC2's
// limit (userdata.MaxUserDataSize), a file to userdata.MaxDecodedSize.
type Source struct {
	Name string
	Data []byte
}

// Skipped is a user-data part that is not a NodeConfig.
type Skipped struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Result is what Load found, for the plan and for the boot report.
type Result struct {
	// Config is the merged NodeConfig; non-nil even when Problems has errors.
	Config *NodeConfig `json:"-"`
	// Used names every document merged into Config, in merge order.
	Used []string `json:"used"`
	// Skipped lists user-data parts that were not NodeConfigs.
	Skipped []Skipped `json:"skipped,omitempty"`
	// DescribeCluster, when set, is a cluster an Amazon Linux 2 script
	// named without its endpoint or CA, which bootstrap.sh then read from
	// EKS's DescribeCluster. The caller makes that call and gives the
	// answer to FillFromEKS; until then the merged config is not validated
	// (Problems holds the documents' own problems only).
	DescribeCluster *DescribeClusterRequest `json:"describeCluster,omitempty"`
	// NotRun lists the commands of an Amazon Linux 2 script part other
	// than its bootstrap.sh invocation, which berth read (Used names it):
	// berth runs no shell, and the operator must move what they did into
	// the NodeConfig or the image. At most MaxNotRun, each clipped.
	NotRun []NotRun `json:"notRun,omitempty"`
	// Problems lists everything found, errors and warnings, in order: the
	// first MaxProblems, then, if there were more, one line counting the
	// rest (its Omitted is set).
	Problems []Problem `json:"problems,omitempty"`
}

// Load decodes, parses, merges and validates sources in order (image
// directory, user data, kernel command-line files: see DirSources and
// FileSources). Skipped parts and warnings are logged. The error is
// non-nil when any problem is an error; Result is returned regardless so
// that the caller can report everything.
func Load(ctx context.Context, log *slog.Logger, srcs []Source) (*Result, error) {
	return LoadWith(ctx, log, srcs, Options{})
}

// LoadWith is Load with what opts knows (ValidateDocumentWith); the
// caller says which checks it could not make (Options.NotChecked).
func LoadWith(ctx context.Context, log *slog.Logger, srcs []Source, opts Options) (*Result, error) {
	res := &Result{}
	var found problemList
	var docs []Document
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			res.Problems = found.problems()
			return res, fmt.Errorf("loading NodeConfig sources: %w", err)
		}
		var parts []userdata.Document
		var err error
		if src.Name == UserDataSource {
			parts, err = userdata.Decode(src.Data) // held to EC2's limit
		} else {
			parts, err = userdata.DecodeNamed(src.Name, src.Data)
		}
		if err != nil {
			found.add(Problem{Severity: SeverityError, Source: src.Name, Message: err.Error()})
			continue
		}
		for _, part := range parts {
			// AL2's user data, read into a NodeConfig in the part's place.
			var foreign func(*slog.Logger, userdata.Document, *Result) (string, *NodeConfig, []Problem)
			switch {
			case part.IsShellScript() && al2.IsBootstrapScript(part.Data):
				foreign = readAL2
			case part.IsCloudConfig() && al2.IsEksctlCloudConfig(part.Data):
				foreign = readEksctl
			}
			if foreign != nil {
				source, cfg, ps := foreign(log, part, res)
				found.add(ps...)
				if cfg != nil {
					docs = append(docs, Document{Source: source, Config: cfg})
					res.Used = append(res.Used, source)
				}
				continue
			}
			if !part.IsNodeConfig() {
				log.Info("skipping "+part.Source+": "+part.Skip, "source", part.Source, "contentType", part.ContentType)
				res.Skipped = append(res.Skipped, Skipped{Source: part.Source, Reason: part.Skip})
				if part.MistypedNodeConfig {
					found.add(Problem{Severity: SeverityWarning, Source: part.Source, Message: "skipped: " + part.Skip})
				}
				continue
			}
			if bottlerocket.IsSettings(part.Data) {
				source, cfg, ps := readBottlerocket(part.Source, part.Data)
				found.add(ps...)
				if cfg != nil {
					docs = append(docs, Document{Source: source, Config: cfg})
					res.Used = append(res.Used, source)
				}
				continue
			}
			cfg, ps, err := Parse(part.Source, part.Data)
			found.add(ps...)
			if err != nil {
				found.add(asProblem(part.Source, err))
				continue
			}
			docs = append(docs, Document{Source: part.Source, Config: cfg})
			res.Used = append(res.Used, part.Source)
		}
	}
	if len(docs) == 0 {
		// Otherwise the only words are "spec.cluster.name: required",
		// about user data whose every part was skipped for its type.
		for _, sk := range res.Skipped {
			if !slices.ContainsFunc(found.list, func(p Problem) bool { return p.Source == sk.Source }) {
				found.add(Problem{Severity: SeverityWarning, Source: sk.Source, Message: "skipped, and no other part is a NodeConfig: " + sk.Reason})
			}
		}
	}
	configs := make([]*NodeConfig, len(docs))
	for i, d := range docs {
		configs[i] = d.Config
	}
	merged, err := Merge(configs...)
	if err != nil {
		// Validate names the document with the bad TOML; merge what can be.
		found.add(Problem{Severity: SeverityError, Source: MergedSource, Path: "spec.containerd.config", Message: err.Error()})
		merged = &NodeConfig{}
	}
	res.Config = merged
	for _, d := range docs {
		found.add(ValidateDocumentWith(d.Source, d.Config, opts)...)
	}
	if req := res.DescribeCluster; req != nil {
		if c := merged.Spec.Cluster; c.APIServerEndpoint != "" && len(c.CertificateAuthority) > 0 {
			res.DescribeCluster = nil
		} else {
			found.add(Problem{Severity: SeverityWarning, Source: req.Source, Path: "bootstrap.sh --apiserver-endpoint, --b64-cluster-ca",
				Message: fmt.Sprintf("not both given, nor by another part: berth reads the cluster's endpoint, CA and service CIDR from eks:DescribeCluster %s with the instance role at boot, as AL2's bootstrap.sh did (its one AWS call for config outside IMDS)", quote(req.Cluster))})
		}
	}
	if res.DescribeCluster == nil {
		found.add(ValidateMerged(merged)...)
	}
	res.Problems = found.problems()
	for _, p := range res.Problems {
		if p.Severity == SeverityWarning {
			log.Warn(p.Error(), "source", p.Source, "path", p.Path)
		}
	}
	return res, Errors(res.Problems)
}

// NotRun is a command of a script part that berth did not run.
type NotRun struct {
	Source string `json:"source"`
	Line   int    `json:"line"`
	Text   string `json:"text"`
}

// MaxNotRun caps Result.NotRun and the console lines about it; a script
// of thousands of commands is hostile or generated, and the count says so.
const MaxNotRun = 32

// readAL2 reads the bootstrap.sh invocation of an Amazon Linux 2 script
// part as a NodeConfig (FromAL2), records and logs the script's other
// commands as not run, and returns the NodeConfig's source name. cfg is
// nil when the script cannot be read.
func readAL2(log *slog.Logger, part userdata.Document, res *Result) (string, *NodeConfig, []Problem) {
	inv, err := al2.Read(part.Data)
	if err != nil {
		return part.Source, nil, []Problem{{Severity: SeverityError, Source: part.Source,
			Message: "reading its Amazon Linux 2 bootstrap.sh invocation (berth runs no shell; it reads the arguments): " + err.Error()}}
	}
	source := al2Source(part.Source, inv.Line)
	noteNotRun(log, res, part.Source, inv.NotRun)
	o, err := al2.OptionsOf(inv)
	if err != nil {
		return source, nil, []Problem{{Severity: SeverityError, Source: source, Message: err.Error()}}
	}
	cfg, ps := FromAL2(source, o)
	describeIfMissing(res, source, o)
	return source, cfg, ps
}

// noteNotRun records and logs a part's commands berth did not run.
func noteNotRun(log *slog.Logger, res *Result, source string, lines []al2.Line) {
	for i, l := range lines {
		if i == MaxNotRun {
			log.Warn(fmt.Sprintf("not run: %d more commands of %s", len(lines)-i, source), "source", source)
			break
		}
		text := truncateText(l.Text, 200)
		res.NotRun = append(res.NotRun, NotRun{Source: source, Line: l.N, Text: text})
		log.Warn(fmt.Sprintf("not run: %s line %d: %s", source, l.N, text), "source", source, "line", l.N)
	}
}

// describeIfMissing leaves a DescribeCluster pending when bootstrap.sh's
// options give no endpoint or no CA; Load decides after the merge, since
// another part may give them.
func describeIfMissing(res *Result, source string, o al2.Options) {
	_, hasEndpoint := o.Set["--apiserver-endpoint"]
	_, hasCA := o.Set["--b64-cluster-ca"]
	if !hasEndpoint || !hasCA {
		res.DescribeCluster = &DescribeClusterRequest{Cluster: o.ClusterName, Source: source, IPFamily: strings.ToLower(o.Set["--ip-family"])}
	}
}

// readEksctl reads eksctl's Amazon Linux 2 cloud-config (config/al2's
// ReadEksctl) as a NodeConfig named "<part> (eksctl's AL2 cloud-config)":
// bootstrap.sh's options as bootstrap.al2.sh gave them (FromAL2), with
// kubelet-extra.json's fields merged over kubelet's config, as its jq did;
// runcmd's other commands are not run, and what the scripts did that
// berth does not is a warning. cfg is nil when it cannot be read.
func readEksctl(log *slog.Logger, part userdata.Document, res *Result) (string, *NodeConfig, []Problem) {
	source := part.Source + " (eksctl's AL2 cloud-config)"
	e, err := al2.ReadEksctl(part.Data)
	if err != nil {
		return source, nil, []Problem{{Severity: SeverityError, Source: source, Message: err.Error()}}
	}
	noteNotRun(log, res, part.Source, e.NotRun)
	cfg, ps := FromAL2(source, e.Options)
	for _, w := range e.Warnings {
		ps = append(ps, Problem{Severity: SeverityWarning, Source: source, Message: w})
	}
	describeIfMissing(res, source, e.Options)
	if len(e.KubeletExtra) == 0 {
		return source, cfg, ps
	}
	extra := &NodeConfig{APIVersion: APIVersion, Kind: Kind}
	extra.Spec.Kubelet.Config = InlineDocument(e.KubeletExtra)
	merged, err := Merge(cfg, extra)
	if err != nil {
		return source, nil, append(ps, Problem{Severity: SeverityError, Source: source, Path: "spec.kubelet.config",
			Message: "merging " + al2.EksctlKubeletExtraPath + ": " + err.Error()})
	}
	return source, merged, ps
}

// truncateText clips s to n bytes on a rune boundary, marking the cut,
// with control characters (a script's tabs, or worse) as U+FFFD: the text
// goes to the console.
func truncateText(s string, n int) string {
	cut := ""
	if len(s) > n {
		s, cut = strings.ToValidUTF8(s[:n], ""), "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, s) + cut
}

func asProblem(source string, err error) Problem {
	var p Problem
	if errors.As(err, &p) {
		return p
	}
	return Problem{Severity: SeverityError, Source: source, Message: err.Error()}
}

// DirSources reads the NodeConfig files in dir in lexical order: regular
// files named *.yaml, *.yml or *.json. A missing dir gives no sources, as
// an image need not bake any config.
func DirSources(dir string) ([]Source, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading config directory %s: %w", dir, err)
	}
	var paths []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	return FileSources(paths...)
}

// FileSources reads the named files, in order, each as one Source.
func FileSources(paths ...string) ([]Source, error) {
	srcs := make([]Source, 0, len(paths))
	for _, p := range paths {
		data, err := readCapped(p, userdata.MaxDecodedSize)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, Source{Name: p, Data: data})
	}
	return srcs, nil
}

func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading NodeConfig %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading NodeConfig %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("reading NodeConfig %s: over the %d-byte limit (userdata.MaxDecodedSize)", path, limit)
	}
	return data, nil
}

// SplitConfigPaths turns the values of berth.config= (from the cmdline
// package's Cmdline.All(CmdlineConfigKey)) into paths, in order; a value
// may hold a comma-separated list.
func SplitConfigPaths(values ...string) []string {
	var paths []string
	for _, val := range values {
		for p := range strings.SplitSeq(val, ",") {
			if p = strings.TrimSpace(p); p != "" {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

// BootSources assembles the sources a booting node reads, in merge order:
// the image's config directory (DefaultConfigDir), IMDS user data (nil or
// empty when there is none), then cmdlinePaths, the files named by
// berth.config= on the kernel command line (see SplitConfigPaths). A file
// named on the command line that cannot be read is an error: someone asked
// for it explicitly.
func BootSources(imageDir string, userData []byte, cmdlinePaths []string) ([]Source, error) {
	var ud *Source
	if len(userData) > 0 {
		ud = &Source{Name: UserDataSource, Data: userData}
	}
	return BootSourcesWith(imageDir, ud, cmdlinePaths)
}

// BootSourcesWith is BootSources with user data from elsewhere than IMDS
// (a NoCloud seed, berth.userdata=): a Source named for where it came
// from, decoded as a file is (to userdata.MaxDecodedSize, not EC2's
// limit); nil or empty for none.
func BootSourcesWith(imageDir string, userData *Source, cmdlinePaths []string) ([]Source, error) {
	srcs, err := DirSources(imageDir)
	if err != nil {
		return nil, err
	}
	if userData != nil && len(userData.Data) > 0 {
		srcs = append(srcs, *userData)
	}
	extra, err := FileSources(cmdlinePaths...)
	if err != nil {
		return nil, fmt.Errorf("kernel command line %s=: %w", CmdlineConfigKey, err)
	}
	return append(srcs, extra...), nil
}

// Check validates files as `berth check [--strict] FILE...` does: they are
// loaded in order as one node's config, so required fields may come from
// any of them. Every problem is returned, not just the first, up to
// MaxProblems and a line counting the rest (use Count for the totals);
// under strict, unknown fields and feature gates are errors. ok is false
// on any error.
func Check(strict bool, files ...string) (problems []Problem, ok bool) {
	return CheckWith(Options{}, strict, files...)
}

// CheckWith is Check with what opts knows (`berth check --manifest`).
func CheckWith(opts Options, strict bool, files ...string) (problems []Problem, ok bool) {
	_, problems, ok = CheckResult(opts, strict, files...)
	return problems, ok
}

// CheckResult is CheckWith that also returns what Load found (nil when no
// file was given), for a caller that goes on to build the plan.
func CheckResult(opts Options, strict bool, files ...string) (res *Result, problems []Problem, ok bool) {
	if len(files) == 0 {
		return nil, []Problem{{Severity: SeverityError, Source: "berth check", Message: "no files given; usage: berth check [--strict] FILE..."}}, false
	}
	var found problemList
	var srcs []Source
	for _, f := range files {
		s, err := FileSources(f)
		if err != nil {
			found.add(Problem{Severity: SeverityError, Source: f, Message: err.Error()})
			continue
		}
		srcs = append(srcs, s...)
	}
	return checkSources(&found, opts, strict, srcs)
}

// CheckSources is CheckResult for sources already read, each decoded as
// a file is (Source.Name other than UserDataSource): `berth check --seed`
// gives a NoCloud seed's user-data this way. No sources is an error, as
// no files is for CheckResult.
func CheckSources(opts Options, strict bool, srcs []Source) (res *Result, problems []Problem, ok bool) {
	if len(srcs) == 0 {
		return nil, []Problem{{Severity: SeverityError, Source: "berth check", Message: "no config sources given"}}, false
	}
	return checkSources(&problemList{}, opts, strict, srcs)
}

// checkSources loads srcs after the problems already found (files that
// could not be read) and returns them all.
func checkSources(found *problemList, opts Options, strict bool, srcs []Source) (res *Result, problems []Problem, ok bool) {
	log := slog.New(slog.DiscardHandler)
	res, _ = LoadWith(context.Background(), log, srcs, opts)
	found.add(res.Problems...)
	problems = found.problems()
	if strict {
		for i := range problems {
			promoteUnknown(&problems[i])
		}
	}
	return res, problems, !HasErrors(problems)
}
