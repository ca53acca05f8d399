package nodeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/berth-node/berth/config/lifecycle"
	"github.com/berth-node/berth/internal/redact"
)

// berthAnnotationPrefix marks berth's own annotations.
const berthAnnotationPrefix = "berth.dev/"

// annotationError is one bad annotation, or (Key "") a bad annotations
// map; Error names its field path.
type annotationError struct {
	Key string
	Err error
}

func (e *annotationError) path() string {
	if e.Key == "" {
		return "metadata.annotations"
	}
	p := fmt.Sprintf("metadata.annotations[%q]", e.Key)
	if me, ok := e.Err.(*subError); ok {
		p += me.Sub
	}
	return p
}

// reason is the error without the part of the path inside the value.
func (e *annotationError) reason() error {
	if me, ok := e.Err.(*subError); ok {
		return me.Err
	}
	return e.Err
}

func (e *annotationError) Error() string { return e.path() + ": " + e.reason().Error() }

func (e *annotationError) Unwrap() error { return e.Err }

// Annotations returns metadata.annotations' values, where berth's own
// extensions live (nodeadm ignores metadata, so they never change what
// nodeadm's fields mean). Every value must be a string, whatever its key:
// Kubernetes annotations are, nodeadm decodes metadata as Kubernetes
// object metadata and refuses a number or a bool there, and so does
// berth, naming the key. The map holds the string values only.
func Annotations(cfg *NodeConfig) (map[string]string, error) {
	ann := map[string]string{}
	if cfg == nil {
		return ann, nil
	}
	raw, ok := cfg.Metadata["annotations"]
	if !ok || isNull(raw) {
		return ann, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, &annotationError{Err: fmt.Errorf("want a map of strings, as Kubernetes annotations are: %w", err)}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(all)) {
		var v string
		if err := json.Unmarshal(all[k], &v); err != nil || isNull(all[k]) {
			errs = append(errs, &annotationError{Key: k, Err: fmt.Errorf("want a string (quote it in YAML), got %s", rawShown(k, all[k]))})
			continue
		}
		ann[k] = v
	}
	return ann, errors.Join(errs...)
}

// LifecyclePolicy is what berth does about EC2's lifecycle notices, from
// the berth.dev/on-* annotations (see package lifecycle). With an error,
// the policy keeps the default for each annotation at fault.
func LifecyclePolicy(cfg *NodeConfig) (lifecycle.Policy, error) {
	ann, aerr := Annotations(cfg)
	p, perr := lifecycle.PolicyFromAnnotations(ann)
	return p, errors.Join(aerr, perr)
}

// KnownAnnotations are berth's annotations, sorted: any other key under
// berth.dev/ is a warning (an error under berth check --strict), since a
// typo (berth.dev/sysctl) would otherwise lose the setting without a word.
func KnownAnnotations() []string {
	return slices.Sorted(slices.Values(slices.Concat([]string{bootstrapTokenAnnotation, RegistryMirrorsAnnotation,
		lifecycle.SpotAnnotation, lifecycle.RebalanceAnnotation, lifecycle.ASGAnnotation}, MachineAnnotations(), UpdateAnnotations())))
}

// bootstrapTokenRE is a Kubernetes bootstrap token, as init/plan reads
// the annotation.
var bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// checkAnnotations reports bad berth annotations, each at its own path,
// and warns of unknown ones.
func checkAnnotations(ps *problems, cfg *NodeConfig) {
	ann, err := Annotations(cfg)
	_, lerr := lifecycle.PolicyFromAnnotations(ann)
	err = errors.Join(err, lerr)
	if tok, ok := ann[bootstrapTokenAnnotation]; ok && !bootstrapTokenRE.MatchString(tok) {
		// Never echo the token: it is a secret even when malformed.
		err = errors.Join(err, &annotationError{Key: bootstrapTokenAnnotation, Err: errors.New("not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")})
	}
	known := KnownAnnotations()
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		// The lifecycle ones (berth.dev/on-*) are named by lifecycle.
		if strings.HasPrefix(k, berthAnnotationPrefix) && !strings.HasPrefix(k, lifecycle.AnnotationPrefix) && !slices.Contains(known, k) {
			ps.unknownf(fmt.Sprintf("metadata.annotations[%q]", k), "not a berth annotation, and berth ignores it; the known ones are %s", strings.Join(known, ", "))
		}
	}
	if v, ok := ann[RegistryMirrorsAnnotation]; ok {
		if _, merr := ParseRegistryMirrors(v); merr != nil {
			err = errors.Join(err, annotationErrors(RegistryMirrorsAnnotation, merr))
		}
	}
	if _, merr := machineFrom(ann); merr != nil {
		err = errors.Join(err, merr)
	}
	if _, uerr := updateFrom(ann); uerr != nil {
		err = errors.Join(err, uerr)
	}
	for _, e := range flatten(err) {
		var ae *annotationError
		var le *lifecycle.AnnotationError
		switch {
		case errors.As(e, &ae):
			ps.errorf(ae.path(), "%v", ae.reason())
		case errors.As(e, &le):
			ps.errorf(fmt.Sprintf("metadata.annotations[%q]", le.Annotation), "%v", le.Err)
		default:
			ps.errorf("metadata.annotations", "%v", e)
		}
	}
}

// flatten undoes (nested) errors.Join, so each problem gets its own line.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// rawShown is how a problem shows a value that is not the string it should
// be: its text, cut, or only its kind under a secret's key (an unquoted
// bootstrap token is a YAML number, and its digits are the secret).
func rawShown(key string, b json.RawMessage) string {
	if redact.Name(key) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			return kindAt("metadata.annotations."+key, v)
		}
		return "a value"
	}
	return cutRaw(b)
}

func cutRaw(b json.RawMessage) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
