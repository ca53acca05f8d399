package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Both families get FORWARD ACCEPT, each waiting for the xtables lock; one
// tool failing is reported with its output and does not stop the other.
func TestForwardAccept(t *testing.T) {
	var ran [][]string
	run := func(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("%v runs without a deadline", cmd.Args)
		}
		ran = append(ran, cmd.Args)
		if cmd.Args[0] == "ip6tables" {
			return []byte("ip6tables: Table does not exist\n"), errors.New("exit status 1")
		}
		return nil, nil
	}
	var logs bytes.Buffer
	res := forwardAccept(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), run)
	want := [][]string{{"iptables", "-w", "10", "-P", "FORWARD", "ACCEPT"}, {"ip6tables", "-w", "10", "-P", "FORWARD", "ACCEPT"}}
	if !slices.EqualFunc(ran, want, slices.Equal) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	if len(res) != 2 || !res[0].OK || res[0].Tool != "iptables" || res[0].Error != "" {
		t.Fatalf("iptables result %+v", res)
	}
	if r := res[1]; r.OK || r.Tool != "ip6tables" || !strings.Contains(r.Error, "exit status 1") || !strings.Contains(r.Error, "Table does not exist") {
		t.Errorf("ip6tables result %+v", r)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "tool=ip6tables") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}
}
