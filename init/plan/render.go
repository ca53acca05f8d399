package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/internal/fsutil"
)

// RenderOptions tune Render.
type RenderOptions struct {
	// ShowSecrets shows secret values in the summary and in plan.txt
	// (DescribeOptions.ShowSecrets). The node's files under out are never
	// redacted: they are exactly what the node gets.
	ShowSecrets bool
}

// Render is `berth render` with secrets redacted (RenderWith's default).
func Render(in Inputs, out string, w io.Writer) (*Plan, error) {
	return RenderWith(in, out, w, RenderOptions{})
}

// RenderWith builds the plan from parsed inputs, writes every file under
// out at its node path and with its node mode (ModeFor), plus the
// description at out/run/berth/plan.txt (DescribeMode), and prints a short
// summary to w.
func RenderWith(in Inputs, out string, w io.Writer, o RenderOptions) (*Plan, error) {
	if out == "" {
		return nil, fmt.Errorf("render: no output directory")
	}
	p, err := Build(in)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	if err := p.WriteTo(out); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	do := DescribeOptions{ShowSecrets: o.ShowSecrets}
	desc := filepath.Join(out, DescribePath)
	if err := fsutil.WriteFileAtomic(desc, p.DescribeWith(do), DescribeMode); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	fmt.Fprintf(w, "node %s (%s), max pods %d, containerd config schema %d\n", p.NodeName, orNone(p.NodeIP), p.MaxPods, p.ContainerdSchema)
	for _, s := range p.Services {
		fmt.Fprintf(w, "service %s: %d args\n", s.Name, len(s.Argv))
	}
	for _, f := range p.Files {
		fmt.Fprintf(w, "wrote %s\n", filepath.Join(out, f.Path))
	}
	fmt.Fprintf(w, "wrote %s\n", desc)
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", do.text(warn))
	}
	return p, nil
}

// ReadMetadataFile reads `berth render --metadata FILE`: instance metadata
// as the JSON encoding of imds.Metadata. Unknown fields are errors, so a
// misspelt field is not silently empty.
func ReadMetadataFile(path string) (*imds.Metadata, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading instance metadata: %w", err)
	}
	m, err := ParseMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseMetadata decodes instance metadata JSON (see ReadMetadataFile).
func ParseMetadata(data []byte) (*imds.Metadata, error) {
	var m imds.Metadata
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding instance metadata JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decoding instance metadata JSON: more than one JSON value")
	}
	for _, f := range []struct{ name, v string }{
		{"instanceId", m.InstanceID}, {"instanceType", m.InstanceType},
		{"availabilityZone", m.AvailabilityZone}, {"region", m.Region},
	} {
		if f.v == "" {
			return nil, fmt.Errorf("instance metadata: %s is required", f.name)
		}
	}
	return &m, nil
}
