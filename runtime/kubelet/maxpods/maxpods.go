// Package maxpods decides how many pods a node may run: nodeadm's ENI
// formula over a table of EC2 instance types embedded at build time (no EC2
// API call at boot), optionally reshaped by the user's CEL maxPodsExpression.
package maxpods

//go:generate go run ./gen -in data/instance-info.jsonl -out eni_table.go

import (
	"fmt"
	"sort"

	"github.com/berth-node/berth/config/nodeconfig/maxpodsexpr"
)

// DefaultMaxPods is kubelet's own default, used when the instance type is not
// in the table (as nodeadm does when both its file and EC2 lookups fail).
const DefaultMaxPods int32 = 110

// ENIInfo is what EC2 says about an instance type's networking.
type ENIInfo struct {
	// ENIs is the number of network interfaces on the default network card.
	ENIs int32
	// IPsPerENI is the number of IPv4 addresses per interface.
	IPsPerENI int32
}

// MaxPods is the VPC CNI formula: each ENI's primary address is not given
// to pods, and 2 host-network pods (kube-proxy, aws-node) need no address.
func (e ENIInfo) MaxPods() int32 { return e.ENIs*(e.IPsPerENI-1) + 2 }

// Lookup finds an instance type in the embedded table.
func Lookup(instanceType string) (ENIInfo, bool) {
	i := sort.Search(tableLen, func(i int) bool { return tableName(i) >= instanceType })
	if i >= tableLen || tableName(i) != instanceType {
		return ENIInfo{}, false
	}
	return ENIInfo{ENIs: int32(tableNums[2*i]), IPsPerENI: int32(tableNums[2*i+1])}, true
}

// Len is the number of instance types in the table.
func Len() int { return tableLen }

func tableEnd(i int) int { return int(tableEnds[2*i])<<8 | int(tableEnds[2*i+1]) }

func tableName(i int) string {
	start := 0
	if i > 0 {
		start = tableEnd(i - 1)
	}
	return tableNames[start:tableEnd(i)]
}

// Evaluate runs a maxPodsExpression with the instance's ENI facts and the
// standard max pods value as its variables.
func Evaluate(expression string, info ENIInfo) (int32, error) {
	e, err := maxpodsexpr.Compile(expression)
	if err != nil {
		return 0, fmt.Errorf("kubelet.maxPodsExpression: %w", err)
	}
	n, err := e.Eval(maxpodsexpr.Vars{DefaultENIs: int(info.ENIs), IPsPerENI: int(info.IPsPerENI), MaxPods: int(info.MaxPods())})
	if err != nil {
		return 0, fmt.Errorf("kubelet.maxPodsExpression: %w", err)
	}
	return int32(n), nil
}

// Result is the decided max pods and why.
type Result struct {
	MaxPods int32
	// Known is false when the instance type is not in the table.
	Known bool
	ENI   ENIInfo
	// Warnings explain every fallback taken, for the plan's warnings.
	Warnings []string
}

// Compute applies nodeadm's order: the table's value for instanceType, then
// expression (if not empty) over it. Like nodeadm, an expression that fails at
// evaluation (say a division by zero) or gives a non-positive number falls
// back to the table's value with a warning rather than failing the boot;
// compile errors were already rejected by validation. An unknown instance
// type gives DefaultMaxPods and a warning, and the expression is not applied
// because its variables are unknown.
func Compute(instanceType, expression string) Result {
	info, ok := Lookup(instanceType)
	if !ok {
		r := Result{MaxPods: DefaultMaxPods, Warnings: []string{
			fmt.Sprintf("instance type %q is not in the max-pods table; using kubelet's default of %d pods", instanceType, DefaultMaxPods),
		}}
		if expression != "" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("kubelet.maxPodsExpression %q not applied: instance type %q has no ENI facts", expression, instanceType))
		}
		return r
	}
	r := Result{MaxPods: info.MaxPods(), Known: true, ENI: info}
	if expression != "" {
		v, err := Evaluate(expression, info)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("kubelet.maxPodsExpression ignored, using %d pods: %v", r.MaxPods, err))
		} else {
			r.MaxPods = v
		}
	}
	return r
}
