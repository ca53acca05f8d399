package spec

// Validate checks a layer used on its own (a container image's content) by
// the rules of a spec's root layer, so errors name its fields "root.…".
func (l Layer) Validate() error {
	s := Spec{Root: l}
	return s.validate()
}
