# components.mk: the real node and control-plane components, built from
# source and cached under build/components/<name>-<version>/ (a directory is
# complete only when its .built stamp exists, so an interrupted build is
# redone, and a version bump builds into a new directory).
# Included from the Makefile, which defines BUILD and GO.
#
#   make components        everything below
#   make kube etcd containerd runc cni pause-images   one at a time
#
# Cold build times on 2 shared cores are in components/README.md.

KUBE_VERSION       := v1.35.4
ETCD_VERSION       := v3.5.21
CONTAINERD_VERSION := v2.2.3
RUNC_VERSION       := v1.3.6
CNI_VERSION        := v1.7.1
COREDNS_VERSION    := v1.15.0
# The sandbox image containerd is configured with; the pause tarball is
# imported under exactly this name.
PAUSE_IMAGE        := registry.k8s.io/pause:3.10
DEMO_IMAGE         := localhost/berth-demo:v1
# The cluster's images, served by the registry stand-in and pulled by
# containerd through the registry.berth.test mirror. busybox is Debian's
# busybox-static, tagged with its package version made a valid tag (no
# epoch; + and ~ become -).
CLUSTER_REGISTRY   := registry.berth.test/berth
# Recursive (=), not :=: on a fresh machine busybox-static is installed by
# `make deps` in the same make run, after this file is read.
BUSYBOX_VERSION     = $(shell dpkg-query -W -f='$${Version}' busybox-static 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/-/g')
CLUSTER_IMAGE_REFS  = $(CLUSTER_REGISTRY)/install-cni:$(CNI_VERSION) $(CLUSTER_REGISTRY)/kube-proxy:$(KUBE_VERSION) \
  $(CLUSTER_REGISTRY)/coredns:$(COREDNS_VERSION) $(CLUSTER_REGISTRY)/busybox:$(BUSYBOX_VERSION)
# demo.tar (above) is served under this name; the name inside the tarball is
# only a default.
DEMO_IMAGE_REF     := $(CLUSTER_REGISTRY)/demo:v1

COMPONENTS_DIR  := $(BUILD)/components
KUBE_DIR        := $(COMPONENTS_DIR)/kube-$(KUBE_VERSION)
ETCD_DIR        := $(COMPONENTS_DIR)/etcd-$(ETCD_VERSION)
CONTAINERD_DIR  := $(COMPONENTS_DIR)/containerd-$(CONTAINERD_VERSION)
RUNC_DIR        := $(COMPONENTS_DIR)/runc-$(RUNC_VERSION)
CNI_DIR         := $(COMPONENTS_DIR)/cni-plugins-$(CNI_VERSION)
OCI_IMAGES_DIR  := $(COMPONENTS_DIR)/images
KUBE_PROXY_DIR  := $(COMPONENTS_DIR)/kube-proxy-$(KUBE_VERSION)
COREDNS_DIR     := $(COMPONENTS_DIR)/coredns-$(COREDNS_VERSION)

# Builds are long and the machine is shared: run them at low priority.
NICE ?= nice -n 19

KUBE_BINS := kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl
KUBE_MINOR = $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS = -s -w \
  -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
  -X k8s.io/component-base/version.gitTreeState=clean \
  -X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/client-go/pkg/version.gitMajor=1 \
  -X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR) \
  -X k8s.io/client-go/pkg/version.gitTreeState=clean

.PHONY: components kube etcd containerd runc cni pause-images components-versions kube-proxy coredns cluster-images

## components: kubelet, control plane, etcd, containerd, runc, CNI plugins, pause/demo images, the cluster's images.
components: kube etcd containerd runc cni pause-images cluster-images

kube:         $(KUBE_DIR)/.built
etcd:         $(ETCD_DIR)/.built
containerd:   $(CONTAINERD_DIR)/.built
runc:         $(RUNC_DIR)/.built
cni:          $(CNI_DIR)/.built
pause-images: $(OCI_IMAGES_DIR)/pause.tar $(OCI_IMAGES_DIR)/demo.tar
kube-proxy:   $(KUBE_PROXY_DIR)/.built
coredns:      $(COREDNS_DIR)/.built

## components-versions: print the pinned versions (for the image manifest).
components-versions:
	@echo "kubernetes=$(KUBE_VERSION) etcd=$(ETCD_VERSION) containerd=$(CONTAINERD_VERSION) runc=$(RUNC_VERSION) cni-plugins=$(CNI_VERSION) pause=$(PAUSE_IMAGE)"
	@echo "coredns=$(COREDNS_VERSION) busybox=$(BUSYBOX_VERSION) images=$(subst $() ,$(comma),$(strip $(CLUSTER_IMAGE_REFS) $(DEMO_IMAGE_REF)))"

