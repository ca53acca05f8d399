module github.com/berth-node/berth/components/flannel-cni

go 1.26.0

require github.com/containernetworking/cni v1.3.0

require (
	github.com/onsi/ginkgo/v2 v2.25.1 // indirect
	github.com/onsi/gomega v1.38.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
