package nodeconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseUnknownFields: unknown fields are warnings with their full path
// and are dropped; free-form documents are not looked into.
func TestParseUnknownFields(t *testing.T) {
	doc := `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  name: anything
  labels: {a: b}
spec:
  proxy:
    httpProxy: http://p
  cluster:
    name: c
    Name: C
  kubelet:
    flagz: [--v=2]
    config:
      notAKubeletField: 1
      nested: {deeper: true}
  containerd:
    baseRuntimeSpec:
      whatever: {x: 1}
  instance:
    localStorage:
      strategy: Mount
      raidLevel: 5
status: {}
`
	cfg, ps, err := Parse("f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := strs(ps)
	want := []string{
		`warning: f.yaml: spec.cluster.Name: unknown field (did you mean "name"? names are case-sensitive)`,
		`warning: f.yaml: spec.instance.localStorage.raidLevel: unknown field`,
		`warning: f.yaml: spec.kubelet.flagz: unknown field`,
		`warning: f.yaml: spec.proxy: unknown field`,
		`warning: f.yaml: status: unknown field`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	for _, p := range ps {
		if !p.Unknown {
			t.Errorf("%v is not marked Unknown", p)
		}
	}
	// The case-mismatched key must not override the real one.
	if cfg.Spec.Cluster.Name != "c" || len(cfg.Spec.Kubelet.Flags) != 0 {
		t.Errorf("unknown fields leaked into the config: %+v", cfg.Spec)
	}
	if string(cfg.Spec.Kubelet.Config["notAKubeletField"]) != "1" || cfg.Spec.Containerd.BaseRuntimeSpec["whatever"] == nil || cfg.Spec.Instance.LocalStorage.Strategy != LocalStorageMount {
		t.Errorf("known or free-form fields lost: %+v", cfg.Spec)
	}
}

// TestParseTypeErrors: values of the wrong type are errors at their path,
// all of them found in one pass, and the rest of the document survives.
func TestParseTypeErrors(t *testing.T) {
	doc := `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: 7
    cidr: 10.0.0.0/16
    enableOutpost: "yes please"
    certificateAuthority: "!!!"
  kubelet:
    flags: [--v=2, 3]
    config: [not, a, map]
  instance:
    environment: {A: [1]}
    network: none
  featureGates:
    InstanceIdNodeName: maybe
`
	cfg, ps, err := Parse("f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := strs(ps)
	want := []string{
		`error: f.yaml: spec.cluster.certificateAuthority: not valid base64: illegal base64 data at input byte 0`,
		`error: f.yaml: spec.cluster.enableOutpost: want true or false, got string "yes please"`,
		`error: f.yaml: spec.cluster.name: want a string, got number 7`,
		`error: f.yaml: spec.featureGates.InstanceIdNodeName: want true or false, got string "maybe"`,
		`error: f.yaml: spec.instance.environment.A: want a string, got a list`,
		`error: f.yaml: spec.instance.network: want a mapping, got string "none"`,
		`error: f.yaml: spec.kubelet.config: want a mapping, got a list`,
		`error: f.yaml: spec.kubelet.flags[1]: want a string, got number 3`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	if cfg.Spec.Cluster.CIDR != "10.0.0.0/16" || cfg.Spec.Kubelet.Flags != nil {
		t.Errorf("cidr kept and partial flag list dropped: %+v", cfg.Spec)
	}
}

func TestParseTypeMeta(t *testing.T) {
	cases := map[string][]string{
		"kind: NodeConfig\n":                           {`error: s: apiVersion: missing; want "node.eks.aws/v1alpha1"`},
		"apiVersion: node.eks.aws/v1alpha1\n":          {`error: s: kind: missing; want "NodeConfig"`},
		"apiVersion: v1\nkind: ConfigMap\n":            {`error: s: apiVersion: "v1" is not supported; want "node.eks.aws/v1alpha1"`, `error: s: kind: "ConfigMap" is not supported; want "NodeConfig"`},
		"apiVersion: 1\nkind: NodeConfig\n":            {`error: s: apiVersion: want a string, got number 1`},
		"apiVersion: node.eks.aws/v1alpha1\nkind: x\n": {`error: s: kind: "x" is not supported; want "NodeConfig"`},
	}
	for doc, want := range cases {
		_, ps, err := Parse("s", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := strs(ps); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%q:\n got %q\nwant %q", doc, got, want)
		}
	}
}

// TestParseFatal: documents that cannot be read at all return a Problem as
// the error, naming the source.
func TestParseFatal(t *testing.T) {
	cases := map[string]string{
		"a: [":          "s: invalid YAML or JSON: yaml: line 1: did not find expected node content",
		"- a\n- b\n":    "s: want a NodeConfig mapping, got a list",
		"just a string": `s: want a NodeConfig mapping, got string "just a string"`,
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n": "s: holds 2 YAML documents; put one NodeConfig in each file or MIME part",
		"{\"apiVersion\": ": "s: invalid YAML or JSON: yaml: line 1: did not find expected node content",
	}
	for doc, want := range cases {
		cfg, _, err := Parse("s", []byte(doc))
		var p Problem
		if cfg != nil || !errors.As(err, &p) || p.Severity != SeverityError {
			t.Errorf("%q: got %v, %v; want a Problem error", doc, cfg, err)
			continue
		}
		if err.Error() != want {
			t.Errorf("%q:\n got %q\nwant %q", doc, err.Error(), want)
		}
	}
	big := make([]byte, MaxDocumentSize+1)
	if _, _, err := Parse("s", big); err == nil || err.Error() != "s: document is 524289 bytes, over the 524288-byte limit (nodeconfig.MaxDocumentSize)" {
		t.Errorf("oversized document: %v", err)
	}
}

// TestParseJSONAndMarkers: JSON parses like YAML; a leading --- and a
// trailing empty document are one document.
func TestParseJSONAndMarkers(t *testing.T) {
	for _, doc := range []string{
		`{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"cluster":{"name":"j"}}}`,
		"---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: j\n---\n# nothing\n",
	} {
		cfg, ps, err := Parse("s", []byte(doc))
		if err != nil || len(ps) != 0 || cfg.Spec.Cluster.Name != "j" {
			t.Errorf("%q: %v %v %+v", doc, err, ps, cfg)
		}
	}
}

// TestParseAliasBomb: YAML alias expansion ("billion laughs": 9^9 "lol"s
// from 300 bytes) is refused rather than expanded into gigabytes; see
// bounds_test.go for the bombs go-yaml's own check lets through.
func TestParseAliasBomb(t *testing.T) {
	doc := "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		doc += n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 8) + "*" + prev + "]\n"
		prev = n
	}
	_, _, err := Parse("bomb", []byte(doc))
	const want = "bomb: YAML aliases expand the document past the 1048576-byte limit (nodeconfig.MaxExpandedSize): the list at line 6 expands to more than that"
	if err == nil || err.Error() != want {
		t.Errorf("alias bomb:\n got %v\nwant %s", err, want)
	}
}

// TestProblemsDoNotEchoSecrets: a wrongly typed value under a name that
// looks secret is described by its kind only, since problems are printed
// on the console and kept in the boot report.
func TestProblemsDoNotEchoSecrets(t *testing.T) {
	doc := []byte(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    environment:
      API_TOKEN: 123456789
      REGION: 42
`)
	_, problems, err := Parse("user-data", doc)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var all strings.Builder
	for _, p := range problems {
		all.WriteString(p.String() + "\n")
	}
	out := all.String()
	if strings.Contains(out, "123456789") {
		t.Errorf("a secret-named field's value is in the problems:\n%s", out)
	}
	if !strings.Contains(out, "API_TOKEN") || !strings.Contains(out, "a number") {
		t.Errorf("the problem must still name the field and the kind:\n%s", out)
	}
	if !strings.Contains(out, "number 42") {
		t.Errorf("a field that is not secret keeps its value in the problem:\n%s", out)
	}
}

// Maps and lists nest at most MaxNesting deep: deeper is refused at once,
// with the path where it goes past, before anything re-encodes it (9,000
// deep cost `berth render` 1 GB and a 310 MB file).
func TestParseNestingBound(t *testing.T) {
	doc := func(lists int) string {
		// spec, kubelet, config, a: the value starts 4 levels down.
		return "spec:\n  kubelet:\n    config:\n      a: " + strings.Repeat("[", lists) + strings.Repeat("]", lists) + "\n"
	}
	for _, lists := range []int{MaxNesting - 4, MaxNesting - 3} {
		_, _, err := Parse("ok", []byte(doc(lists)))
		if err != nil {
			t.Errorf("%d lists under spec.kubelet.config.a (%d deep): %v", lists, lists+4, err)
		}
	}
	for _, lists := range []int{MaxNesting - 2, 9000} {
		_, _, err := Parse("deep", []byte(doc(lists)))
		if err == nil || !strings.Contains(err.Error(), "spec.kubelet.config.a[0][0]") || !strings.Contains(err.Error(), "nest more than 64 deep") {
			t.Errorf("%d lists: error = %v, want the nesting bound with its path", lists, err)
		}
	}
	// Maps count too, and the path names the keys.
	deep := "spec:\n  kubelet:\n    config:\n" + strings.Repeat(" ", 6)
	for i := range MaxNesting {
		deep += fmt.Sprintf("k%d: {", i)
	}
	deep += "x: 1" + strings.Repeat("}", MaxNesting) + "\n"
	if _, _, err := Parse("maps", []byte(deep)); err == nil || !strings.Contains(err.Error(), "spec.kubelet.config.k0.k1.k2") {
		t.Errorf("deep maps: error = %v", err)
	}
}

// What the YAML-to-JSON conversion would let through silently is refused,
// naming where: a repeated key (both lines), text after the document.
func TestParseStrict(t *testing.T) {
	head := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"second spec", head + "spec:\n  cluster:\n    name: a\nspec:\n  kubelet: {}\n", "spec: key repeated at lines 3 and 6"},
		{"json nested", `{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"cluster":{"name":"a","name":"b"}}}`, "spec.cluster.name: key repeated at lines 1 and 1"},
		{"in a list", head + "spec:\n  kubelet:\n    config:\n      a:\n      - x: 1\n        x: 2\n", "spec.kubelet.config.a[0].x: key repeated at lines 7 and 8"},
		{"json then text", `{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{}} xyz`, "text after the document"},
		{"json then brace", "{\"apiVersion\":\"node.eks.aws/v1alpha1\",\"kind\":\"NodeConfig\",\"spec\":{}}\n}}garbage", "text after the document"},
	} {
		_, _, err := Parse(tc.name, []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ name, doc string }{
		{"empty document after", head + "spec: {}\n---\n# nothing\n"},
		{"same key in two mappings", head + "spec:\n  cluster:\n    name: a\n  kubelet:\n    config:\n      name: b\n"},
		{"merge keys", head + "x: &a {p: 1}\ny: &b {q: 2}\nspec:\n  kubelet:\n    config:\n      m:\n        <<: *a\n        <<: *b\n"},
	} {
		if _, _, err := Parse(tc.name, []byte(tc.doc)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
