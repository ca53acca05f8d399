package nodeconfig

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Convert writes res (what Load made of some user data: NodeConfigs, MIME,
// an Amazon Linux 2 script) as one NodeConfig document in YAML, which is
// what `berth convert` prints for operators moving their launch templates
// to NodeConfig user data. Comments above it say what it was read from,
// what could not be carried over (the script lines not run, each warning)
// and where berth accepts what nodeadm would not. The caller refuses a
// result with errors: a partial document must not pass for the whole.
func Convert(res *Result) ([]byte, error) {
	if HasErrors(res.Problems) {
		return nil, fmt.Errorf("converting: the user data has errors; fix them first (berth check prints them)")
	}
	body, err := yaml.Marshal(res.Config)
	if err != nil {
		return nil, fmt.Errorf("converting: writing YAML: %w", err)
	}
	var b bytes.Buffer
	comment := func(format string, args ...any) {
		for _, l := range strings.Split(fmt.Sprintf(format, args...), "\n") {
			b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	comment("The NodeConfig these sources mean, as berth reads them (berth convert).")
	for _, u := range res.Used {
		comment("  read: %s", u)
	}
	for _, s := range res.Skipped {
		comment("  skipped: %s: %s", s.Source, s.Reason)
	}
	if len(res.NotRun) > 0 {
		comment("Not run (berth runs no shell; bootstrap.sh's options took what they use\nfrom the assignments): move what the others did into this NodeConfig or\ninto the image.")
		for _, n := range res.NotRun {
			comment("  %s line %d: %s", n.Source, n.Line, n.Text)
		}
	}
	for _, p := range res.Problems {
		comment("%s", p.String())
	}
	if ann, _ := Annotations(res.Config); len(ann) > 0 {
		var own []string
		for _, k := range MachineAnnotations() {
			if _, ok := ann[k]; ok {
				own = append(own, k)
			}
		}
		if len(own) > 0 {
			comment("%s: berth's machine settings; nodeadm (AL2023)\nignores them, and takes them from its AMI or a script instead.", strings.Join(own, ", "))
		}
	}
	if res.Config.Spec.Cluster.CIDR == "" {
		comment("spec.cluster.cidr is not known: berth takes the cluster DNS address from\nspec.kubelet.config.clusterDNS instead; nodeadm (AL2023) requires the CIDR.")
	}
	b.Write(body)
	return b.Bytes(), nil
}
