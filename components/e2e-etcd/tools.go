//go:build tools

// Package e2eetcd pins the etcd of the e2e suite's etcd image
// (registry.k8s.io/etcd:3.6.6-0, which the aggregator spec runs beside
// sample-apiserver): etcd, etcdctl and etcdutl v3.6.6, as upstream's
// kubernetes/cluster/images/etcd bundles them. A separate module from
// components/etcd, whose etcd v3.5.21 is the control plane's: one module
// holds one version of go.etcd.io/etcd/server/v3. etcd's own go.mod
// replaces its sibling modules with local paths, so `go install ...@v3.6.6`
// is refused; this throwaway module requires them instead.
package e2eetcd

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
