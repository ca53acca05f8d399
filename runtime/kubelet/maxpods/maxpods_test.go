package maxpods

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/berth-node/berth/runtime/kubelet/maxpods/internal/tablegen"
)

// instanceInfo is nodeadm's instance data, copied into the repository (see
// data/README.md for where it came from).
const instanceInfo = "data/instance-info.jsonl"

// sourceName is the name the generator records in eni_table.go's header.
const sourceName = "runtime/kubelet/maxpods/data/instance-info.jsonl"

// TestTableIsGenerated guards the generator: the committed eni_table.go must
// be exactly what the generator makes from today's instance-info.jsonl.
func TestTableIsGenerated(t *testing.T) {
	f, err := os.Open(instanceInfo)
	if err != nil {
		t.Fatalf("the ENI table's source is missing: %v", err)
	}
	defer f.Close()
	want, err := tablegen.Generate(f, sourceName)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("eni_table.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("eni_table.go is stale: run go generate ./runtime/kubelet/maxpods")
	}
}

// TestTableMatchesSource checks every instance type round-trips through the
// packed encoding with its numbers intact.
func TestTableMatchesSource(t *testing.T) {
	data, err := os.ReadFile(instanceInfo)
	if err != nil {
		t.Fatalf("the ENI table's source is missing: %v", err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec struct {
			InstanceType string `json:"instanceType"`
			ENIs         int32  `json:"defaultMaxENIs"`
			IPs          int32  `json:"ipv4AddressesPerInterface"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		n++
		got, ok := Lookup(rec.InstanceType)
		if !ok || got != (ENIInfo{ENIs: rec.ENIs, IPsPerENI: rec.IPs}) {
			t.Errorf("Lookup(%q) = %+v, %v; want %d ENIs, %d IPs", rec.InstanceType, got, ok, rec.ENIs, rec.IPs)
		}
	}
	if n != Len() || n < 1000 {
		t.Errorf("table has %d types, source %d", Len(), n)
	}
}

func TestLookupKnownValues(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want int32
	}{
		{"m5.large", 29},
		{"t3.medium", 17},
		{"m5.xlarge", 58},
		{"c5.18xlarge", 737},
		{"a1.2xlarge", 58}, // first entry
	} {
		info, ok := Lookup(tc.typ)
		if !ok || info.MaxPods() != tc.want {
			t.Errorf("%s: max pods %d (known %v), want %d", tc.typ, info.MaxPods(), ok, tc.want)
		}
	}
	for _, typ := range []string{"", "m5", "m5.larg", "m5.large ", "zzz.metal", "a"} {
		if _, ok := Lookup(typ); ok {
			t.Errorf("Lookup(%q) found an entry", typ)
		}
	}
}

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name, typ, expr string
		want            int32
		known           bool
		warn            string
	}{
		{name: "table", typ: "m5.large", want: 29, known: true},
		{name: "expression uses max_pods", typ: "m5.large", expr: "max_pods - 9", want: 20, known: true},
		{name: "expression prefix delegation", typ: "m5.large", expr: "(default_enis * (ips_per_eni - 1)) * 16 + 2 > 110 ? 110 : (default_enis * (ips_per_eni - 1)) * 16 + 2", want: 110, known: true},
		{name: "karpenter expression", typ: "m5.large", expr: "((default_enis - 1) * (ips_per_eni - 1)) + 2", want: 20, known: true},
		{name: "runtime error falls back", typ: "m5.large", expr: "max_pods / (default_enis - 3)", want: 29, known: true, warn: "division by zero"},
		{name: "non-positive falls back", typ: "m5.large", expr: "0", want: 29, known: true, warn: "want at least 1"},
		{name: "unknown type", typ: "x9.huge", want: 110, warn: `instance type "x9.huge" is not in the max-pods table`},
		{name: "unknown type with expression", typ: "x9.huge", expr: "max_pods", want: 110, warn: "not applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(tc.typ, tc.expr)
			if r.MaxPods != tc.want || r.Known != tc.known {
				t.Errorf("MaxPods %d known %v, want %d %v", r.MaxPods, r.Known, tc.want, tc.known)
			}
			joined := strings.Join(r.Warnings, "\n")
			if tc.warn == "" && joined != "" {
				t.Errorf("unexpected warnings: %s", joined)
			}
			if tc.warn != "" && !strings.Contains(joined, tc.warn) {
				t.Errorf("warnings %q lack %q", joined, tc.warn)
			}
		})
	}
}

func TestGeneratorRejectsBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no instance types"},
		{`{"instanceType":"a.b","defaultMaxENIs":0,"ipv4AddressesPerInterface":3}`, "defaultMaxENIs 0"},
		{`{"instanceType":"a.b","defaultMaxENIs":2,"ipv4AddressesPerInterface":300}`, "ipv4AddressesPerInterface 300"},
		{`{"instanceType":"a b","defaultMaxENIs":2,"ipv4AddressesPerInterface":3}`, "has spaces"},
		{`{"instanceType":"a.b","defaultMaxENIs":2,"ipv4AddressesPerInterface":3,"extra":1}`, "unknown field"},
		{"{\"instanceType\":\"a.b\",\"defaultMaxENIs\":2,\"ipv4AddressesPerInterface\":3}\n{\"instanceType\":\"a.b\",\"defaultMaxENIs\":2,\"ipv4AddressesPerInterface\":3}", "repeats line 1"},
		{"not json", "line 1"},
	} {
		_, err := tablegen.Generate(strings.NewReader(tc.in), "in.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Generate(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}
