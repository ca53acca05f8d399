//go:build tools

package main

// The packages containerdaccepts reads with go/packages, required so that
// this module's go.mod and go.sum pin them and everything they import. The
// CRI plugins stand for internal/cri/config, which no other module may
// import but which they import.
import (
	_ "github.com/containerd/containerd/api/types/runc/options"
	_ "github.com/containerd/containerd/v2/cmd/containerd/server/config"
	_ "github.com/containerd/containerd/v2/plugins"
	_ "github.com/containerd/containerd/v2/plugins/cri"
	_ "github.com/containerd/containerd/v2/plugins/cri/images"
	_ "github.com/containerd/containerd/v2/plugins/cri/runtime"
	_ "github.com/containerd/containerd/v2/version"
	_ "github.com/opencontainers/runtime-spec/specs-go"
)
