package nocloud

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/golden"
	"github.com/berth-node/berth/network"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// networkResult is what a golden file records of one network-config:
// the parse, and what NetworkConfig makes of it.
type networkResult struct {
	Network        *Network        `json:"network"`
	Warnings       []Problem       `json:"warnings,omitempty"`
	Config         *network.Config `json:"config,omitempty"`
	ConfigWarnings []Problem       `json:"configWarnings,omitempty"`
	ConfigError    []string        `json:"configError,omitempty"`
}

// TestNetworkConfigGolden parses every testdata/network-config/*.yaml
// (each valid) and compares the result, and its mapping onto
// network.Config, with the .golden.json beside it.
func TestNetworkConfigGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/network-config/*.yaml")
	if err != nil || len(files) < 10 {
		t.Fatalf("want at least 10 network-configs under testdata, got %d (%v)", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n, warns, err := ParseNetworkConfig(data)
			if err != nil {
				t.Fatalf("a valid network-config refused: %v", err)
			}
			res := networkResult{Network: n, Warnings: warns}
			if n != nil {
				c, cw, err := NetworkConfig(n)
				res.ConfigWarnings = cw
				if err != nil {
					res.ConfigError = strings.Split(err.Error(), "\n")
				} else {
					res.Config = &c
				}
			}
			got, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, strings.TrimSuffix(f, ".yaml")+".golden.json", append(got, '\n'), *update)
		})
	}
}

// metaDataResult is what a golden file records of one meta-data.
type metaDataResult struct {
	MetaData MetaData  `json:"metaData"`
	Warnings []Problem `json:"warnings,omitempty"`
}

func TestMetaDataGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/meta-data/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("want at least 5 meta-data files under testdata, got %d (%v)", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			md, warns, err := ParseMetaData(data)
			if err != nil {
				t.Fatalf("valid meta-data refused: %v", err)
			}
			got, err := json.MarshalIndent(metaDataResult{md, warns}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, strings.TrimSuffix(f, ".yaml")+".golden.json", append(got, '\n'), *update)
		})
	}
}
