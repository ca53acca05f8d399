// Package version holds berth's version, stamped at link time.
package version

// Version is set with -ldflags "-X github.com/berth-node/berth/version.Version=...".
var Version = "dev"
