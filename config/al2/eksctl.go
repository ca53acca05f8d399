package al2

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// eksctl's Amazon Linux 2 node groups (self-managed, eksctl's own
// bootstrap: pkg/nodebootstrap's linuxConfig) carry no shell script but
// cloud-config: write_files puts the bootstrap variables in
// /etc/eksctl/kubelet.env, the node group's kubeletExtraConfig in
// /etc/eksctl/kubelet-extra.json and eksctl's two scripts under
// /var/lib/cloud/scripts/eksctl/, and runcmd runs the node group's
// preBootstrapCommands, then the scripts. bootstrap.helper.sh sources
// kubelet.env and builds kubelet's extra arguments; bootstrap.al2.sh
// sources the helper, runs /etc/eks/bootstrap.sh with them and merges
// kubelet-extra.json over kubelet's config with jq. berth runs none of
// it: it reads the two files, which are data, as the scripts would have
// used them.
const (
	// EksctlEnvPath is eksctl's bootstrap variables (KEY=value lines).
	EksctlEnvPath = "/etc/eksctl/kubelet.env"
	// EksctlKubeletExtraPath is the node group's kubeletExtraConfig.
	EksctlKubeletExtraPath = "/etc/eksctl/kubelet-extra.json"
	// eksctlScripts is where eksctl's cloud-config puts its scripts.
	eksctlScripts = "/var/lib/cloud/scripts/eksctl/"
	// eksctlHelper and eksctlBootstrap are the two scripts, run in
	// that order.
	eksctlHelper    = eksctlScripts + "bootstrap.helper.sh"
	eksctlBootstrap = eksctlScripts + "bootstrap.al2.sh"
	// eksctlDefaultMaxPods is bootstrap.helper.sh's MAX_PODS default.
	eksctlDefaultMaxPods = "110"
)

// Limits on eksctl's cloud-config, far above what eksctl writes (a few
// KiB, a dozen entries).
const (
	// MaxCloudConfigEntries caps write_files and runcmd entries.
	MaxCloudConfigEntries = 256
	// MaxCloudConfigDepth caps the YAML's nesting.
	MaxCloudConfigDepth = 16
)

// eksctlEnvVars are the variables of kubelet.env eksctl's scripts read.
var eksctlEnvVars = []string{"CLUSTER_NAME", "API_SERVER_URL", "B64_CLUSTER_CA", "NODE_LABELS", "NODE_TAINTS", "MAX_PODS", "CLUSTER_DNS", "CONTAINER_RUNTIME"}

// Eksctl is what eksctl's AL2 user data asks of bootstrap.sh and kubelet.
type Eksctl struct {
	// Options are bootstrap.sh's, as bootstrap.al2.sh passed them;
	// FromEnv names the kubelet.env variable behind each.
	Options Options `json:"options"`
	// KubeletExtra is kubelet-extra.json's object (KubeletConfiguration
	// fields jq merged over kubelet's config); nil when it is empty.
	KubeletExtra map[string]json.RawMessage `json:"kubeletExtra,omitempty"`
	// NotRun are runcmd's other commands (preBootstrapCommands, the EFA
	// script), with their line in the cloud-config.
	NotRun []Line `json:"notRun,omitempty"`
	// Warnings say what the scripts did that berth does not: the labels
	// bootstrap.helper.sh read from instance metadata, variables of
	// kubelet.env no script reads.
	Warnings []string `json:"warnings,omitempty"`
}

// IsEksctlCloudConfig reports whether data is cloud-config that runs
// eksctl's bootstrap scripts, by a cheap look: callers use it to tell
// eksctl's AL2 user data from other cloud-config, which is skipped.
func IsEksctlCloudConfig(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(data), []byte("#cloud-config")) &&
		(bytes.Contains(data, []byte(eksctlScripts)) || bytes.Contains(data, []byte("/etc/eksctl/")))
}

// cloudConfig is the part of cloud-config eksctl writes that berth reads.
type cloudConfig struct {
	files  map[string]cloudFile
	runcmd []cloudCmd
}

type cloudFile struct {
	line    int
	content string
}

type cloudCmd struct {
	line int
	argv []string
}

