package kubelet

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-node/berth/internal/flagwords"
	"github.com/berth-node/berth/internal/syntax"
)

// SplitUserFlags turns the user's kubelet.flags into argv words the way an
// AL2023 node does (flagwords.Split).
func SplitUserFlags(flags []string) []string {
	var out []string
	for _, f := range flags {
		out = append(out, flagwords.Split(f)...)
	}
	return out
}

// flagValueChecks are the kubelet flags whose values berth can check
// before kubelet sees them. A bad label or taint otherwise surfaces only
// when kubelet exits at start, or when the API server refuses to register
// the node, far from the user data that caused it.
var flagValueChecks = map[string]func(string) error{
	"--node-labels":          syntax.Labels,
	"--register-with-taints": syntax.Taints,
	"--hostname-override":    syntax.NodeName,
	"--node-ip":              nodeIPs,
}

// nodeIPs checks --node-ip: one address, or an IPv4 and an IPv6 address
// separated by a comma (dual stack).
func nodeIPs(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return fmt.Errorf("%q: want one IP address, or two separated by a comma", s)
	}
	for _, p := range parts {
		if err := syntax.IPNoZone(p); err != nil {
			return err
		}
	}
	return nil
}

// CheckUserFlags checks the user's kubelet.flags before they become argv
// words (see SplitUserFlags): no element may hold a control character
// (a newline would split a word differently here than in nodeadm's
// environment file, and ends up in the plan description as a line of its
// own), and the values of --node-labels, --register-with-taints,
// --hostname-override and --node-ip, in either pflag form (--flag=value, or
// --flag then the value as the next word, which may be in the next
// element), must have the syntax kubelet and the API server want. Errors
// name the element: kubelet.flags[i].
func CheckUserFlags(flags []string) error {
	type word struct {
		elem int
		text string
	}
	var (
		errs  = make([][]error, len(flags)) // by element, to report in order
		words []word
	)
	for i, f := range flags {
		if err := syntax.NoControl(f); err != nil {
			errs[i] = append(errs[i], fmt.Errorf("kubelet.flags[%d]: %w", i, err))
			continue
		}
		for _, w := range flagwords.Split(f) {
			words = append(words, word{i, w})
		}
	}
	for j := 0; j < len(words); j++ {
		w := words[j]
		name, hasValue, ok := flagwords.Name(w.text)
		if !ok {
			continue
		}
		check, ok := flagValueChecks[name]
		if !ok {
			continue
		}
		_, value, _ := strings.Cut(w.text, "=")
		elem := w.elem
		if !hasValue {
			if j+1 == len(words) {
				errs[elem] = append(errs[elem], fmt.Errorf("kubelet.flags[%d]: %s needs a value", elem, name))
				continue
			}
			j++
			value, elem = words[j].text, words[j].elem
		}
		if err := check(value); err != nil {
			errs[elem] = append(errs[elem], fmt.Errorf("kubelet.flags[%d]: %s: %w", elem, name, err))
		}
	}
	return errors.Join(slices.Concat(errs...)...)
}
