package localstorage

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/instancestore"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// No root needed: these runs stop before touching a device.

func TestRunSkips(t *testing.T) {
	res, err := Run(context.Background(), quiet(), Options{}, Env{})
	if err != nil || res.Status != StatusSkipped || !strings.Contains(res.Reason, "strategy is not set") {
		t.Fatalf("no strategy: %+v %v", res, err)
	}
	// EC2 fixture with only the EBS root: skipped, and why.
	env := Env{SysRoot: "../instancestore/testdata/ec2-0/sys", MountInfo: "../instancestore/testdata/ec2-0/mountinfo"}
	res, err = Run(context.Background(), quiet(), Options{Strategy: StrategyRAID0}, env)
	if err != nil || res.Status != StatusSkipped || !strings.Contains(res.Reason, "no instance-store disks found") {
		t.Fatalf("no disks: %+v %v", res, err)
	}
	if len(res.Steps) != 1 || res.Steps[0].Name != "discover" {
		t.Fatalf("steps %+v", res.Steps)
	}
}

func TestRunConfigErrorPolicy(t *testing.T) {
	res, err := Run(context.Background(), quiet(), Options{Strategy: "RAID5"}, Env{})
	if err != nil || res.Status != StatusFailed || res.Step != "config" || res.Fallback != "root disk" {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = Run(context.Background(), quiet(), Options{Strategy: "RAID5", Fatal: true}, Env{})
	if err == nil || res.Fallback != "" || !strings.Contains(err.Error(), "step config") {
		t.Fatalf("fatal: %+v %v", res, err)
	}
}

func TestRunDiscoverFailure(t *testing.T) {
	env := Env{Discover: func() ([]instancestore.Disk, []instancestore.Skipped, error) {
		return []instancestore.Disk{{Name: "nvme9n1", Path: "/nonexistent/nvme9n1", Serial: "gone"}}, nil, nil
	}}
	res, err := Run(context.Background(), quiet(), Options{Strategy: StrategyRAID0}, env)
	if err != nil || res.Status != StatusFailed || res.Step != "probe" || !strings.Contains(res.Error, "disk /nonexistent/nvme9n1 (serial gone) vanished") {
		t.Fatalf("%+v %v", res, err)
	}
}
