package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// run refuses what it cannot run with, naming the flag, before it
// reaches for a cluster.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-poll", "0s"}, "-poll 0s"},
		{[]string{"-id", ""}, "-id: empty"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-kubeconfig", "/nonexistent/kubeconfig"}, "kubeconfig /nonexistent/kubeconfig"},
		{[]string{"-no-such-flag"}, "no-such-flag"},
	} {
		var out bytes.Buffer
		err := run(slog.New(slog.NewTextHandler(&out, nil)), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestRunOutsideAPodSaysWhatToPass(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	err := run(slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "pass -kubeconfig") {
		t.Errorf("run() outside a pod = %v", err)
	}
}