// ReadEksctl reads eksctl's AL2 cloud-config. Errors name the line, and
// say "eksctl's AL2 user data" and what to do instead: a shape berth does
// not read (an overrideBootstrapCommand, a changed script) is refused, not
// guessed at.
func ReadEksctl(data []byte) (*Eksctl, error) {
	cc, err := readCloudConfig(data)
	if err != nil {
		return nil, err
	}
	refuse := func(line int, format string, args ...any) error {
		return &Error{line, "eksctl's AL2 user data: " + fmt.Sprintf(format, args...) +
			"; berth reads only eksctl's own bootstrap (kubelet.env and bootstrap.al2.sh): give the node a NodeConfig (berth convert prints one from user data berth reads)"}
	}
	script, ok := cc.files[eksctlBootstrap]
	if !ok {
		return nil, refuse(1, "no %s in write_files (an overrideBootstrapCommand, or an eksctl berth does not know)", eksctlBootstrap)
	}
	if !bytes.Contains([]byte(script.content), []byte(`/etc/eks/bootstrap.sh "${CLUSTER_NAME}"`)) {
		return nil, refuse(script.line, "%s is not eksctl's script (it does not run /etc/eks/bootstrap.sh \"${CLUSTER_NAME}\")", eksctlBootstrap)
	}
	env, ok := cc.files[EksctlEnvPath]
	if !ok {
		return nil, refuse(1, "no %s in write_files", EksctlEnvPath)
	}
	vars, err := readEnvFile(env)
	if err != nil {
		return nil, err
	}
	e := &Eksctl{}
	ran := false
	for _, c := range cc.runcmd {
		switch {
		case len(c.argv) == 1 && c.argv[0] == eksctlHelper:
		case len(c.argv) == 1 && c.argv[0] == eksctlBootstrap:
			ran = true
		default:
			e.NotRun = append(e.NotRun, Line{c.line, clip(strings.Join(c.argv, " "))})
		}
	}
	if !ran {
		return nil, refuse(1, "runcmd does not run %s", eksctlBootstrap)
	}
	if extra, ok := cc.files[EksctlKubeletExtraPath]; ok {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(extra.content), &doc); err != nil || doc == nil {
			return nil, &Error{extra.line, fmt.Sprintf("eksctl's AL2 user data: %s: want a JSON object of KubeletConfiguration fields: %v", EksctlKubeletExtraPath, err)}
		}
		if len(doc) > 0 {
			e.KubeletExtra = doc
		}
	}
	e.Options, e.Warnings = eksctlOptions(vars)
	return e, nil
}

// envLine is one KEY=value line of kubelet.env.
type envLine struct {
	line  int
	value string
}

var envAssignRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// readEnvFile reads kubelet.env as bash's source did for the scripts,
// where that is plain: KEY=value lines, values taken as they are. A value
// bash would expand, quote-strip or split (quotes, $, `, \, blanks, shell
// operators) is an error, as is any other line; eksctl writes none.
func readEnvFile(f cloudFile) (map[string]envLine, error) {
	vars := map[string]envLine{}
	for i, l := range strings.Split(f.content, "\n") {
		// The file's content starts on the line after "content:" when it
		// is a block scalar, and on that line when it is inline.
		n := f.line + i
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := envAssignRE.FindStringSubmatch(l)
		if m == nil {
			return nil, &Error{n, fmt.Sprintf("eksctl's AL2 user data: %s: %s is not a KEY=value line", EksctlEnvPath, quoteClipped(l))}
		}
		if strings.ContainsAny(m[2], "'\"$`\\ \t;&|<>()") {
			return nil, &Error{n, fmt.Sprintf("eksctl's AL2 user data: %s: %s=%s: berth reads plain values only (no quotes, $, \\, blanks or shell operators), as eksctl writes them", EksctlEnvPath, m[1], quoteClipped(m[2]))}
		}
		vars[m[1]] = envLine{n, m[2]}
	}
	return vars, nil
}

// eksctlOptions are bootstrap.sh's options as bootstrap.al2.sh gave them
// from kubelet.env through bootstrap.helper.sh: the cluster, endpoint and
// CA; --dns-cluster-ip when CLUSTER_DNS is not empty; --container-runtime
// (the helper's default, dockerd, when unset); and --kubelet-extra-args
// with --node-labels (NODE_LABELS), --register-with-taints (NODE_TAINTS,
// when set) and --max-pods (MAX_PODS, 110 by default). The helper also
// labelled the node node-lifecycle and alpha.eksctl.io/instance-id from
// instance metadata; berth does not, and warns.
func eksctlOptions(vars map[string]envLine) (Options, []string) {
	o := Options{Set: map[string]string{}, FromEnv: map[string]string{}}
	set := func(opt, name, v string) {
		o.Set[opt] = v
		o.Order = append(o.Order, opt)
		o.FromEnv[opt] = name
	}
	get := func(name string) string { return vars[name].value }
	o.ClusterName = get("CLUSTER_NAME")
	if v := get("API_SERVER_URL"); v != "" {
		set("--apiserver-endpoint", "API_SERVER_URL", v)
	}
	if v := get("B64_CLUSTER_CA"); v != "" {
		set("--b64-cluster-ca", "B64_CLUSTER_CA", v)
	}
	if v := get("CLUSTER_DNS"); v != "" {
		set("--dns-cluster-ip", "CLUSTER_DNS", v)
	}
	args := []string{}
	if v := get("NODE_LABELS"); v != "" {
		args = append(args, "--node-labels="+v)
	}
	if v := get("NODE_TAINTS"); v != "" {
		args = append(args, "--register-with-taints="+v)
	}
	args = append(args, "--max-pods="+cmp.Or(get("MAX_PODS"), eksctlDefaultMaxPods))
	set("--kubelet-extra-args", "NODE_LABELS, NODE_TAINTS and MAX_PODS", strings.Join(args, " "))
	set("--container-runtime", "CONTAINER_RUNTIME", cmp.Or(get("CONTAINER_RUNTIME"), "dockerd"))
	warnings := []string{"eksctl's bootstrap.helper.sh labelled the node node-lifecycle (instance metadata's instance-life-cycle) and alpha.eksctl.io/instance-id; berth does not add these labels"}
	var unknown []string
	for name, l := range vars {
		if !slices.Contains(eksctlEnvVars, name) {
			unknown = append(unknown, fmt.Sprintf("%s (line %d)", name, l.line))
		}
	}
	slices.Sort(unknown)
	if len(unknown) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: %s: no eksctl script reads these; ignored", EksctlEnvPath, strings.Join(unknown, ", ")))
	}
	return o, warnings
}

