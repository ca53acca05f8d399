// Command flannel is the flannel CNI plugin that flannel's upstream
// manifest copies into /opt/cni/bin/flannel: flannel.go and
// flannel_linux.go are github.com/flannel-io/cni-plugin's, copied unchanged
// at tag v1.9.1-flannel1 (commit 4c87e5d413198ceede07f8ef6f828357ebbd00c0;
// Apache License 2.0, as their headers say). The Go module proxy refuses
// that module (403), so it cannot be required; github.com/containernetworking/plugins
// v0.9.1, the last release with the same program as plugins/meta/flannel,
// speaks CNI only up to 0.4.0, and the manifest's conflist is CNI 1.0.0
// (kubelet's sandbox then fails with "incompatible CNI versions"). The
// flannel manifest (v0.28.10) names v1.9.1-flannel3, a tag not on record
// here; -flannel1 is the nearest release of the same version.
// components.mk builds it with Program, Version and Commit set, as
// upstream's scripts/build_flannel.sh does.
package main
