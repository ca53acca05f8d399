package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/internal/golden"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/ (convert, seed)")

// TestConvertAL2: `berth convert` of each AL2 shape (and of Bottlerocket
// settings) prints a NodeConfig
// that, read back as user data, is the configuration the script gave
// (so the two render the same files: plan's TestForeignUserDataRendersAsNodeConfig),
// with what was not carried over in comments; the output is golden.
func TestConvertAL2(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, name := range []string{"al2-karpenter.txt", "al2-mng.txt", "al2-terraform.txt", "al2-eksctl.txt", "bottlerocket-karpenter.toml", "bottlerocket-every-key.toml"} {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join("plan", "testdata", "userdata", name)
			var stdout, stderr bytes.Buffer
			if code := runCLI([]string{"convert", in}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			goldenPath := filepath.Join("testdata", "convert", strings.TrimSuffix(strings.TrimSuffix(name, ".txt"), ".toml")+".yaml")
			golden.Check(t, goldenPath, stdout.Bytes(), *updateGolden)
			orig, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			a, errA := nodeconfig.Load(context.Background(), quiet, []nodeconfig.Source{{Name: "script", Data: orig}})
			b, errB := nodeconfig.Load(context.Background(), quiet, []nodeconfig.Source{{Name: "converted", Data: stdout.Bytes()}})
			if errA != nil || errB != nil {
				t.Fatalf("loading: %v / %v", errA, errB)
			}
			if !reflect.DeepEqual(a.Config, b.Config) {
				t.Errorf("the converted NodeConfig reads back as\n%+v\nnot\n%+v", b.Config.Spec, a.Config.Spec)
			}
			if len(b.NotRun) != 0 || !strings.Contains(stdout.String(), "#   read: ") || len(b.Problems) != 0 {
				t.Errorf("converted output: not run %v; or no comment naming what was read", b.NotRun)
			}
		})
	}
}

// TestConvertRefusesErrors: user data with errors prints them and no
// document.
func TestConvertRefusesErrors(t *testing.T) {
	in := filepath.Join(t.TempDir(), "ud")
	if err := os.WriteFile(in, []byte("#!/bin/bash\n/etc/eks/bootstrap.sh c --containerd-config-file /etc/x.toml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runCLI([]string{"convert", in}, &stdout, &stderr); code != 1 || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "bootstrap.sh --containerd-config-file: names a file on the AMI") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, stdout.String(), stderr.String())
	}
}
