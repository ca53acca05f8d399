package kubectl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeKubectl writes a kubectl stand-in that echoes its arguments and
// stdin, or fails with a message on stderr when its last argument is
// "fail".
func fakeKubectl(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
for a; do last=$a; done
if [ "$last" = fail ]; then echo "no such pod" >&2; exit 3; fi
if [ "$last" = hang ]; then exec sleep 30; fi
echo "args: $*"
cat
`
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{filepath.Join(dir, "missing"), dir}
}

func TestRun(t *testing.T) {
	r, err := Find(fakeKubectl(t), "/tmp/admin.kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(context.Background(), 10*time.Second, strings.NewReader("cat boot.json\n"), "debug", "node/n")
	if err != nil {
		t.Fatal(err)
	}
	if out != "args: --kubeconfig=/tmp/admin.kubeconfig debug node/n\ncat boot.json\n" {
		t.Errorf("stdout %q", out)
	}
	_, err = r.Run(context.Background(), 10*time.Second, nil, "logs", "fail")
	if err == nil || !strings.Contains(err.Error(), "kubectl logs fail") || !strings.Contains(err.Error(), "stderr: no such pod") {
		t.Errorf("failure's error %v lacks the arguments or stderr", err)
	}
	start := time.Now()
	_, err = r.Run(context.Background(), 200*time.Millisecond, nil, "hang")
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") || time.Since(start) > 10*time.Second {
		t.Errorf("a hanging kubectl: %v after %s", err, time.Since(start))
	}
}

func TestFindMissing(t *testing.T) {
	if _, err := Find([]string{t.TempDir()}, "k"); err == nil || !strings.Contains(err.Error(), "make kube") {
		t.Errorf("Find in an empty dir: %v", err)
	}
}

func TestDebugPod(t *testing.T) {
	name, ok := DebugPod("Creating debugging pod node-debugger-ip-10-0-2-15-x7k2p with container debugger on node ip-10-0-2-15.\n{...}")
	if !ok || name != "node-debugger-ip-10-0-2-15-x7k2p" {
		t.Errorf("DebugPod = %q, %t", name, ok)
	}
	if _, ok := DebugPod("error: no node"); ok {
		t.Error("DebugPod found a pod in an error")
	}
}

func TestUntilOK(t *testing.T) {
	n := 0
	out, _, tries, err := UntilOK(context.Background(), time.Minute, time.Millisecond, func() (string, error) {
		if n++; n < 3 {
			return "", errors.New("tls: no serving certificate")
		}
		return "log line", nil
	})
	if err != nil || out != "log line" || tries != 3 {
		t.Errorf("UntilOK = %q, %d tries, %v", out, tries, err)
	}
	_, _, tries, err = UntilOK(context.Background(), 5*time.Millisecond, time.Millisecond, func() (string, error) {
		return "", errors.New("refused")
	})
	if err == nil || tries < 2 || !strings.Contains(err.Error(), "refused") {
		t.Errorf("UntilOK past its timeout: %d tries, %v", tries, err)
	}
}

// A kubectl whose debug attach loses the shell's output: DebugNodeShell
// answers with the pod's log, after waiting for it, and deletes the pod.
func TestDebugNodeShellReadsTheLog(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := `#!/bin/sh
shift # --kubeconfig
echo "$1" >> ` + calls + `
case "$1" in
debug) cat > /dev/null; echo "Creating debugging pod node-debugger-n-x1 with container debugger on node n." ;;
wait) echo "pod/node-debugger-n-x1 condition met" ;;
logs) echo '{"ok":true}' ;;
delete) echo deleted ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Find([]string{dir}, "k")
	if err != nil {
		t.Fatal(err)
	}
	logs, attached, err := r.DebugNodeShell(context.Background(), 10*time.Second, "n", "busybox:1", "cat /host/run/berth/boot.json\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(logs) != `{"ok":true}` || !strings.Contains(attached, "Creating debugging pod") {
		t.Errorf("logs %q attached %q", logs, attached)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "debug wait logs delete" {
		t.Errorf("kubectl calls %v, want debug wait logs delete", got)
	}
}
