package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"github.com/berth-node/berth/internal/syntax"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/config/userdata"
)

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// flagsDoc is a NodeConfig whose kubelet flags are n numbers: n errors.
func flagsDoc(n int) []byte {
	return []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [" +
		strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]\n")
}

// worstProblems is the worst case for problem collection: as large a
// document of wrongly typed list items as MaxDocumentSize allows (half a
// million errors), as gzip user data of about 1 KB.
func worstProblems(t testing.TB) []byte {
	t.Helper()
	doc := flagsDoc((MaxDocumentSize - 100) / 2)
	if len(doc) > MaxDocumentSize {
		t.Fatalf("document is %d bytes", len(doc))
	}
	z := gzipped(t, doc)
	if len(z) > userdata.MaxUserDataSize {
		t.Fatalf("user data is %d bytes", len(z))
	}
	return z
}

// allocated runs f and returns the bytes it allocated (TotalAlloc, which
// bounds the peak from above).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestProblemCapParse: Parse keeps MaxProblems problems and one line
// counting the rest, which says so and keeps HasErrors and Count true to
// what was found.
func TestProblemCapParse(t *testing.T) {
	_, ps, err := Parse("f.yaml", flagsDoc(1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != MaxProblems+1 {
		t.Fatalf("%d problems, want %d", len(ps), MaxProblems+1)
	}
	if got := ps[MaxProblems-1].String(); got != "error: f.yaml: spec.kubelet.flags[49]: want a string, got number 1" {
		t.Errorf("last kept problem: %s", got)
	}
	last := ps[MaxProblems]
	const want = "error: f.yaml: ... and 950 more problems (950 errors, 0 warnings) not listed; fix the ones above and check again"
	if last.String() != want || last.Omitted != (Omitted{Errors: 950}) {
		t.Errorf("omitted line:\n got %s %+v\nwant %s", last, last.Omitted, want)
	}
	if e, w := Count(ps); e != 1000 || w != 0 {
		t.Errorf("Count = %d errors, %d warnings; want 1000, 0", e, w)
	}
	if err := Errors(ps); err == nil || !strings.HasPrefix(err.Error(), "invalid NodeConfig (1000 errors):\n") ||
		strings.Count(err.Error(), "\n") != MaxProblems+1 {
		t.Errorf("Errors: %v", err)
	}
}

// TestProblemCapStrict: omitted unknown-field warnings are warnings, and
// errors under --strict.
func TestProblemCapStrict(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n    apiServerEndpoint: https://x.example.com\n    certificateAuthority: " + testCA(t) + "\n    cidr: 10.100.0.0/16\n")
	for i := range 100 {
		fmt.Fprintf(&b, "unknown%03d: x\n", i)
	}
	f := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, ok := Check(false, f)
	if !ok || len(ps) != MaxProblems+1 {
		t.Fatalf("Check: ok=%v, %d problems", ok, len(ps))
	}
	last := ps[MaxProblems]
	if last.Severity != SeverityWarning || !last.Unknown || last.Omitted != (Omitted{Warnings: 50, Unknown: 50}) || last.Source != f {
		t.Errorf("omitted line %+v", last)
	}
	ps, ok = Check(true, f)
	if ok {
		t.Fatal("Check --strict passed 100 unknown fields")
	}
	last = ps[MaxProblems]
	if last.Severity != SeverityError || last.Omitted != (Omitted{Errors: 50}) {
		t.Errorf("omitted line under --strict: %+v", last)
	}
	if e, w := Count(ps); e != 100 || w != 0 {
		t.Errorf("Count under --strict = %d, %d; want 100, 0", e, w)
	}
}

// TestProblemCapAcrossSources: the cap is on the whole Load, so the first
// problems of the first sources are kept and the line counting the rest
// names their source, or says there were several.
func TestProblemCapAcrossSources(t *testing.T) {
	res, err := Load(context.Background(), slog.New(slog.DiscardHandler), []Source{
		{Name: "a.yaml", Data: flagsDoc(40)},
		{Name: "b.yaml", Data: flagsDoc(40)},
	})
	if err == nil || len(res.Problems) != MaxProblems+1 {
		t.Fatalf("Load: %v, %d problems", err, len(res.Problems))
	}
	if res.Problems[39].Source != "a.yaml" || res.Problems[40].Source != "b.yaml" || res.Problems[49].Path != "spec.kubelet.flags[9]" {
		t.Errorf("kept %s, %s, %s", res.Problems[39], res.Problems[40], res.Problems[49])
	}
	// 30 more from b.yaml, then the four required fields no source set.
	last := res.Problems[MaxProblems]
	if last.Source != SeveralSources || last.Omitted != (Omitted{Errors: 34}) {
		t.Errorf("omitted line %s %+v", last, last.Omitted)
	}
	if !strings.Contains(err.Error(), "(84 errors)") || !strings.HasSuffix(err.Error(), "several sources: ... and 34 more problems (34 errors, 0 warnings) not listed; fix the ones above and check again") {
		t.Errorf("error %v", err)
	}
}

// TestProblemTextBounded: messages and paths that quote the input are cut,
// so 50 problems cannot hold 50 megabytes.
func TestProblemTextBounded(t *testing.T) {
	long := strings.Repeat("é", 50_000)
	// YAML allows no implicit key over 1024 characters; "? " makes the key
	// explicit.
	doc := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n? " + long + "\n: 1\nspec:\n  instance:\n    network:\n      nameservers: [\"" + long + "\"]\n"
	res, _ := Load(context.Background(), slog.New(slog.DiscardHandler), []Source{{Name: "long.yaml", Data: []byte(doc)}})
	var sawPath, sawMessage bool
	for _, p := range res.Problems {
		if len(p.Path) > maxPath || len(p.Message) > maxMessage {
			t.Errorf("problem of %d+%d bytes: %.100s", len(p.Path), len(p.Message), p)
		}
		sawPath = sawPath || strings.HasSuffix(p.Path, "... (100000 bytes)")
		sawMessage = sawMessage || strings.HasSuffix(p.Message, fmt.Sprintf("... (%d bytes)", len(syntax.IP(long, true).Error())))
		if !strings.HasPrefix(p.Message, "...") && !bytes.Equal(bytes.ToValidUTF8([]byte(p.Path+p.Message), nil), []byte(p.Path+p.Message)) {
			t.Errorf("cut inside a character: %.100s", p)
		}
	}
	if !sawPath || !sawMessage {
		t.Errorf("no cut path or message in %v", res.Problems)
	}
}

// laughs is the classic billion laughs: nine levels of nine aliases, 9^9
// strings from a few hundred bytes.
func laughs(levels int, scalar string) string {
	var b strings.Builder
	b.WriteString("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n  l0: &l0 [" + strings.TrimSuffix(strings.Repeat(scalar+",", 9), ",") + "]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 9), ","))
	}
	return b.String()
}

// dilutedBomb is an alias bomb that go-yaml's own check lets through: that
// check refuses a document whose decoding is mostly aliases, counting
// nodes, so 20000 plain list items let a few thousand aliases through,
// and each alias here is a 64 KiB string: levels=4 is 9^4 copies, 420 MB
// of JSON, from a few hundred bytes of gzip.
func dilutedBomb(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n")
	b.WriteString("  n: [" + strings.TrimSuffix(strings.Repeat("1,", 20000), ",") + "]\n")
	b.WriteString("  s: &l0 \"" + strings.Repeat("x", 64<<10) + "\"\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 9), ","))
	}
	return b.String()
}

// TestAliasBombs: YAML alias bombs small enough to be user data fail fast
// with an error naming the limit, without being expanded: the classic
// billion laughs (which go-yaml refuses too), and diluted ones, which
// go-yaml expands and which, before checkAliases, ran `berth check` out of
// memory (491 bytes of gzip: 4.9 GB, then a fatal out of memory).
func TestAliasBombs(t *testing.T) {
	// go-yaml alone expands a diluted bomb past the limit.
	if js, err := yaml.YAMLToJSON([]byte(dilutedBomb(2))); err != nil || len(js) <= MaxExpandedSize {
		t.Errorf("go-yaml on a diluted bomb: %d bytes of JSON, %v; this test no longer shows why checkAliases exists", len(js), err)
	}
	for _, tc := range []struct {
		name, doc string
		line      int
	}{
		{"billion laughs", laughs(8, `"lol"`), 9},
		{"diluted", dilutedBomb(4), 7},
		{"diluted flat", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n  s: &a \"" + strings.Repeat("x", 256<<10) + "\"\n  l: [*a, *a, *a, *a, *a]\n", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := gzipped(t, []byte(tc.doc))
			if len(data) > userdata.MaxUserDataSize {
				t.Fatalf("bomb is %d bytes of gzip, over the user-data limit", len(data))
			}
			var err error
			start := time.Now()
			alloc := allocated(func() {
				_, err = Load(context.Background(), slog.New(slog.DiscardHandler), []Source{{Name: UserDataSource, Data: data}})
			})
			took := time.Since(start)
			want := fmt.Sprintf("user-data: YAML aliases expand the document past the 1048576-byte limit (nodeconfig.MaxExpandedSize): the list at line %d expands to more than that", tc.line)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load:\n got %v\nwant it to contain %s", err, want)
			}
			t.Logf("%d bytes of gzip, %d of YAML: %s, %d bytes allocated", len(data), len(tc.doc), took, alloc)
			if alloc > 64<<20 {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
}

// TestAliasesStillWork: aliases that expand modestly, merge keys included,
// parse as before; an alias to itself is an error, not a hang.
func TestAliasesStillWork(t *testing.T) {
	doc := `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  base: &base {a: 1, b: [x, z]}
spec:
  kubelet:
    config:
      <<: *base
      c: 2
    flags: &flags [--v=2]
  instance:
    network:
      domains: *flags
`
	cfg, ps, err := Parse("a.yaml", []byte(doc))
	if err != nil || len(ps) != 0 {
		t.Fatalf("Parse: %v %v", err, ps)
	}
	if got := string(cfg.Spec.Kubelet.Config["b"]); got != `["x","z"]` || cfg.Spec.Instance.Network.Domains[0] != "--v=2" {
		t.Errorf("aliases not expanded: %s %q", got, cfg.Spec.Instance.Network.Domains)
	}
	// A document with the characters but no aliases measures quickly.
	if _, _, err := Parse("b.yaml", []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--a=*&\"]\n")); err != nil {
		t.Errorf("* and & in a string: %v", err)
	}
	_, _, err = Parse("c.yaml", []byte("a: &a [1, *a]\n"))
	if err == nil || !strings.Contains(err.Error(), "c.yaml: ") {
		t.Errorf("alias to itself: %v", err)
	}
	t.Logf("alias to itself: %v", err)
}

// TestWorstProblemsBounded: a hundred thousand errors from a few hundred
// bytes of gzip user data keep 51 problems and a short error, and Load's
// allocations stay a bounded multiple of the document. Before the cap
// every problem was kept: `berth check` on a 2 MiB version printed 83 MB
// and peaked at 700 MB. (BenchmarkLoadWorstProblems runs the largest
// case; this one is smaller so that -race stays quick.)
func TestWorstProblemsBounded(t *testing.T) {
	const n = 100_000
	data := gzipped(t, flagsDoc(n))
	var res *Result
	var err error
	alloc := allocated(func() {
		res, err = Load(context.Background(), slog.New(slog.DiscardHandler), []Source{{Name: UserDataSource, Data: data}})
	})
	if len(res.Problems) != MaxProblems+1 || err == nil || len(err.Error()) > 16<<10 {
		t.Fatalf("%d problems, error of %d bytes", len(res.Problems), len(err.Error()))
	}
	if e, _ := Count(res.Problems); e != n+4 {
		t.Errorf("counted %d errors, want %d", e, n+4)
	}
	t.Logf("%d bytes of gzip: %d bytes allocated; %s", len(data), alloc, res.Problems[MaxProblems])
	if alloc > 128<<20 {
		t.Errorf("Load allocated %d bytes", alloc)
	}
}

// BenchmarkLoadWorstProblems measures Load on the worst problem flood;
// B/op is the figure to watch.
func BenchmarkLoadWorstProblems(b *testing.B) {
	data := worstProblems(b)
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(context.Background(), log, []Source{{Name: UserDataSource, Data: data}}); err == nil {
			b.Fatal("no error")
		}
	}
}

// BenchmarkLoadLargestDocument measures Load on the documents that cost
// most to decode: MaxDocumentSize of one-byte list items and no problems,
// without an alias and with one (which adds checkAliases' parse).
func BenchmarkLoadLargestDocument(b *testing.B) {
	for _, alias := range []bool{false, true} {
		b.Run(fmt.Sprintf("alias=%v", alias), func(b *testing.B) {
			head := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n"
			if alias {
				head += "  a: &a x\n  b: *a\n"
			}
			doc := []byte(head + "  n: [" + strings.TrimSuffix(strings.Repeat("1,", (MaxDocumentSize-len(head)-16)/2), ",") + "]\n")
			if len(doc) > MaxDocumentSize {
				b.Fatalf("document is %d bytes", len(doc))
			}
			data := gzipped(b, doc)
			log := slog.New(slog.DiscardHandler)
			b.ReportAllocs()
			for b.Loop() {
				res, _ := Load(context.Background(), log, []Source{{Name: UserDataSource, Data: data}})
				if len(res.Used) != 1 {
					b.Fatalf("%+v", res.Problems)
				}
			}
		})
	}
}

// TestFileSizeLimit: a config file over userdata.MaxDecodedSize is refused
// by name before it is read whole; user data over EC2's 16 KiB is refused
// by Load.
func TestFileSizeLimit(t *testing.T) {
	f := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(f, make([]byte, userdata.MaxDecodedSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FileSources(f); err == nil || err.Error() != "reading NodeConfig "+f+": over the 4194304-byte limit (userdata.MaxDecodedSize)" {
		t.Errorf("FileSources: %v", err)
	}
	res, _ := Load(context.Background(), slog.New(slog.DiscardHandler), []Source{{Name: UserDataSource, Data: make([]byte, userdata.MaxUserDataSize+1)}})
	if len(res.Problems) == 0 || res.Problems[0].String() != "error: user-data: decoding user-data: 16385 bytes is over EC2's 16384-byte limit on raw user data (userdata.MaxUserDataSize)" {
		t.Errorf("Load of 16 KiB + 1 of user data: %v", res.Problems)
	}
}

// TestWorstNestingCheap: the worst nesting inputs, 1 KB of gzip user data
// nesting lists or maps 9,900 deep (go-yaml's own bound is 10,000) under
// kubelet.config or containerd.baseRuntimeSpec, in flow or block style,
// are refused with the nesting bound's path on go-yaml's node tree,
// before the document becomes values. Before, the duplicate-key check
// built each level's path on the way down: 600 MB allocated per document,
// 175 MB peak in `berth check`.
func TestWorstNestingCheap(t *testing.T) {
	const depth = 9900
	head := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"
	for _, tc := range []struct{ name, doc, path string }{
		{"lists under kubelet.config", head + "  kubelet:\n    config:\n      a: " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n", "spec.kubelet.config.a[0][0]"},
		{"maps under kubelet.config", head + "  kubelet:\n    config:\n      a: " + strings.Repeat("{a: ", depth) + "1" + strings.Repeat("}", depth) + "\n", "spec.kubelet.config.a.a.a"},
		{"lists under baseRuntimeSpec", head + "  containerd:\n    baseRuntimeSpec:\n      a: " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n", "spec.containerd.baseRuntimeSpec.a[0][0]"},
		{"block lists", head + "  kubelet:\n    config:\n      a:\n        " + strings.Repeat("- ", depth) + "x\n", "spec.kubelet.config.a[0][0]"},
		{"JSON", `{"spec":{"kubelet":{"config":{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "}}}}", "spec.kubelet.config.a[0][0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := gzipped(t, []byte(tc.doc))
			if len(data) > 2048 {
				t.Fatalf("%d bytes of gzip; the worst inputs are about 1 KB", len(data))
			}
			var err error
			alloc := allocated(func() {
				_, err = Load(context.Background(), slog.New(slog.DiscardHandler), []Source{{Name: UserDataSource, Data: data}})
			})
			if err == nil || !strings.Contains(err.Error(), "user-data: "+tc.path) || !strings.Contains(err.Error(), "maps and lists nest more than 64 deep (nodeconfig.MaxNesting)") {
				t.Errorf("Load: %v; want the nesting bound at %s", err, tc.path)
			}
			t.Logf("%d bytes of gzip: %d bytes allocated", len(data), alloc)
			// go-yaml's node tree of the document is about 6 MB.
			if alloc > 16<<20 {
				t.Errorf("Load allocated %d bytes; want at most 16 MiB", alloc)
			}
		})
	}
}
