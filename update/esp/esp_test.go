package esp

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/update/bootcount"
)

// newESP makes an ESP whose EFI/Linux holds files (name → content; a name
// ending in "/" is a directory).
func newESP(t *testing.T, files map[string]string) ESP {
	t.Helper()
	e := ESP{Root: t.TempDir()}
	if err := os.MkdirAll(e.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		if strings.HasSuffix(n, "/") {
			if err := os.Mkdir(e.path(n), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(e.path(n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// contents is EFI/Linux now: name → content ("/" for a directory).
func contents(t *testing.T, e ESP) map[string]string {
	t.Helper()
	des, err := os.ReadDir(e.dir())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, de := range des {
		if de.IsDir() {
			m[de.Name()+"/"] = "/"
			continue
		}
		b, err := os.ReadFile(e.path(de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[de.Name()] = string(b)
	}
	return m
}

func check(t *testing.T, e ESP, want map[string]string) {
	t.Helper()
	if got := contents(t, e); !maps.Equal(got, want) {
		t.Errorf("EFI/Linux holds %v, want %v", got, want)
	}
}

func entry(t *testing.T, name string) bootcount.Entry {
	t.Helper()
	en, err := bootcount.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return en
}

func names(es []bootcount.Entry) []string {
	var s []string
	for _, en := range es {
		s = append(s, en.Name)
	}
	return s
}

// uki stands for a UKI: big enough to take more than one write.
func uki(version string) string { return strings.Repeat("MZ berth "+version+"\n", 50000) }

func TestStage(t *testing.T) {
	others := map[string]string{"linux.efi": "another system's UKI", ".hidden.efi": "x", "sub/": "/", "berth-notes.txt": "kept"}
	files := map[string]string{"berth-1.efi": uki("1"), "berth-0.9.efi": uki("0.9"), "berth-0.8+0-3.efi": uki("0.8"), "berth-1.1+3.efi": uki("1.1")}
	maps.Copy(files, others)
	e := newESP(t, files)
	got, err := e.Stage(entry(t, "berth-1.efi"), "2", strings.NewReader(uki("2")))
	if err != nil {
		t.Fatal(err)
	}
	if want := entry(t, "berth-2+3.efi"); got != want {
		t.Errorf("Stage = %+v, want %+v", got, want)
	}
	want := map[string]string{"berth-1.efi": uki("1"), "berth-2+3.efi": uki("2")}
	maps.Copy(want, others)
	check(t, e, want)
	es, err := e.List()
	if err != nil || !slices.Equal(names(es), []string{"berth-2+3.efi", "berth-1.efi"}) {
		t.Errorf("List = %q, %v; want the staged one first, then the running one", names(es), err)
	}
}

// TestStageReplacesLeftovers: a version staged or tried before is written
// anew; a file of the running version in another state stays.
func TestStageReplacesLeftovers(t *testing.T) {
	e := newESP(t, map[string]string{"berth-1.efi": uki("1"), "berth-1+0-3.efi": uki("1 bad"), "berth-2+3.efi": "old build", "berth-2+0-3.efi": uki("2 bad")})
	if _, err := e.Stage(entry(t, "berth-1.efi"), "2", strings.NewReader(uki("2"))); err != nil {
		t.Fatal(err)
	}
	check(t, e, map[string]string{"berth-1.efi": uki("1"), "berth-1+0-3.efi": uki("1 bad"), "berth-2+3.efi": uki("2")})
}

// TestStageCutOff stops Stage after each of its steps, as a crash would,
// checks what systemd-boot would see then, and runs Stage again.
func TestStageCutOff(t *testing.T) {
	start := map[string]string{"berth-1.efi": uki("1"), "berth-0.9.efi": uki("0.9"), ".berth-stage-7.tmp": "torn"}
	final := map[string]string{"berth-1.efi": uki("1"), "berth-2+3.efi": uki("2")}
	running := entry(t, "berth-1.efi")
	e := newESP(t, nil)
	steps, _, err := e.stageSteps(running, "2", copyFrom(nil))
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k <= len(steps); k++ {
		e := newESP(t, start)
		steps, staged, err := e.stageSteps(running, "2", copyFrom(strings.NewReader(uki("2"))))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps[:k] {
			if err := s.do(); err != nil {
				t.Fatalf("step %q: %v", s.name, err)
			}
		}
		// Every name systemd-boot lists holds a whole UKI, the running
		// one is there, and it boots the new one only once committed.
		es, err := e.List()
		if err != nil {
			t.Fatal(err)
		}
		now := contents(t, e)
		for _, en := range es {
			if c := now[en.Name]; c != start[en.Name] && c != final[en.Name] {
				t.Errorf("cut after %d steps: %s holds %d bytes, not a whole UKI", k, en.Name, len(c))
			}
		}
		committed := now[staged.Name] == uki("2")
		p, _ := bootcount.Pick(es)
		if now[running.Name] != uki("1") || (committed && p != staged) || (!committed && p.Name != running.Name) {
			t.Errorf("cut after %d steps: EFI/Linux lists %q, boots %s (committed %v)", k, names(es), p.Name, committed)
		}
		if k > 0 && k < len(steps) {
			t.Logf("cut after %q: %q", steps[k-1].name, slices.Sorted(maps.Keys(now)))
		}
		if _, err := e.Stage(running, "2", strings.NewReader(uki("2"))); err != nil {
			t.Fatalf("Stage again after %d steps: %v", k, err)
		}
		check(t, e, final)
	}
}

// A write cut off midway leaves a hidden temporary file that no boot
// entry name shows and the next Stage removes.
func TestStageTornWrite(t *testing.T) {
	e := newESP(t, map[string]string{"berth-1.efi": uki("1")})
	_, err := e.Stage(entry(t, "berth-1.efi"), "2", io.MultiReader(strings.NewReader(uki("2")[:1000]), errReader{}))
	if err == nil || !strings.Contains(err.Error(), "berth-2+3.efi") || !strings.Contains(err.Error(), e.dir()) || !errors.Is(err, errTorn) {
		t.Errorf("Stage with a failing reader: %v; want an error naming the file, wrapping the cause", err)
	}
	check(t, e, map[string]string{"berth-1.efi": uki("1")})

	// As if the process died mid-write.
	torn := filepath.Join(e.dir(), tempPrefix+"123"+tempSuffix)
	if err := os.WriteFile(torn, []byte(uki("2")[:1000]), 0o600); err != nil {
		t.Fatal(err)
	}
	if es, _ := e.List(); !slices.Equal(names(es), []string{"berth-1.efi"}) {
		t.Errorf("List with a torn temporary file = %q", names(es))
	}
	if _, err := bootcount.Parse(filepath.Base(torn)); err == nil {
		t.Errorf("systemd-boot would list the temporary file %s", torn)
	}
	if _, err := e.Stage(entry(t, "berth-1.efi"), "2", strings.NewReader(uki("2"))); err != nil {
		t.Fatal(err)
	}
	check(t, e, map[string]string{"berth-1.efi": uki("1"), "berth-2+3.efi": uki("2")})
}

var errTorn = errors.New("device gone")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errTorn }

// TestStageFromCheckFails: a writer that wrote the whole UKI and then
// finds it wrong stops the commit: nothing renamed, no file left.
func TestStageFromCheckFails(t *testing.T) {
	start := map[string]string{"berth-1.efi": uki("1")}
	e := newESP(t, start)
	errCheck := errors.New("the command line names the running slot")
	_, err := e.StageFrom(entry(t, "berth-1.efi"), "2", func(w io.Writer) error {
		if _, err := io.WriteString(w, uki("2")); err != nil {
			return err
		}
		return errCheck
	})
	if !errors.Is(err, errCheck) || !strings.Contains(err.Error(), "berth-2+3.efi") {
		t.Errorf("StageFrom with a failing check: %v; want the check's error, naming the entry", err)
	}
	check(t, e, start)
	got, err := e.StageFrom(entry(t, "berth-1.efi"), "2", func(w io.Writer) error {
		_, err := io.WriteString(w, uki("2"))
		return err
	})
	if err != nil || got.Name != "berth-2+3.efi" {
		t.Fatalf("StageFrom = %v, %v", got, err)
	}
	check(t, e, map[string]string{"berth-1.efi": uki("1"), "berth-2+3.efi": uki("2")})
}

func TestStageRefuses(t *testing.T) {
	start := map[string]string{"berth-1.efi": uki("1"), "berth-1.1+2-1.efi": uki("1.1")}
	for _, c := range []struct {
		name, running, version, uki, want string
	}{
		{"running on trial", "berth-1.1+2-1.efi", "2", uki("2"), "berth-1.1+2-1.efi is indeterminate, not good"},
		{"running version", "berth-1.efi", "1", uki("1"), "version 1 is the running one"},
		{"bad version", "berth-1.efi", "2+1", uki("2"), `version "2+1"`},
		{"running not there", "berth-0.9.efi", "2", uki("2"), "running UKI berth-0.9.efi is not in /"},
		{"empty UKI", "berth-1.efi", "2", "", "the UKI is empty"},
	} {
		e := newESP(t, start)
		want := strings.ReplaceAll(c.want, "in /", "in "+e.dir())
		if en, err := e.Stage(entry(t, c.running), c.version, strings.NewReader(c.uki)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Stage = %+v, %v; want an error with %q", c.name, en, err, want)
		}
		check(t, e, start)
	}
	e := ESP{Root: t.TempDir()}
	if _, err := e.Stage(entry(t, "berth-1.efi"), "2", strings.NewReader(uki("2"))); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), e.dir()) {
		t.Errorf("Stage on an ESP without EFI/Linux: %v; want ErrNotExist naming the directory", err)
	}
}

func TestBless(t *testing.T) {
	for _, c := range []struct {
		name   string
		booted string
		start  map[string]string
		want   map[string]string
	}{
		{"trial", "berth-2+2-1.efi", map[string]string{"berth-1.efi": "1", "berth-2+2-1.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2.efi": "2"}},
		{"last try", "berth-2+0-3.efi", map[string]string{"berth-1.efi": "1", "berth-2+0-3.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2.efi": "2"}},
		{"done before", "berth-2+2-1.efi", map[string]string{"berth-1.efi": "1", "berth-2.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2.efi": "2"}},
		{"marked bad before", "berth-2+2-1.efi", map[string]string{"berth-1.efi": "1", "berth-2+0-1.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2.efi": "2"}},
	} {
		e := newESP(t, c.start)
		for range 2 { // the second run finds it done
			got, err := e.Bless(entry(t, c.booted))
			if err != nil || got != entry(t, "berth-2.efi") {
				t.Errorf("%s: Bless = %+v, %v", c.name, got, err)
			}
			check(t, e, c.want)
		}
	}
	e := newESP(t, map[string]string{"berth-1.efi": "1"})
	if _, err := e.Bless(entry(t, "berth-2+2-1.efi")); err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "berth-2+2-1.efi") {
		t.Errorf("Bless of a missing UKI: %v", err)
	}
	if _, err := e.Bless(entry(t, "berth-1.efi")); err == nil || !strings.Contains(err.Error(), "not a trial") {
		t.Errorf("Bless of a good UKI: %v", err)
	}
	check(t, e, map[string]string{"berth-1.efi": "1"})
}

func TestMarkBad(t *testing.T) {
	for _, c := range []struct {
		name, booted, bad string
		start, want       map[string]string
	}{
		{"trial", "berth-2+2-1.efi", "berth-2+0-1.efi", map[string]string{"berth-1.efi": "1", "berth-2+2-1.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2+0-1.efi": "2"}},
		{"last try", "berth-2+0-3.efi", "berth-2+0-3.efi", map[string]string{"berth-1.efi": "1", "berth-2+0-3.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2+0-3.efi": "2"}},
		{"done before", "berth-2+1-2.efi", "berth-2+0-2.efi", map[string]string{"berth-1.efi": "1", "berth-2+0-2.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2+0-2.efi": "2"}},
		{"blessed before", "berth-2+1-2.efi", "berth-2+0-2.efi", map[string]string{"berth-1.efi": "1", "berth-2.efi": "2"}, map[string]string{"berth-1.efi": "1", "berth-2+0-2.efi": "2"}},
	} {
		e := newESP(t, c.start)
		for range 2 {
			got, err := e.MarkBad(entry(t, c.booted))
			if err != nil || got != entry(t, c.bad) || got.State() != bootcount.Bad {
				t.Errorf("%s: MarkBad = %+v, %v; want %s", c.name, got, err, c.bad)
			}
			check(t, e, c.want)
		}
		if es, _ := e.List(); len(es) == 0 || es[0].Name != "berth-1.efi" {
			t.Errorf("%s: after MarkBad systemd-boot boots %q, want berth-1.efi", c.name, names(es))
		}
	}
	e := newESP(t, map[string]string{"berth-1.efi": "1"})
	if _, err := e.MarkBad(entry(t, "berth-1.efi")); err == nil || !strings.Contains(err.Error(), "not a trial") {
		t.Errorf("MarkBad of a good UKI: %v", err)
	}
	if _, err := e.MarkBad(entry(t, "berth-3+1-2.efi")); err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "berth-3+1-2.efi") {
		t.Errorf("MarkBad of a missing UKI: %v", err)
	}
	check(t, e, map[string]string{"berth-1.efi": "1"})
}

// boot does what systemd-boot does at boot: pick, rename a counted entry,
// and report it the way its EFI variables do.
func boot(t *testing.T, e ESP) bootcount.Entry {
	t.Helper()
	es, err := e.List()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := bootcount.Pick(es)
	if !ok {
		t.Fatal("nothing to boot")
	}
	countPath := ""
	if n := p.Tried(); n.Name != p.Name {
		if err := os.Rename(e.path(p.Name), e.path(n.Name)); err != nil {
			t.Fatal(err)
		}
		countPath = `\EFI\Linux\` + n.Name
	}
	b, err := bootcount.Booted(strings.ToLower(p.Name), countPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpdateCycle runs a whole update twice: one version fails its trial
// and the node is back on the old one; the next passes and replaces it.
func TestUpdateCycle(t *testing.T) {
	e := newESP(t, map[string]string{"berth-1.efi": uki("1")})
	running := boot(t, e)
	if _, err := e.Stage(running, "2", strings.NewReader(uki("2"))); err != nil {
		t.Fatal(err)
	}
	b := boot(t, e)
	if b.Name != "berth-2+2-1.efi" {
		t.Fatalf("first boot after staging: %s", b.Name)
	}
	if _, err := e.MarkBad(b); err != nil {
		t.Fatal(err)
	}
	if running = boot(t, e); running.Name != "berth-1.efi" {
		t.Fatalf("after the rollback booted %s", running.Name)
	}
	check(t, e, map[string]string{"berth-1.efi": uki("1"), "berth-2+0-1.efi": uki("2")})

	if _, err := e.Stage(running, "3", strings.NewReader(uki("3"))); err != nil {
		t.Fatal(err)
	}
	check(t, e, map[string]string{"berth-1.efi": uki("1"), "berth-3+3.efi": uki("3")})
	b = boot(t, e) // fails without a verdict (a hang, a power cut)
	b = boot(t, e)
	if b.Name != "berth-3+1-2.efi" {
		t.Fatalf("second try: %s", b.Name)
	}
	if _, err := e.Bless(b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if running = boot(t, e); running.Name != "berth-3.efi" {
			t.Fatalf("after blessing booted %s", running.Name)
		}
	}
	if err := e.Prune(running); err != nil {
		t.Fatal(err)
	}
	check(t, e, map[string]string{"berth-3.efi": uki("3")})
	if _, err := e.Stage(running, "4", bytes.NewReader([]byte(uki("4")))); err != nil {
		t.Fatal(err)
	}
	check(t, e, map[string]string{"berth-3.efi": uki("3"), "berth-4+3.efi": uki("4")})
}

func TestPrune(t *testing.T) {
	start := map[string]string{"berth-1.efi": "1", "berth-2.efi": "2", "berth-3+0-3.efi": "3", "berth-2+0-1.efi": "2 bad", "linux.efi": "other", ".berth-stage-9.tmp": "torn"}
	e := newESP(t, start)
	for range 2 {
		if err := e.Prune(entry(t, "berth-2.efi")); err != nil {
			t.Fatal(err)
		}
		check(t, e, map[string]string{"berth-2.efi": "2", "berth-2+0-1.efi": "2 bad", "linux.efi": "other"})
	}
	e = newESP(t, start)
	for _, c := range []struct{ keep, want string }{
		{"berth-3+0-3.efi", "berth-3+0-3.efi is bad, not good"},
		{"berth-4.efi", "berth-4.efi is not in " + e.dir()},
	} {
		if err := e.Prune(entry(t, c.keep)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Prune(%s) = %v; want an error with %q", c.keep, err, c.want)
		}
	}
	delete(start, ".berth-stage-9.tmp") // the second case cleaned it before refusing
	check(t, e, start)
}