// readCloudConfig reads the write_files and runcmd of a cloud-config
// document through go-yaml's node tree, for its lines: no aliases, the
// nesting and the entries bounded.
func readCloudConfig(data []byte) (*cloudConfig, error) {
	var root yaml3.Node
	if err := yaml3.Unmarshal(data, &root); err != nil {
		return nil, &Error{1, "eksctl's AL2 user data: not YAML: " + clip(err.Error())}
	}
	if err := checkNode(&root, 0); err != nil {
		return nil, err
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml3.MappingNode {
		return nil, &Error{1, "eksctl's AL2 user data: the cloud-config is not a mapping"}
	}
	cc := &cloudConfig{files: map[string]cloudFile{}}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "write_files":
			if v.Kind != yaml3.SequenceNode {
				return nil, &Error{v.Line, "eksctl's AL2 user data: write_files is not a list"}
			}
			for _, f := range v.Content {
				path, content, line, err := writeFile(f)
				if err != nil {
					return nil, err
				}
				if _, dup := cc.files[path]; dup {
					return nil, &Error{f.Line, fmt.Sprintf("eksctl's AL2 user data: write_files names %s twice", quoteClipped(path))}
				}
				cc.files[path] = cloudFile{line: line, content: content}
			}
		case "runcmd":
			if v.Kind != yaml3.SequenceNode {
				return nil, &Error{v.Line, "eksctl's AL2 user data: runcmd is not a list"}
			}
			for _, c := range v.Content {
				var argv []string
				switch c.Kind {
				case yaml3.ScalarNode:
					argv = []string{c.Value}
				case yaml3.SequenceNode:
					for _, w := range c.Content {
						if w.Kind != yaml3.ScalarNode {
							return nil, &Error{w.Line, "eksctl's AL2 user data: a runcmd word is not a string"}
						}
						argv = append(argv, w.Value)
					}
				default:
					return nil, &Error{c.Line, "eksctl's AL2 user data: a runcmd entry is neither a command nor a list of words"}
				}
				cc.runcmd = append(cc.runcmd, cloudCmd{line: c.Line, argv: argv})
			}
		}
	}
	if len(cc.files) > MaxCloudConfigEntries || len(cc.runcmd) > MaxCloudConfigEntries {
		return nil, &Error{1, fmt.Sprintf("eksctl's AL2 user data: more than %d write_files or runcmd entries (al2.MaxCloudConfigEntries)", MaxCloudConfigEntries)}
	}
	return cc, nil
}

// writeFile reads one write_files entry: its path, its content (plain
// text: an encoding berth refuses) and the line the content starts on.
func writeFile(f *yaml3.Node) (path, content string, line int, err error) {
	if f.Kind != yaml3.MappingNode {
		return "", "", 0, &Error{f.Line, "eksctl's AL2 user data: a write_files entry is not a mapping"}
	}
	line = f.Line
	for i := 0; i+1 < len(f.Content); i += 2 {
		k, v := f.Content[i], f.Content[i+1]
		if v.Kind != yaml3.ScalarNode {
			continue // owner, permissions, ...: strings; nothing berth reads
		}
		switch k.Value {
		case "path":
			path = v.Value
		case "content":
			content, line = v.Value, v.Line
			if v.Style&(yaml3.LiteralStyle|yaml3.FoldedStyle) != 0 {
				line++ // a block scalar's text starts on the next line
			}
		case "encoding":
			if v.Value != "" && v.Value != "text/plain" {
				return "", "", 0, &Error{v.Line, fmt.Sprintf("eksctl's AL2 user data: write_files encoding %s: berth reads plain text only, as eksctl writes it", quoteClipped(v.Value))}
			}
		}
	}
	return path, content, line, nil
}

// checkNode refuses aliases (eksctl writes none, and they can multiply a
// document's size) and nesting beyond MaxCloudConfigDepth.
func checkNode(n *yaml3.Node, depth int) error {
	if depth > MaxCloudConfigDepth {
		return &Error{n.Line, fmt.Sprintf("eksctl's AL2 user data: nested deeper than %d (al2.MaxCloudConfigDepth)", MaxCloudConfigDepth)}
	}
	if n.Kind == yaml3.AliasNode || n.Anchor != "" {
		return &Error{n.Line, "eksctl's AL2 user data: YAML anchors and aliases are not read (eksctl writes none)"}
	}
	for _, c := range n.Content {
		if err := checkNode(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}
