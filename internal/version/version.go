// Package version holds berth's version, stamped at link time.
package version

// Version is set with -ldflags "-X github.com/berth-node/berth/internal/version.Version=..."
// (the Makefile's LDFLAGS; version_test.go checks that the path there is
// this package's, since a wrong one leaves "dev" without a word).
var Version = "dev"
