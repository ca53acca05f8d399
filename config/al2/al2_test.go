package al2

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/fate"
	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

type goldenCase struct {
	Line    int      `json:"line"`
	Program string   `json:"program"`
	Args    []string `json:"args"`
	Options Options  `json:"options"`
	NotRun  []Line   `json:"notRun"`
}

// TestGolden reads each script shape in testdata/golden (Karpenter's AL2
// node class, the EKS user guide's managed node group with a custom AMI,
// terraform-aws-eks's self-managed group, the CloudFormation node group
// template after its substitutions) and compares the invocation, its
// options and the lines not run with the matching .json.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/golden/*.sh")
	if err != nil || len(ins) < 4 {
		t.Fatalf("want the 4 shapes, found %v %v", ins, err)
	}
	for _, in := range ins {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".sh"), func(t *testing.T) {
			script, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			if !IsBootstrapScript(script) {
				t.Error("IsBootstrapScript: false")
			}
			inv, err := Read(script)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			opts, err := OptionsOf(inv)
			if err != nil {
				t.Fatalf("ReadOptions: %v", err)
			}
			got, _ := json.MarshalIndent(goldenCase{inv.Line, inv.Program, inv.Args, opts, inv.NotRun}, "", "  ")
			got = append(got, '\n')
			want := strings.TrimSuffix(in, ".sh") + ".json"
			checkGolden(t, want, got)
		})
	}
}

// What cannot be known without running the script is an error naming the
// line, never a guess.
func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ name, script, want string }{
		{"command substitution", "CA=$(aws eks describe-cluster --query ca)\n/etc/eks/bootstrap.sh c --b64-cluster-ca $CA\n", "line 2: $CA comes from a line berth cannot evaluate (line 1: a $(...) command substitution: berth runs no shell; write the value itself)"},
		{"substitution in the invocation", "/etc/eks/bootstrap.sh $(cat /etc/name)\n", "line 1: a $(...) command substitution"},
		{"backticks", "/etc/eks/bootstrap.sh `hostname`\n", "line 1: a `command` substitution"},
		{"arithmetic", "/etc/eks/bootstrap.sh c --kubelet-extra-args --max-pods=$((10+1))\n", "line 1: a $((...)) arithmetic expansion"},
		{"unset variable", "#!/bin/sh\n\n/etc/eks/bootstrap.sh $CLUSTER\n", "line 3: $CLUSTER is not set by an earlier line of the script"},
		{"script argument", "/etc/eks/bootstrap.sh $1\n", "line 1: $1: the script's own arguments"},
		{"two invocations", "/etc/eks/bootstrap.sh a\n/etc/eks/bootstrap.sh b\n", "line 2: a second bootstrap.sh invocation (the first is on line 1)"},
		{"inside if", "if true; then\n  /etc/eks/bootstrap.sh a\nfi\n", "line 2: bootstrap.sh runs inside an if"},
		{"inside a function", "boot() {\n  /etc/eks/bootstrap.sh a\n}\nboot\n", "line 2: bootstrap.sh runs inside"},
		{"none", "#!/bin/bash\necho hi\n", "line 1: no bootstrap.sh invocation in the script"},
		{"unterminated quote", "/etc/eks/bootstrap.sh 'c\n", "line 1: unterminated ' quote"},
		{"unquoted spaces", "ARGS='--node-labels=a=b --max-pods=3'\n/etc/eks/bootstrap.sh c --kubelet-extra-args $ARGS\n", "line 2: $ARGS is unquoted and its value has spaces"},
		{"unsupported expansion", "/etc/eks/bootstrap.sh ${NAME%%.*}\n", "line 1: ${NAME%%.*}: berth expands only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read([]byte(c.script))
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %v\nwant prefix %q", err, c.want)
			}
		})
	}
}

