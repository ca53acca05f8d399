package nodeconfig

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDirSources: lexical order, only regular *.yaml|*.yml|*.json files, a
// missing directory is no sources.
func TestDirSources(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"20-b.yml": "b", "10-a.yaml": "a", "30-c.json": "c", "README.md": "x", "40-d.yaml.bak": "x",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "50-dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("10-a.yaml", filepath.Join(dir, "60-link.yaml")); err != nil {
		t.Fatal(err)
	}
	srcs, err := DirSources(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range srcs {
		got = append(got, filepath.Base(s.Name)+"="+string(s.Data))
	}
	if want := []string{"10-a.yaml=a", "20-b.yml=b", "30-c.json=c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DirSources = %q, want %q", got, want)
	}
	srcs, err = DirSources(filepath.Join(dir, "missing"))
	if err != nil || srcs != nil {
		t.Errorf("missing dir: %v %v", srcs, err)
	}
	if _, err := FileSources(filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "reading NodeConfig "+dir+"/nope.yaml") {
		t.Errorf("FileSources of a missing file: %v", err)
	}
}

func TestSplitConfigPaths(t *testing.T) {
	got := SplitConfigPaths("/a.yaml", "/b.yaml,/c.json", "", " /d.yaml , ")
	if want := []string{"/a.yaml", "/b.yaml", "/c.json", "/d.yaml"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := SplitConfigPaths(); got != nil {
		t.Errorf("no values: %q", got)
	}
}

// TestCheck: every problem across files is returned, required fields may
// come from any file, and --strict turns unknown fields into errors.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	extra := filepath.Join(dir, "extra.yaml")
	if err := os.WriteFile(base, validDoc(t, ""), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(extra, []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flagz: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, ok := Check(false, base, extra)
	if !ok || len(ps) != 1 || ps[0].String() != "warning: "+extra+": spec.kubelet.flagz: unknown field" {
		t.Errorf("Check: ok=%v %v", ok, ps)
	}
	ps, ok = Check(true, base, extra)
	if ok || len(ps) != 1 || ps[0].String() != "error: "+extra+": spec.kubelet.flagz: unknown field" {
		t.Errorf("Check --strict: ok=%v %v", ok, ps)
	}
	ps, ok = Check(false, extra, filepath.Join(dir, "missing.yaml"))
	if ok {
		t.Error("Check of an incomplete config passed")
	}
	got := strings.Join(strs(ps), "\n")
	for _, want := range []string{
		"error: " + dir + "/missing.yaml: reading NodeConfig " + dir + "/missing.yaml: open",
		"error: merged config: spec.cluster.name: required, and no config source sets it",
		"error: merged config: spec.cluster.cidr: required (or spec.kubelet.config.clusterDNS), and no config source sets it",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Check problems lack %q:\n%s", want, got)
		}
	}
	if _, ok := Check(false); ok {
		t.Error("Check with no files passed")
	}
}

// TestCheckSources: sources already read are checked as files are: named
// by their Name, decoded as a file (MIME and all), strict as Check is.
func TestCheckSources(t *testing.T) {
	const name = "/seed/user-data"
	mime := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\n" +
		string(validDoc(t, "")) + "\n--B\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flagz: []\n--B--\n"
	res, ps, ok := CheckSources(Options{}, false, []Source{{Name: name, Data: []byte(mime)}})
	want := "warning: " + name + " part 2 (application/node.eks.aws): spec.kubelet.flagz: unknown field"
	if !ok || res == nil || len(res.Used) != 2 || len(ps) != 1 || ps[0].String() != want {
		t.Errorf("ok=%v used=%v problems=%v, want one %q", ok, res.Used, strs(ps), want)
	}
	if _, ps, ok := CheckSources(Options{}, true, []Source{{Name: name, Data: []byte(mime)}}); ok || len(ps) != 1 || ps[0].Severity != SeverityError {
		t.Errorf("strict: ok=%v %v", ok, strs(ps))
	}
	if _, ps, ok := CheckSources(Options{}, false, nil); ok || len(ps) != 1 {
		t.Errorf("no sources: ok=%v %v", ok, strs(ps))
	}
}

// TestLoadDecodeErrorAndCancel: a source that cannot be decoded is an
// error naming it; a cancelled context stops Load.
func TestLoadDecodeErrorAndCancel(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	res, err := Load(context.Background(), log, []Source{{Name: "user-data", Data: []byte("\x1f\x8bnot gzip")}})
	if err == nil || len(res.Problems) == 0 || res.Problems[0].String() != "error: user-data: decoding user-data: gzip: invalid header" {
		t.Errorf("bad gzip: %v %v", err, res.Problems)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Load(ctx, log, []Source{{Name: "x", Data: validDoc(t, "")}}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled Load: %v", err)
	}
	res, err = Load(context.Background(), log, []Source{{Name: "x", Data: validDoc(t, "")}, {Name: "user-data"}})
	if err != nil || !reflect.DeepEqual(res.Used, []string{"x"}) || res.Config.Spec.Cluster.Name != "c" {
		t.Errorf("valid config plus empty user data: %v %+v", err, res)
	}
}

// TestLoadSaysWhyPartsWereSkipped: a NodeConfig in a part typed
// text/plain is skipped, as nodeadm skips it, with a warning that says so;
// when no part at all is a NodeConfig, each skip is a warning too, ahead
// of the "required" errors it explains. A skip beside a used NodeConfig
// stays quiet (an AL2023 user data with a script part is normal).
func TestLoadSaysWhyPartsWereSkipped(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	mime := func(parts ...string) []byte {
		return []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n" + strings.Join(parts, "") + "--b--\n")
	}
	script := "--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n"
	typedPlain := "--b\nContent-Type: text/plain\n\n" + string(validDoc(t, "")) + "\n"
	good := "--b\nContent-Type: application/node.eks.aws\n\n" + string(validDoc(t, "")) + "\n"

	res, err := Load(context.Background(), log, []Source{{Name: UserDataSource, Data: mime(script, typedPlain)}})
	if err == nil {
		t.Fatal("user data with no NodeConfig part loaded")
	}
	got := strings.Join(strs(res.Problems), "\n")
	for _, want := range []string{
		"warning: user-data part 1 (text/x-shellscript): skipped, and no other part is a NodeConfig: berth runs no scripts",
		"warning: user-data part 2 (text/plain): skipped: it holds a NodeConfig, but typed text/plain; berth, like nodeadm, reads only parts typed application/node.eks.aws",
		"error: merged config: spec.cluster.name: required",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "user-data part 2") != 1 {
		t.Errorf("the mistyped part is named more than once:\n%s", got)
	}

	res, err = Load(context.Background(), log, []Source{{Name: UserDataSource, Data: mime(script, good)}})
	if err != nil || len(res.Problems) != 0 || len(res.Skipped) != 1 {
		t.Errorf("a script beside a NodeConfig: %v %v skipped=%v", err, res.Problems, res.Skipped)
	}
	res, err = Load(context.Background(), log, []Source{{Name: UserDataSource, Data: mime(good, typedPlain)}})
	if err != nil || len(res.Problems) != 1 || !strings.HasPrefix(res.Problems[0].String(), "warning: user-data part 2 (text/plain): skipped: it holds a NodeConfig") {
		t.Errorf("a mistyped NodeConfig beside a good one must still warn: %v %v", err, res.Problems)
	}
}

// TestBootSources: image dir, then user data, then command-line files.
func TestBootSources(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "config.d")
	if err := os.Mkdir(img, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, body := range map[string]string{filepath.Join(img, "10.yaml"): "i", filepath.Join(dir, "extra.yaml"): "c"} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srcs, err := BootSources(img, []byte("u"), []string{filepath.Join(dir, "extra.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range srcs {
		got = append(got, s.Name+"="+string(s.Data))
	}
	want := []string{filepath.Join(img, "10.yaml") + "=i", "user-data=u", filepath.Join(dir, "extra.yaml") + "=c"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BootSources = %q, want %q", got, want)
	}
	srcs, err = BootSources(filepath.Join(dir, "none"), nil, nil)
	if err != nil || len(srcs) != 0 {
		t.Errorf("nothing anywhere: %v %v", srcs, err)
	}
	if _, err := BootSources(img, nil, []string{"/nonexistent.yaml"}); err == nil || !strings.Contains(err.Error(), "kernel command line berth.config=: reading NodeConfig /nonexistent.yaml") {
		t.Errorf("missing command-line file: %v", err)
	}
}
