package supervise

import (
	"fmt"
	"slices"
	"strings"
)

// Node is what ordering needs of a service.
type Node struct {
	Name      string
	DependsOn []string
}

// StartOrder sorts services so each comes after what it depends on; ties
// keep the input order, so the plan's order is kept where it is already
// valid. It fails on an empty or duplicate name, an unknown dependency, or
// a cycle, which it names.
func StartOrder(nodes []Node) ([]string, error) {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("service %d: empty name", i)
		}
		if _, dup := index[n.Name]; dup {
			return nil, fmt.Errorf("service %q: defined twice", n.Name)
		}
		index[n.Name] = i
	}
	for _, n := range nodes {
		for _, d := range n.DependsOn {
			if _, ok := index[d]; !ok {
				return nil, fmt.Errorf("service %q: depends on unknown service %q", n.Name, d)
			}
		}
	}
	const (
		unvisited = iota
		visiting
		done
	)
	mark := make([]int, len(nodes))
	out := make([]string, 0, len(nodes))
	var stack []string
	var visit func(i int) error
	visit = func(i int) error {
		switch mark[i] {
		case done:
			return nil
		case visiting:
			start := slices.Index(stack, nodes[i].Name)
			cycle := append(slices.Clone(stack[start:]), nodes[i].Name)
			return fmt.Errorf("dependency cycle: %s", strings.Join(cycle, " -> "))
		}
		mark[i] = visiting
		stack = append(stack, nodes[i].Name)
		for _, d := range nodes[i].DependsOn {
			if err := visit(index[d]); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		out = append(out, nodes[i].Name)
		return nil
	}
	for i := range nodes {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StopOrder is the reverse of the start order: dependents stop before what
// they depend on (kubelet before containerd).
func StopOrder(start []string) []string {
	out := slices.Clone(start)
	slices.Reverse(out)
	return out
}