func TestReadExpands(t *testing.T) {
	script := `#!/bin/bash
export NAME="prod-cluster"
LABELS='role=web,tier=front'
EMPTY=
/etc/eks/bootstrap.sh "$NAME" --kubelet-extra-args "--node-labels=${LABELS} --v=2" \
  --dns-cluster-ip ${DNS_IP:-172.20.0.10} --cluster-id ${EMPTY:-fallback} --ip-family "ipv4"; echo done
`
	inv, err := Read([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"prod-cluster", "--kubelet-extra-args", "--node-labels=role=web,tier=front --v=2", "--dns-cluster-ip", "172.20.0.10", "--cluster-id", "fallback", "--ip-family", "ipv4"}
	if strings.Join(inv.Args, "|") != strings.Join(want, "|") || inv.Line != 5 {
		t.Errorf("line %d args %q\nwant line 5 %q", inv.Line, inv.Args, want)
	}
	if n := len(inv.NotRun); n != 4 || inv.NotRun[3].Text != "echo done" || inv.NotRun[3].N != 6 {
		t.Errorf("not run: %+v", inv.NotRun)
	}
}

func TestReadOptions(t *testing.T) {
	o, err := ReadOptions([]string{"--use-max-pods", "true", "c", "--use-max-pods", "false", "extra"})
	if err != nil || o.ClusterName != "c" || o.Set["--use-max-pods"] != "false" || len(o.Order) != 1 || len(o.Extra) != 1 {
		t.Errorf("%+v %v", o, err)
	}
	for args, want := range map[string]string{
		"c --no-such-flag x":          `bootstrap.sh option "--no-such-flag": AL2's bootstrap.sh has no such option`,
		"c --dns-cluster-ip=10.0.0.1": `bootstrap.sh option "--dns-cluster-ip": AL2's bootstrap.sh takes the value as the next word`,
		"c --dns-cluster-ip":          "bootstrap.sh option --dns-cluster-ip has no value",
		"--use-max-pods false":        "bootstrap.sh has no cluster name",
		"c --help":                    "bootstrap.sh --help prints its help and exits",
	} {
		if _, err := ReadOptions(strings.Fields(args)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
	for _, o := range Table {
		if o.Why == "" || !o.Fate.Valid() {
			t.Errorf("table entry %+v", o)
		}
	}
}

// FuzzRead: any script gets an invocation or an *Error naming a line
// within the script, never a panic, and what comes back is bounded.
func FuzzRead(f *testing.F) {
	ins, _ := filepath.Glob("testdata/golden/*.sh")
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("A=$B\nB=${A:-x}\n/etc/eks/bootstrap.sh \"$A\" <<E\n$(x)\nE\n"))
	f.Add([]byte("f() { /etc/eks/bootstrap.sh c; }\n"))
	f.Fuzz(func(t *testing.T, script []byte) {
		inv, err := Read(script)
		lines := bytes.Count(script, []byte("\n")) + 1
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Line < 1 || e.Line > lines {
				t.Fatalf("error %v: want an *Error with a line in 1..%d", err, lines)
			}
			return
		}
		if inv.Line < 1 || inv.Line > lines || len(inv.NotRun) > MaxCommands {
			t.Fatalf("invocation line %d of %d, %d not run", inv.Line, lines, len(inv.NotRun))
		}
		for _, a := range inv.Args {
			if len(a) > MaxExpanded+len(script) {
				t.Fatalf("an argument of %d bytes", len(a))
			}
		}
		for name, v := range inv.Env {
			if _, read := EnvVars[name]; !read || len(v) > MaxExpanded+len(script) {
				t.Fatalf("environment %s of %d bytes: want a variable bootstrap.sh reads, bounded", name, len(v))
			}
		}
		if o, err := OptionsOf(inv); err == nil {
			for name := range o.Set {
				if _, ok := Lookup(name); !ok {
					t.Fatalf("option %q is not bootstrap.sh's", name)
				}
			}
		}
	})
}

// TestEnvironment: bootstrap.sh took an option from its environment when
// no argument gave it, so what the script exported (or set on the
// invocation's line) counts, an argument wins, and a variable that was
// only set, not exported, stays the script's own.
func TestEnvironment(t *testing.T) {
	script := `#!/bin/bash
export DNS_CLUSTER_IP=10.100.0.10 SERVICE_IPV4_CIDR=10.100.0.0/16
LOCAL_DISKS=raid0
declare -x KUBELET_EXTRA_ARGS='--node-labels=a=b'
USE_MAX_PODS=false
export USE_MAX_PODS
CLUSTER_ID=not-exported
export CONTAINER_RUNTIME LOCAL_DISKS_TOO
CONTAINER_RUNTIME=
IP_FAMILY=ipv4 /etc/eks/bootstrap.sh c --kubelet-extra-args '--v=2'
`
	inv, err := Read([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	o, err := OptionsOf(inv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"--dns-cluster-ip":     "10.100.0.10",
		"--kubelet-extra-args": "--v=2", // the argument wins
		"--use-max-pods":       "false",
		"--ip-family":          "ipv4",
	}
	if len(o.Set) != len(want) {
		t.Errorf("options %v, want %v", o.Set, want)
	}
	for k, v := range want {
		if o.Set[k] != v {
			t.Errorf("%s = %q, want %q (options %v)", k, o.Set[k], v, o.Set)
		}
	}
	if o.FromEnv["--dns-cluster-ip"] != "DNS_CLUSTER_IP" || o.FromEnv["--ip-family"] != "IP_FAMILY" || o.FromEnv["--kubelet-extra-args"] != "" {
		t.Errorf("FromEnv %v", o.FromEnv)
	}
	if o.Env["SERVICE_IPV4_CIDR"] != "10.100.0.0/16" || len(o.Env) != 1 {
		t.Errorf("Env %v, want SERVICE_IPV4_CIDR only", o.Env)
	}
}

// TestREADMEListsEveryOption: the README's table of bootstrap.sh options
// is Table, row for row, so the two cannot drift.
func TestREADMEListsEveryOption(t *testing.T) {
	readme, err := os.ReadFile("../../docs/user-data.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := fate.READMERows(readme, "--")
	if len(rows) != len(Table) {
		t.Errorf("README has %d option rows, Table %d", len(rows), len(Table))
	}
	for i, o := range Table {
		want := fate.Row(o.Name, o.Fate, o.Why)
		if i >= len(rows) || rows[i] != want {
			t.Errorf("README row %d: want\n%s", i, want)
		}
	}
}

// checkGolden compares got with the golden file want (go test -update
// writes it).
func checkGolden(t *testing.T, want string, got []byte) {
	t.Helper()
	golden.Check(t, want, got, *update)
}
