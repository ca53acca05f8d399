package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/nodeconfig"
)

// A node that is not an EC2 instance (issue 47): named by the user's
// --hostname-override over the seed's local-hostname, refused without a
// name or with a name kubelet would not register, refused an EKS token
// (no region, no instance role), sized by the user's maxPods; and never
// both instance metadata and machine facts.
func TestOffEC2(t *testing.T) {
	var seed goldenCase
	for _, c := range goldenCases() {
		if c.name == "nocloud-seed" {
			seed = c
		}
	}
	build := func(m Machine, edit func(*Inputs)) (*Plan, error) {
		c := seed
		c.machine = &m
		in := c.inputs(t)
		if edit != nil {
			edit(&in)
		}
		return Build(in)
	}
	base := Machine{Source: "NoCloud seed /dev/vdb", InstanceID: "iid-1", Hostname: "lab-node-1"}

	p, err := build(base, func(in *Inputs) {
		in.Config.Spec.Kubelet.Flags = []string{"--hostname-override=override-1"}
		in.Config.Spec.Kubelet.Config = nodeconfig.InlineDocument{"maxPods": json.RawMessage("42")}
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.NodeName != "override-1" || p.OffEC2.NodeNameFrom != "spec.kubelet.flags --hostname-override" || p.ProviderID != "" ||
		p.MaxPods != 42 || p.OffEC2.MaxPodsFrom != "spec.kubelet.config.maxPods" {
		t.Errorf("plan: name %s (%s), provider %q, max pods %d (%s)", p.NodeName, p.OffEC2.NodeNameFrom, p.ProviderID, p.MaxPods, p.OffEC2.MaxPodsFrom)
	}
	argv := p.Services[len(p.Services)-1].Argv
	for _, f := range []string{"--cloud-provider=external", "--image-credential-provider-config=/etc/eks/image-credential-provider/config.json"} {
		if slices.Contains(argv, f) {
			t.Errorf("kubelet argv has %s off EC2: %q", f, argv)
		}
	}
	for _, f := range p.Files {
		if strings.Contains(f.Path, "image-credential-provider") {
			t.Errorf("off EC2 the plan writes %s", f.Path)
		}
	}

	for _, c := range []struct {
		name string
		m    Machine
		edit func(*Inputs)
		want string
	}{
		{"no name", Machine{Source: "the image"}, nil, "no node name: this is not an EC2 instance"},
		{"bad name", Machine{Source: "x", Hostname: "Lab_Node"}, nil, "node name from x meta-data local-hostname"},
		{"eks token", base, func(in *Inputs) { delete(in.Config.Metadata, "annotations") }, "no region or instance role for an EKS token"},
		{"gate without id", Machine{Source: "x", Hostname: "a"}, func(in *Inputs) {
			in.Config.Spec.FeatureGates = map[nodeconfig.Feature]bool{nodeconfig.InstanceIdNodeName: true}
		}, "names the node by its instance ID, and x gives none"},
		{"both", base, func(in *Inputs) { in.Instance = baseInstance() }, "both instance metadata and machine facts"},
		{"neither", base, func(in *Inputs) { in.Machine = nil }, "no instance metadata and no machine facts"},
	} {
		if _, err := build(c.m, c.edit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
