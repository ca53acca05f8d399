//go:build tools

// Package etcd pins the etcd server the local control plane runs.
// etcd's own go.mod replaces its sibling modules with local paths, so
// `go install go.etcd.io/etcd/server/v3@v` is refused; this throwaway module
// requires it instead.
package etcd

import (
	_ "go.etcd.io/etcd/server/v3"
)
