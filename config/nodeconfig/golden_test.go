package nodeconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// loadCase assembles a case directory's sources in boot order: image/
// (DirSources), user-data, then cmdline/ (FileSources, lexical order).
func loadCase(t testing.TB, dir string) []Source {
	t.Helper()
	srcs, err := DirSources(filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	if ud, err := os.ReadFile(filepath.Join(dir, "user-data")); err == nil {
		srcs = append(srcs, Source{Name: UserDataSource, Data: ud})
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	cmd, err := DirSources(filepath.Join(dir, "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	return append(srcs, cmd...)
}

type goldenCase struct {
	Error    bool        `json:"error"`
	Used     []string    `json:"used"`
	Skipped  []Skipped   `json:"skipped,omitempty"`
	Problems []string    `json:"problems,omitempty"`
	Config   *NodeConfig `json:"config"`
}

// TestGolden loads every case under testdata/cases as a node would and
// compares the merged NodeConfig, the sources used and skipped, and every
// problem with testdata/cases/NAME/want.json. Regenerate with -update.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/cases/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found %d cases under testdata/cases, want at least 8", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))
			res, err := Load(context.Background(), log, loadCase(t, dir))
			g := goldenCase{Error: err != nil, Used: res.Used, Skipped: res.Skipped, Config: res.Config}
			for _, p := range res.Problems {
				g.Problems = append(g.Problems, p.String())
			}
			if (err != nil) != HasErrors(res.Problems) {
				t.Errorf("Load error %v disagrees with problems %v", err, res.Problems)
			}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			want := filepath.Join(dir, "want.json")
			golden.Check(t, want, got, *update)
			// Every skipped part is logged, so an operator sees why a
			// script did not run.
			for _, s := range res.Skipped {
				if !strings.Contains(logs.String(), "skipping "+s.Source+": "+s.Reason) {
					t.Errorf("no log line for skipped %s; logs:\n%s", s.Source, logs.String())
				}
			}
			// Same inputs, same bytes.
			res2, _ := Load(context.Background(), slog.New(slog.DiscardHandler), loadCase(t, dir))
			a, _ := json.Marshal(res.Config)
			b, _ := json.Marshal(res2.Config)
			if !bytes.Equal(a, b) {
				t.Errorf("two loads of the same inputs differ:\n%s\n%s", a, b)
			}
		})
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// BenchmarkLoad measures decoding, parsing, merging and validating the
// largest realistic case (image files, user data, command-line file).
func BenchmarkLoad(b *testing.B) {
	srcs := loadCase(b, "testdata/cases/kubelet-containerd-merge")
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(context.Background(), log, srcs); err != nil {
			b.Fatal(err)
		}
	}
}