# Each recipe builds into <dir>.tmp and renames it into place, so a half-built
# directory never looks complete. The nested tools modules under components/
# are separate Go modules: k8s.io/kubernetes and etcd replace their sibling
# modules with local paths, so `go install mod@v` cannot build them.
# go.mod only, not go.sum: go.sum follows go.mod (a requirement changes only
# through go.mod), but it also grows when a new package of the same modules
# is imported, as kube-proxy's netlink and ipvs were, and that must not
# rebuild the cached kubelet and control plane.
$(KUBE_DIR)/.built: components/kube/go.mod
	@grep -q '^require k8s.io/kubernetes $(KUBE_VERSION)$$' components/kube/go.mod || \
	  { echo "kube: components/kube/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION); update it (and every staging replace) with KUBE_VERSION"; exit 1; }
	@echo "kube: building $(KUBE_BINS) $(KUBE_VERSION) (about 8 min cold)"
	@rm -rf $(KUBE_DIR).tmp && mkdir -p $(KUBE_DIR).tmp
	cd components/kube && CGO_ENABLED=0 $(NICE) $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' \
	  -o $(KUBE_DIR).tmp/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_BINS))
	@$(KUBE_DIR).tmp/kubelet --version | grep -qx 'Kubernetes $(KUBE_VERSION)' || { echo "kube: kubelet --version is not $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(KUBE_DIR) && mv $(KUBE_DIR).tmp $(KUBE_DIR) && touch $@

$(ETCD_DIR)/.built: components/etcd/go.mod components/etcd/go.sum
	@grep -q '^require go.etcd.io/etcd/server/v3 $(ETCD_VERSION)$$' components/etcd/go.mod || \
	  { echo "etcd: components/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $(ETCD_VERSION)"; exit 1; }
	@rm -rf $(ETCD_DIR).tmp && mkdir -p $(ETCD_DIR).tmp
	cd components/etcd && CGO_ENABLED=0 $(NICE) $(GO) build -trimpath -ldflags '-s -w' \
	  -o $(ETCD_DIR).tmp/etcd go.etcd.io/etcd/server/v3
	@rm -rf $(ETCD_DIR) && mv $(ETCD_DIR).tmp $(ETCD_DIR) && touch $@

# kube-proxy comes from the same tools module as kubelet but builds into its
# own directory: adding it to KUBE_BINS would not rebuild the cached kube
# directory, and rebuilding that for one more binary costs minutes.
$(KUBE_PROXY_DIR)/.built: components/kube/go.mod components/kube/go.sum components/kube/tools.go
	@grep -q '^require k8s.io/kubernetes $(KUBE_VERSION)$$' components/kube/go.mod || \
	  { echo "kube-proxy: components/kube/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(KUBE_PROXY_DIR).tmp && mkdir -p $(KUBE_PROXY_DIR).tmp
	cd components/kube && CGO_ENABLED=0 $(NICE) $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' \
	  -o $(KUBE_PROXY_DIR).tmp/kube-proxy k8s.io/kubernetes/cmd/kube-proxy
	@$(KUBE_PROXY_DIR).tmp/kube-proxy --version | grep -qx 'Kubernetes $(KUBE_VERSION)' || { echo "kube-proxy: --version is not $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(KUBE_PROXY_DIR) && mv $(KUBE_PROXY_DIR).tmp $(KUBE_PROXY_DIR) && touch $@

# CoreDNS from its own tools module, with only the plugins EKS's Corefile
# uses compiled in (components/coredns/main.go says why).
$(COREDNS_DIR)/.built: components/coredns/go.mod components/coredns/go.sum components/coredns/main.go
	@grep -q '^require github.com/coredns/coredns $(COREDNS_VERSION)$$' components/coredns/go.mod || \
	  { echo "coredns: components/coredns/go.mod does not require github.com/coredns/coredns $(COREDNS_VERSION)"; exit 1; }
	@rm -rf $(COREDNS_DIR).tmp && mkdir -p $(COREDNS_DIR).tmp
	cd components/coredns && CGO_ENABLED=0 $(NICE) $(GO) build -trimpath \
	  -ldflags '-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(COREDNS_VERSION)' \
	  -o $(COREDNS_DIR).tmp/coredns .
	@$(COREDNS_DIR).tmp/coredns -version | grep -q 'CoreDNS-$(patsubst v%,%,$(COREDNS_VERSION))' || { echo "coredns: -version is not $(COREDNS_VERSION)"; exit 1; }
	@rm -rf $(COREDNS_DIR) && mv $(COREDNS_DIR).tmp $(COREDNS_DIR) && touch $@

# `go install mod@version` builds outside any module; the Makefile's
# GOFLAGS=-mod=mod does not apply there, so it is cleared.
$(CONTAINERD_DIR)/.built:
	@rm -rf $(CONTAINERD_DIR).tmp && mkdir -p $(CONTAINERD_DIR).tmp
	GOFLAGS= GOBIN=$(CONTAINERD_DIR).tmp CGO_ENABLED=0 $(NICE) $(GO) install -trimpath \
	  -ldflags '-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)' \
	  $(addprefix github.com/containerd/containerd/v2/cmd/,$(addsuffix @$(CONTAINERD_VERSION),containerd containerd-shim-runc-v2 ctr))
	@rm -rf $(CONTAINERD_DIR) && mv $(CONTAINERD_DIR).tmp $(CONTAINERD_DIR) && touch $@

# runc needs cgo (nsenter) and seccomp (containerd 2.x hands every sandbox a
# seccomp profile); it is linked statically against Debian's libseccomp.a so
# the node image needs no libc.
$(RUNC_DIR)/.built:
	@test -f /usr/lib/x86_64-linux-gnu/libseccomp.a || { echo "runc: libseccomp.a missing: run make deps (libseccomp-dev)"; exit 1; }
	@rm -rf $(RUNC_DIR).tmp && mkdir -p $(RUNC_DIR).tmp
	GOFLAGS= GOBIN=$(RUNC_DIR).tmp CGO_ENABLED=1 $(NICE) $(GO) install -trimpath -tags 'seccomp netgo osusergo' \
	  -ldflags '-s -w -extldflags=-static -X main.version=$(patsubst v%,%,$(RUNC_VERSION))' \
	  github.com/opencontainers/runc@$(RUNC_VERSION)
	@if readelf -l $(RUNC_DIR).tmp/runc | grep -q INTERP; then echo "runc: not statically linked"; exit 1; fi
	@$(RUNC_DIR).tmp/runc --version | grep -q 'seccomp' || { echo "runc: built without seccomp"; exit 1; }
	@rm -rf $(RUNC_DIR) && mv $(RUNC_DIR).tmp $(RUNC_DIR) && touch $@

CNI_PKGS := main/bridge main/loopback ipam/host-local meta/portmap
$(CNI_DIR)/.built:
	@rm -rf $(CNI_DIR).tmp && mkdir -p $(CNI_DIR).tmp
	GOFLAGS= GOBIN=$(CNI_DIR).tmp CGO_ENABLED=0 $(NICE) $(GO) install -trimpath \
	  -ldflags '-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(CNI_VERSION)' \
	  $(addprefix github.com/containernetworking/plugins/plugins/,$(addsuffix @$(CNI_VERSION),$(CNI_PKGS)))
	@rm -rf $(CNI_DIR) && mv $(CNI_DIR).tmp $(CNI_DIR) && touch $@

# The pause and demo images: tiny static programs from this repository packed
# as OCI image-layout tarballs, imported by berth with no registry.
$(OCI_IMAGES_DIR)/pause.tar: $(wildcard components/pause/*.go image/oci/*.go image/oci/cmd/mkoci/*.go)
	@mkdir -p $(OCI_IMAGES_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(OCI_IMAGES_DIR)/pause ./components/pause
	$(GO) run ./image/oci/cmd/mkoci -name $(PAUSE_IMAGE) -title pause -version $(lastword $(subst :, ,$(PAUSE_IMAGE))) -entrypoint /pause -file pause=$(OCI_IMAGES_DIR)/pause -out $@

$(OCI_IMAGES_DIR)/demo.tar: $(wildcard components/demo/*.go image/oci/*.go image/oci/cmd/mkoci/*.go)
	@mkdir -p $(OCI_IMAGES_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(OCI_IMAGES_DIR)/demo ./components/demo
	$(GO) run ./image/oci/cmd/mkoci -name $(DEMO_IMAGE) -title berth-demo -version $(lastword $(subst :, ,$(DEMO_IMAGE))) -entrypoint /demo -file demo=$(OCI_IMAGES_DIR)/demo -out $@

# The cluster's images (install-cni, kube-proxy, coredns, busybox), each
# from its spec in image/oci/images/ by mkoci, which resolves the shared
# libraries of dynamically linked programs (iptables) and refuses an ELF file
# of another machine. A tarball is rebuilt when its spec, its programs or the
# builder change; the host programs it copies (iptables, busybox) are
# prerequisites too, so a package upgrade rebuilds it.
comma := ,
CLUSTER_IMAGES := $(addprefix $(OCI_IMAGES_DIR)/,install-cni.tar kube-proxy.tar coredns.tar busybox.tar)
MKOCI_SRCS := $(filter-out %_test.go,$(wildcard image/oci/*.go image/oci/imagespec/*.go image/oci/cmd/mkoci/*.go \
  image/assemble/*.go image/elfdeps/*.go image/spec/*.go image/fstree/*.go))
MKOCI_VARS = -var CNI_VERSION=$(CNI_VERSION) -var CNI_DIR=$(CNI_DIR) -var KUBE_VERSION=$(KUBE_VERSION) \
  -var KUBE_PROXY_DIR=$(KUBE_PROXY_DIR) -var COREDNS_VERSION=$(COREDNS_VERSION) -var COREDNS_DIR=$(COREDNS_DIR) \
  -var BUSYBOX_VERSION=$(BUSYBOX_VERSION)
MKOCI_SPEC = @mkdir -p $(OCI_IMAGES_DIR) && $(GO) run ./image/oci/cmd/mkoci -spec image/oci/images/$(1).yaml $(MKOCI_VARS) -out $@

cluster-images: $(CLUSTER_IMAGES)

$(OCI_IMAGES_DIR)/install-cni.tar: image/oci/images/install-cni.yaml $(CNI_DIR)/.built $(MKOCI_SRCS) \
  $(filter-out %_test.go,$(wildcard components/installcni/*.go fsutil/*.go))
	$(call MKOCI_SPEC,install-cni)

$(OCI_IMAGES_DIR)/kube-proxy.tar: image/oci/images/kube-proxy.yaml $(KUBE_PROXY_DIR)/.built $(MKOCI_SRCS) \
  $(wildcard /usr/sbin/xtables-nft-multi)
	$(call MKOCI_SPEC,kube-proxy)

$(OCI_IMAGES_DIR)/coredns.tar: image/oci/images/coredns.yaml $(COREDNS_DIR)/.built $(MKOCI_SRCS)
	$(call MKOCI_SPEC,coredns)

$(OCI_IMAGES_DIR)/busybox.tar: image/oci/images/busybox.yaml $(MKOCI_SRCS) $(wildcard /bin/busybox)
	@test -n "$(BUSYBOX_VERSION)" || { echo "busybox: busybox-static is not installed: run make deps"; exit 1; }
	$(call MKOCI_SPEC,busybox)

.PHONY: test-components-images
## test-components-images: opens each cluster image tarball and checks its entrypoint, links and ELF machine;
## a prerequisite of test-qemu, whose cluster test pulls them.
test-components-images: cluster-images
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) BERTH_CLUSTER_IMAGES='$(strip $(CLUSTER_IMAGE_REFS))' \
	  $(GO) test -tags components -count=1 -v -run . ./image/oci/imagespec/

.PHONY: test-components
## test-components: the control-plane test against the real binaries (not in test-unit: it needs `make components`).
test-components: kube etcd
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) $(GO) test -tags components -count=1 -v -run . ./qemu-tests/controlplane/

.PHONY: test-components-node
## test-components-node: the real containerd on the config.toml berth renders (`config dump`);
## a prerequisite of test-qemu, whose image already needs containerd built.
test-components-node: containerd
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) $(GO) test -tags components -count=1 -v -run . ./runtime/containerd/

# The node image's components at version-independent paths, for
# image/spec.yaml, and their versions for the image manifest.
NODE_COMPONENTS_DIR := $(COMPONENTS_DIR)/node
MKIMAGE_COMPONENTS := -component kubelet=$(KUBE_VERSION) -component containerd=$(CONTAINERD_VERSION) \
  -component runc=$(RUNC_VERSION) -component cni-plugins=$(CNI_VERSION)

.PHONY: node-components
## node-components: links the pinned node components into build/components/node/.
node-components: kube containerd runc cni pause-images
	@mkdir -p $(NODE_COMPONENTS_DIR)/cni $(NODE_COMPONENTS_DIR)/images
	@ln -sfn $(KUBE_DIR)/kubelet $(NODE_COMPONENTS_DIR)/kubelet
	@for b in containerd containerd-shim-runc-v2 ctr; do ln -sfn $(CONTAINERD_DIR)/$$b $(NODE_COMPONENTS_DIR)/$$b; done
	@ln -sfn $(RUNC_DIR)/runc $(NODE_COMPONENTS_DIR)/runc
	@for b in bridge host-local loopback portmap; do ln -sfn $(CNI_DIR)/$$b $(NODE_COMPONENTS_DIR)/cni/$$b; done
	@for i in pause demo; do ln -sfn $(OCI_IMAGES_DIR)/$$i.tar $(NODE_COMPONENTS_DIR)/images/$$i.tar; done
