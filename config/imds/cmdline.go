package imds

// CmdlineKey is the kernel command-line key that points berth at an IMDS
// other than EC2's (the tests' stand-in), or turns IMDS off. The imds
// package owns it: config/cmdline's list of known keys takes it from here,
// and everything that reads it goes through ParseOverride.
const CmdlineKey = "berth.imds"

// Override is what berth.imds= says.
type Override struct {
	// Off: no IMDS at all (berth.imds=off): no instance metadata, no user
	// data, no instance role.
	Off bool
	// Endpoint replaces EC2's endpoints when set; "" keeps EC2's
	// (EndpointIPv4, then EndpointIPv6).
	Endpoint string
}

// ParseOverride reads berth.imds's value; set says whether the key was on
// the command line at all (cmdline.Cmdline.Get's two results).
func ParseOverride(v string, set bool) Override {
	switch {
	case !set || v == "":
		return Override{}
	case v == "off":
		return Override{Off: true}
	}
	return Override{Endpoint: v}
}

// Endpoints is the override as imds.Options.Endpoints: nil for EC2's.
func (o Override) Endpoints() []string {
	if o.Off || o.Endpoint == "" {
		return nil
	}
	return []string{o.Endpoint}
}
