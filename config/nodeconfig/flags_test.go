package nodeconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/flagwords"
)

// checkUserFlags is checkKubeletFlags's verdict as one error, each problem
// "path: message".
func checkUserFlags(flags []string) error {
	var errs []error
	for _, p := range flagProblems("", flags) {
		errs = append(errs, fmt.Errorf("%s: %s", p.Path, p.Message))
	}
	return errors.Join(errs...)
}

func splitAll(flags []string) []string {
	var out []string
	for _, f := range flags {
		out = append(out, flagwords.Split(f)...)
	}
	return out
}

func TestCheckUserFlags(t *testing.T) {
	for _, ok := range [][]string{
		nil,
		{"--v=2"},
		{`--node-labels="a=b,c=d"`, "--max-pods=20"},
		{"--node-labels", "role=worker"},
		{"--node-labels role=worker,example.com/x="},
		{"--register-with-taints=dedicated=gpu:NoSchedule,spot:PreferNoSchedule"},
		{"--register-with-taints", "k:NoExecute"},
		{"--hostname-override=node-1.example", "--node-ip=10.0.0.1,fd00::1"},
		{"--node-labels="},
		// Only the value of a checked flag is checked: other flags may
		// hold anything printable.
		{`--eviction-hard="memory.available<5%"`, "--feature-gates=A=true,B=false"},
	} {
		if err := checkUserFlags(ok); err != nil {
			t.Errorf("checkUserFlags(%q) = %v", ok, err)
		}
	}
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"--v=2", "--v=4\n--kubeconfig=/tmp/evil"}, []string{`kubelet.flags[1]: "--v=4\n--kubeconfig=/tmp/evil" has a control character (U+000A)`}},
		{[]string{"--v=2\t--x"}, []string{"kubelet.flags[0]", "U+0009"}},
		{[]string{"--v=\x00"}, []string{"kubelet.flags[0]", "U+0000"}},
		{[]string{`--node-labels="a=b,c=d e"`}, []string{`kubelet.flags[0]: --node-labels: "a=b,c=d e" is not a node label list`, `"d e" is not a label value`}},
		{[]string{"--node-labels=-bad=x"}, []string{"kubelet.flags[0]: --node-labels", `"-bad" is not a label key`}},
		{[]string{"--node-labels=nokey"}, []string{`"nokey" has no '='`}},
		// The value is the next word, here in the next element: that
		// element is the one named.
		{[]string{"--v=2", "--node-labels", "a=b,-c=d"}, []string{`kubelet.flags[2]: --node-labels: "a=b,-c=d"`}},
		{[]string{"--v=2", "--node-labels"}, []string{"kubelet.flags[1]: --node-labels needs a value"}},
		{[]string{"--register-with-taints=gpu"}, []string{"kubelet.flags[0]: --register-with-taints", "KEY[=VALUE]:EFFECT"}},
		{[]string{"--register-with-taints=gpu:Sometimes"}, []string{`effect "Sometimes" is not one of`}},
		{[]string{"--hostname-override=bad_name"}, []string{"kubelet.flags[0]: --hostname-override", "not a node name"}},
		{[]string{"--node-ip=fe80::1%eth0"}, []string{"kubelet.flags[0]: --node-ip", "zone"}},
		{[]string{"--node-ip=1.1.1.1,2.2.2.2,3.3.3.3"}, []string{"want one IP address, or two"}},
		// Every bad element is reported, not only the first.
		{[]string{"--a=\n", "--node-labels=x"}, []string{"kubelet.flags[0]", "kubelet.flags[1]"}},
	} {
		err := checkUserFlags(tc.in)
		if err == nil {
			t.Errorf("checkUserFlags(%q) = nil, want %q", tc.in, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("checkUserFlags(%q) = %q, want it to contain %q", tc.in, err, w)
			}
		}
	}
}

// FuzzCheckUserFlags: flags that pass the check split into argv words
// without control characters, and checked flags' values pass their rules.
func FuzzCheckUserFlags(f *testing.F) {
	for _, s := range []string{`--node-labels="a=b,c=d"`, "--v=2\n--x", "--node-labels a=b", "--register-with-taints=k:NoSchedule", "--node-ip=::1"} {
		f.Add(s, "--v=2")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		flags := []string{a, b}
		if checkUserFlags(flags) != nil {
			return
		}
		words := splitAll(flags)
		for i, w := range words {
			if strings.ContainsAny(w, "\x00\n\r\t\x7f") {
				t.Fatalf("accepted %q gives argv word %q", flags, w)
			}
			if v, ok := strings.CutPrefix(w, "--node-labels="); ok && strings.ContainsAny(v, " \"'\\") {
				t.Fatalf("accepted node labels %q", v)
			}
			if w == "--register-with-taints" && i+1 < len(words) && strings.ContainsAny(words[i+1], " \"'\\") {
				t.Fatalf("accepted taints %q", words[i+1])
			}
		}
	})
}
