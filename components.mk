# components.mk: the real node and control-plane components, built from
# source and cached under build/components/<name>-<version>/ (a directory is
# complete only when its .built stamp exists, so an interrupted build is
# redone, and a version bump builds into a new directory).
# Included from the Makefile, which defines BUILD and GO.
#
#   make components        everything below
#   make kube etcd containerd runc cni pause-images   one at a time
#
# With ARCH=arm64 (the Makefile's ARCH) what runs on a node (kubelet,
# containerd, runc, CNI, kube-proxy, CoreDNS, the pause, demo and cluster
# images) is cross-built under build/arm64/components/ instead: the
# directory keys a build on arch as its name keys it on version. The control
# plane and etcd run on the host and stay amd64 under build/components/
# whatever ARCH is.
#
# Cold build times on 2 shared cores are in components/README.md.

KUBE_VERSION       := v1.35.4
ETCD_VERSION       := v3.5.21
CONTAINERD_VERSION := v2.2.3
RUNC_VERSION       := v1.3.6
CNI_VERSION        := v1.7.1
COREDNS_VERSION    := v1.15.0
# flannel, the cluster CNI across nodes (TestCluster): flanneld and
# install-conf from components/flannel, and the flannel CNI plugin, whose
# source components/flannel-cni holds at FLANNEL_CNI_VERSION (its doc.go
# says why it is copied and not required).
FLANNEL_VERSION    := v0.28.10
FLANNEL_CNI_VERSION := v1.9.1-flannel1
FLANNEL_CNI_COMMIT  := 4c87e5d413198ceede07f8ef6f828357ebbd00c0
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
# For a foreign ARCH the busybox is the sysroot's (make sysroot), and its
# version is that package's, from the sysroot's package list.
ifeq ($(ARCH),amd64)
BUSYBOX_VERSION     = $(shell dpkg-query -W -f='$${Version}' busybox-static 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/-/g')
else
BUSYBOX_VERSION     = $(shell sed -n 's/^busybox-static:$(ARCH)=//p' $(SYSROOT)/.packages 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/-/g')
endif
CLUSTER_IMAGE_REFS  = $(CLUSTER_REGISTRY)/install-cni:$(CNI_VERSION) $(CLUSTER_REGISTRY)/kube-proxy:$(KUBE_VERSION) \
  $(CLUSTER_REGISTRY)/coredns:$(COREDNS_VERSION) $(CLUSTER_REGISTRY)/busybox:$(BUSYBOX_VERSION) \
  $(CLUSTER_REGISTRY)/flannel:$(FLANNEL_VERSION) $(CLUSTER_REGISTRY)/flannel-cni-plugin:$(FLANNEL_CNI_VERSION)
# demo.tar (above) is served under this name; the name inside the tarball is
# only a default.
DEMO_IMAGE_REF     := $(CLUSTER_REGISTRY)/demo:v1

# COMPONENTS_DIR holds the host's (amd64) builds; ARCH_COMPONENTS_DIR the
# node's, which is the same directory when ARCH is amd64.
COMPONENTS_DIR  := $(BUILD)/components
ARCH_COMPONENTS_DIR := $(ARCH_BUILD)/components
KUBE_DIR        := $(COMPONENTS_DIR)/kube-$(KUBE_VERSION)
ETCD_DIR        := $(COMPONENTS_DIR)/etcd-$(ETCD_VERSION)
CONTAINERD_DIR  := $(ARCH_COMPONENTS_DIR)/containerd-$(CONTAINERD_VERSION)
RUNC_DIR        := $(ARCH_COMPONENTS_DIR)/runc-$(RUNC_VERSION)
CNI_DIR         := $(ARCH_COMPONENTS_DIR)/cni-plugins-$(CNI_VERSION)
OCI_IMAGES_DIR  := $(ARCH_COMPONENTS_DIR)/images
KUBE_PROXY_DIR  := $(ARCH_COMPONENTS_DIR)/kube-proxy-$(KUBE_VERSION)
COREDNS_DIR     := $(ARCH_COMPONENTS_DIR)/coredns-$(COREDNS_VERSION)
FLANNEL_DIR     := $(ARCH_COMPONENTS_DIR)/flannel-$(FLANNEL_VERSION)
FLANNEL_CNI_DIR := $(ARCH_COMPONENTS_DIR)/flannel-cni-$(FLANNEL_CNI_VERSION)
# amd64's kubelet is one of the kube recipe's five binaries; arm64's is built
# alone into its own directory (the control plane stays on the host).
ifeq ($(ARCH),amd64)
KUBELET_DIR     := $(KUBE_DIR)
else
KUBELET_DIR     := $(ARCH_COMPONENTS_DIR)/kubelet-$(KUBE_VERSION)
endif

# What a cross build needs. An arm64 program cannot run on the host, so the
# recipes check what they built through its ELF header (readelf -h names the
# machine) and its Go build info (`go version -m`: GOARCH, the modules)
# instead of running --version; under -trimpath the build info records no
# -ldflags, so kubelet's version is checked as its module's. `go install`
# refuses to put a cross-compiled binary in GOBIN, so the cross recipes give
# it a scratch GOPATH (with the shared module cache) and take the binaries
# from its bin/linux_$(ARCH)/.
# LIBSECCOMP_A is the static libseccomp runc links, from Debian's
# libseccomp-dev for ARCH.
ifeq ($(ARCH),amd64)
GNU_TRIPLET     := x86_64-linux-gnu
# $(call GO_INSTALL_TO,DIR): the environment that makes go install write to DIR.
GO_INSTALL_TO    = GOBIN=$(1)
else
GNU_TRIPLET     := aarch64-linux-gnu
ELF_MACHINE     := AArch64
CROSS_GOENV      = GOOS=linux GOARCH=$(ARCH)
# $(call GO_INSTALL_TO,DIR) then $(call CROSS_COLLECT,DIR): go install into DIR.
GO_INSTALL_TO    = GOMODCACHE=$$($(GO) env GOMODCACHE) GOPATH=$(1)/.gopath $(CROSS_GOENV)
CROSS_COLLECT   = mv $(1)/.gopath/bin/linux_$(ARCH)/* $(1)/ && chmod -R u+w $(1)/.gopath && rm -rf $(1)/.gopath
# $(call CHECK_CROSS,NAME,FILE...): each FILE is an ELF for ARCH built with GOARCH=ARCH.
CHECK_CROSS     = for f in $(2); do \
	  readelf -h $$f | grep 'Machine: *$(ELF_MACHINE)$$' >/dev/null || { echo "$(1): $$f is not an ELF for $(ARCH)"; exit 1; }; \
	  $(GO) version -m $$f | grep 'GOARCH=$(ARCH)$$' >/dev/null || { echo "$(1): $$f was not built with GOARCH=$(ARCH)"; exit 1; }; done
endif
LIBSECCOMP_A    := /usr/lib/$(GNU_TRIPLET)/libseccomp.a

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

.PHONY: components kube kubelet etcd containerd runc cni pause-images components-versions kube-proxy coredns flannel cluster-images

ifeq ($(ARCH),amd64)
## components: kubelet, control plane, etcd, containerd, runc, CNI plugins, pause/demo images, the cluster's images.
## ARCH=arm64: kubelet, containerd, runc, CNI plugins, kube-proxy, CoreDNS, pause/demo and cluster images for arm64 only.
components: kube etcd containerd runc cni pause-images cluster-images
else
components: kubelet containerd runc cni pause-images cluster-images
endif

kube:         $(KUBE_DIR)/.built
kubelet:      $(KUBELET_DIR)/.built
etcd:         $(ETCD_DIR)/.built
containerd:   $(CONTAINERD_DIR)/.built
runc:         $(RUNC_DIR)/.built
cni:          $(CNI_DIR)/.built
pause-images: $(OCI_IMAGES_DIR)/pause.tar $(OCI_IMAGES_DIR)/demo.tar
kube-proxy:   $(KUBE_PROXY_DIR)/.built
coredns:      $(COREDNS_DIR)/.built
flannel:      $(FLANNEL_DIR)/.built $(FLANNEL_CNI_DIR)/.built

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
	@$(KUBE_DIR).tmp/kubelet --version | grep -x 'Kubernetes $(KUBE_VERSION)' >/dev/null || { echo "kube: kubelet --version is not $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(KUBE_DIR) && mv $(KUBE_DIR).tmp $(KUBE_DIR) && touch $@

ifneq ($(ARCH),amd64)
# kubelet alone for a foreign ARCH: the kube recipe's output and stamp are the
# host's control plane and are left alone.
$(KUBELET_DIR)/.built: components/kube/go.mod
	@grep -q '^require k8s.io/kubernetes $(KUBE_VERSION)$$' components/kube/go.mod || \
	  { echo "kubelet: components/kube/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION)"; exit 1; }
	@echo "kubelet: cross-building kubelet $(KUBE_VERSION) for $(ARCH)"
	@rm -rf $(KUBELET_DIR).tmp && mkdir -p $(KUBELET_DIR).tmp
	cd components/kube && CGO_ENABLED=0 $(CROSS_GOENV) $(NICE) $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' \
	  -o $(KUBELET_DIR).tmp/kubelet k8s.io/kubernetes/cmd/kubelet
	@$(call CHECK_CROSS,kubelet,$(KUBELET_DIR).tmp/kubelet)
	@$(GO) version -m $(KUBELET_DIR).tmp/kubelet | grep -P '^\tmod\tk8s.io/kubernetes\t$(KUBE_VERSION)\t' >/dev/null || \
	  { echo "kubelet: not built from k8s.io/kubernetes $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(KUBELET_DIR) && mv $(KUBELET_DIR).tmp $(KUBELET_DIR) && touch $@
endif

$(ETCD_DIR)/.built: components/etcd/go.mod components/etcd/go.sum
	@grep -q '^require go.etcd.io/etcd/server/v3 $(ETCD_VERSION)$$' components/etcd/go.mod || \
	  { echo "etcd: components/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $(ETCD_VERSION)"; exit 1; }
	@rm -rf $(ETCD_DIR).tmp && mkdir -p $(ETCD_DIR).tmp
	cd components/etcd && CGO_ENABLED=0 $(NICE) $(GO) build -trimpath -ldflags '-s -w' \
	  -o $(ETCD_DIR).tmp/etcd go.etcd.io/etcd/server/v3
	@rm -rf $(ETCD_DIR) && mv $(ETCD_DIR).tmp $(ETCD_DIR) && touch $@

# kube-proxy comes from the same tools module as kubelet but builds into its
# own directory: adding it to KUBE_BINS would not rebuild the cached kube
# directory, and rebuilding that for one more binary costs minutes. For a
# foreign ARCH it is cross-built like kubelet and checked the same way.
# Under make -j (test-build), kube-proxy and CoreDNS wait for kubelet's
# build (order only): kube-proxy shares almost every package with it and
# CoreDNS client-go and apimachinery, and two go builds compiling one
# package at once each do the whole work (the cache keeps only what is done).
$(KUBE_PROXY_DIR)/.built: components/kube/go.mod components/kube/go.sum components/kube/tools.go | $(KUBELET_DIR)/.built
	@grep -q '^require k8s.io/kubernetes $(KUBE_VERSION)$$' components/kube/go.mod || \
	  { echo "kube-proxy: components/kube/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(KUBE_PROXY_DIR).tmp && mkdir -p $(KUBE_PROXY_DIR).tmp
	cd components/kube && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' \
	  -o $(KUBE_PROXY_DIR).tmp/kube-proxy k8s.io/kubernetes/cmd/kube-proxy
ifeq ($(ARCH),amd64)
	@$(KUBE_PROXY_DIR).tmp/kube-proxy --version | grep -x 'Kubernetes $(KUBE_VERSION)' >/dev/null || { echo "kube-proxy: --version is not $(KUBE_VERSION)"; exit 1; }
else
	@$(call CHECK_CROSS,kube-proxy,$(KUBE_PROXY_DIR).tmp/kube-proxy)
	@$(GO) version -m $(KUBE_PROXY_DIR).tmp/kube-proxy | grep -P '^\tmod\tk8s.io/kubernetes\t$(KUBE_VERSION)\t' >/dev/null || \
	  { echo "kube-proxy: not built from k8s.io/kubernetes $(KUBE_VERSION)"; exit 1; }
endif
	@rm -rf $(KUBE_PROXY_DIR) && mv $(KUBE_PROXY_DIR).tmp $(KUBE_PROXY_DIR) && touch $@

# CoreDNS from its own tools module, with only the plugins EKS's Corefile
# uses compiled in (components/coredns/main.go says why).
$(COREDNS_DIR)/.built: components/coredns/go.mod components/coredns/go.sum components/coredns/main.go | $(KUBELET_DIR)/.built
	@grep -q '^require github.com/coredns/coredns $(COREDNS_VERSION)$$' components/coredns/go.mod || \
	  { echo "coredns: components/coredns/go.mod does not require github.com/coredns/coredns $(COREDNS_VERSION)"; exit 1; }
	@rm -rf $(COREDNS_DIR).tmp && mkdir -p $(COREDNS_DIR).tmp
	cd components/coredns && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath \
	  -ldflags '-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(COREDNS_VERSION)' \
	  -o $(COREDNS_DIR).tmp/coredns .
ifeq ($(ARCH),amd64)
	@$(COREDNS_DIR).tmp/coredns -version | grep 'CoreDNS-$(patsubst v%,%,$(COREDNS_VERSION))' >/dev/null || { echo "coredns: -version is not $(COREDNS_VERSION)"; exit 1; }
else
	@$(call CHECK_CROSS,coredns,$(COREDNS_DIR).tmp/coredns)
	@$(GO) version -m $(COREDNS_DIR).tmp/coredns | grep -P '^\tdep\tgithub.com/coredns/coredns\t$(COREDNS_VERSION)\t' >/dev/null || \
	  { echo "coredns: not built from github.com/coredns/coredns $(COREDNS_VERSION)"; exit 1; }
endif
	@rm -rf $(COREDNS_DIR) && mv $(COREDNS_DIR).tmp $(COREDNS_DIR) && touch $@

# flanneld (vxlan back end only: components/flannel/main.go says why) and
# flannel's install-conf, from their tools module, as flannel's image has
# them; after kubelet's build (order only), as CoreDNS, since they share
# client-go and apimachinery's packages' work for the CPU.
$(FLANNEL_DIR)/.built: components/flannel/go.mod components/flannel/go.sum components/flannel/main.go internal/safe/safe.go | $(KUBELET_DIR)/.built
	@grep -Eq '^(require )?[[:space:]]*github.com/flannel-io/flannel $(FLANNEL_VERSION)$$' components/flannel/go.mod || \
	  { echo "flannel: components/flannel/go.mod does not require github.com/flannel-io/flannel $(FLANNEL_VERSION)"; exit 1; }
	@rm -rf $(FLANNEL_DIR).tmp && mkdir -p $(FLANNEL_DIR).tmp
	cd components/flannel && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath \
	  -ldflags '-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$(FLANNEL_VERSION)' \
	  -o $(FLANNEL_DIR).tmp/flanneld . && \
	  CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' \
	  -o $(FLANNEL_DIR).tmp/install-conf github.com/flannel-io/flannel/cmd/install_conf
ifeq ($(ARCH),amd64)
	@$(FLANNEL_DIR).tmp/flanneld --version 2>&1 | grep -x '$(FLANNEL_VERSION)' >/dev/null || { echo "flannel: flanneld --version is not $(FLANNEL_VERSION)"; exit 1; }
else
	@$(call CHECK_CROSS,flannel,$(FLANNEL_DIR).tmp/flanneld $(FLANNEL_DIR).tmp/install-conf)
endif
	@$(GO) version -m $(FLANNEL_DIR).tmp/flanneld | grep -P '^\tdep\tgithub.com/flannel-io/flannel\t$(FLANNEL_VERSION)\t' >/dev/null || \
	  { echo "flannel: flanneld is not built from github.com/flannel-io/flannel $(FLANNEL_VERSION)"; exit 1; }
	@rm -rf $(FLANNEL_DIR) && mv $(FLANNEL_DIR).tmp $(FLANNEL_DIR) && touch $@

# The flannel CNI plugin that flannel's manifest copies into /opt/cni/bin.
$(FLANNEL_CNI_DIR)/.built: components/flannel-cni/go.mod components/flannel-cni/go.sum $(wildcard components/flannel-cni/*.go)
	@grep -q 'at tag $(FLANNEL_CNI_VERSION) (commit $(FLANNEL_CNI_COMMIT);' components/flannel-cni/doc.go || \
	  { echo "flannel-cni: components/flannel-cni/doc.go does not record tag $(FLANNEL_CNI_VERSION) at $(FLANNEL_CNI_COMMIT): copy that tag's flannel.go and flannel_linux.go and say so there"; exit 1; }
	@rm -rf $(FLANNEL_CNI_DIR).tmp && mkdir -p $(FLANNEL_CNI_DIR).tmp
	cd components/flannel-cni && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath \
	  -ldflags '-s -w -X main.Program=flannel -X main.Version=$(FLANNEL_CNI_VERSION) -X main.Commit=$(FLANNEL_CNI_COMMIT)' \
	  -o $(FLANNEL_CNI_DIR).tmp/flannel .
ifeq ($(ARCH),amd64)
	@CNI_COMMAND=VERSION $(FLANNEL_CNI_DIR).tmp/flannel </dev/null | grep '"1.0.0"' >/dev/null || { echo "flannel-cni: the plugin does not speak CNI 1.0.0 (CNI_COMMAND=VERSION)"; exit 1; }
else
	@$(call CHECK_CROSS,flannel-cni,$(FLANNEL_CNI_DIR).tmp/flannel)
endif
	@rm -rf $(FLANNEL_CNI_DIR) && mv $(FLANNEL_CNI_DIR).tmp $(FLANNEL_CNI_DIR) && touch $@

# `go install mod@version` builds outside any module; the Makefile's
# GOFLAGS=-mod=mod does not apply there, so it is cleared.
CONTAINERD_BINS := containerd containerd-shim-runc-v2 ctr
CONTAINERD_LDFLAGS := -s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)
$(CONTAINERD_DIR)/.built:
	@rm -rf $(CONTAINERD_DIR).tmp && mkdir -p $(CONTAINERD_DIR).tmp
	GOFLAGS= $(call GO_INSTALL_TO,$(CONTAINERD_DIR).tmp) CGO_ENABLED=0 $(NICE) $(GO) install -trimpath \
	  -ldflags '$(CONTAINERD_LDFLAGS)' \
	  $(addprefix github.com/containerd/containerd/v2/cmd/,$(addsuffix @$(CONTAINERD_VERSION),$(CONTAINERD_BINS)))
ifneq ($(ARCH),amd64)
	@$(call CROSS_COLLECT,$(CONTAINERD_DIR).tmp)
	@$(call CHECK_CROSS,containerd,$(addprefix $(CONTAINERD_DIR).tmp/,$(CONTAINERD_BINS)))
endif
	@rm -rf $(CONTAINERD_DIR) && mv $(CONTAINERD_DIR).tmp $(CONTAINERD_DIR) && touch $@

# runc needs cgo (nsenter) and seccomp (containerd 2.x hands every sandbox a
# seccomp profile); it is linked statically against Debian's libseccomp.a so
# the node image needs no libc. For arm64 cgo compiles and links with
# Debian's cross gcc, and pkg-config looks only at the arm64 libraries' .pc
# files, so the amd64 libseccomp cannot be picked up.
RUNC_LDFLAGS := -s -w -extldflags=-static -X main.version=$(patsubst v%,%,$(RUNC_VERSION))
$(RUNC_DIR)/.built:
	@test -f $(LIBSECCOMP_A) || { echo "runc: libseccomp.a missing: run make deps$(if $(filter-out amd64,$(ARCH)), ARCH=$(ARCH)) (libseccomp-dev)"; exit 1; }
	@rm -rf $(RUNC_DIR).tmp && mkdir -p $(RUNC_DIR).tmp
ifeq ($(ARCH),amd64)
	GOFLAGS= $(call GO_INSTALL_TO,$(RUNC_DIR).tmp) CGO_ENABLED=1 $(NICE) $(GO) install -trimpath -tags 'seccomp netgo osusergo' \
	  -ldflags '$(RUNC_LDFLAGS)' \
	  github.com/opencontainers/runc@$(RUNC_VERSION)
else
	@command -v $(GNU_TRIPLET)-gcc >/dev/null || { echo "runc: $(GNU_TRIPLET)-gcc missing: run make deps ARCH=$(ARCH)"; exit 1; }
	GOFLAGS= $(call GO_INSTALL_TO,$(RUNC_DIR).tmp) CGO_ENABLED=1 CC=$(GNU_TRIPLET)-gcc \
	  PKG_CONFIG_LIBDIR=/usr/lib/$(GNU_TRIPLET)/pkgconfig $(NICE) $(GO) install -trimpath -tags 'seccomp netgo osusergo' \
	  -ldflags '$(RUNC_LDFLAGS)' \
	  github.com/opencontainers/runc@$(RUNC_VERSION)
	@$(call CROSS_COLLECT,$(RUNC_DIR).tmp)
	@$(call CHECK_CROSS,runc,$(RUNC_DIR).tmp/runc)
endif
	@if readelf -l $(RUNC_DIR).tmp/runc | grep INTERP >/dev/null; then echo "runc: not statically linked"; exit 1; fi
ifeq ($(ARCH),amd64)
	@$(RUNC_DIR).tmp/runc --version | grep 'seccomp' >/dev/null || { echo "runc: built without seccomp"; exit 1; }
else
	@$(GO) version -m $(RUNC_DIR).tmp/runc | grep 'github.com/seccomp/libseccomp-golang' >/dev/null || { echo "runc: built without seccomp"; exit 1; }
endif
	@rm -rf $(RUNC_DIR) && mv $(RUNC_DIR).tmp $(RUNC_DIR) && touch $@

CNI_PKGS := main/bridge main/loopback ipam/host-local meta/portmap
CNI_LDFLAGS := -s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(CNI_VERSION)
$(CNI_DIR)/.built:
	@rm -rf $(CNI_DIR).tmp && mkdir -p $(CNI_DIR).tmp
	GOFLAGS= $(call GO_INSTALL_TO,$(CNI_DIR).tmp) CGO_ENABLED=0 $(NICE) $(GO) install -trimpath \
	  -ldflags '$(CNI_LDFLAGS)' \
	  $(addprefix github.com/containernetworking/plugins/plugins/,$(addsuffix @$(CNI_VERSION),$(CNI_PKGS)))
ifneq ($(ARCH),amd64)
	@$(call CROSS_COLLECT,$(CNI_DIR).tmp)
	@$(call CHECK_CROSS,cni,$(addprefix $(CNI_DIR).tmp/,$(notdir $(CNI_PKGS))))
endif
	@rm -rf $(CNI_DIR) && mv $(CNI_DIR).tmp $(CNI_DIR) && touch $@

# The pause and demo images: tiny static programs from this repository packed
# as OCI image-layout tarballs, imported by berth with no registry. For a
# foreign ARCH the programs are cross-built and mkoci records the arch in the
# image config and refuses an ELF file of another machine; for amd64 both
# words are empty, so amd64's recipes read as they did before ARCH.
ifeq ($(ARCH),amd64)
GO_CROSS   :=
MKOCI_ARCH :=
else
GO_CROSS   := $(CROSS_GOENV)$() $()
MKOCI_ARCH := $() -arch $(ARCH)
endif
$(OCI_IMAGES_DIR)/pause.tar: $(wildcard components/pause/*.go image/oci/*.go image/oci/cmd/mkoci/*.go)
	@mkdir -p $(OCI_IMAGES_DIR)
	CGO_ENABLED=0 $(GO_CROSS)$(GO) build -trimpath -ldflags '-s -w' -o $(OCI_IMAGES_DIR)/pause ./components/pause
	$(GO) run ./image/oci/cmd/mkoci$(MKOCI_ARCH) -name $(PAUSE_IMAGE) -title pause -version $(lastword $(subst :, ,$(PAUSE_IMAGE))) -entrypoint /pause -file pause=$(OCI_IMAGES_DIR)/pause -out $@

$(OCI_IMAGES_DIR)/demo.tar: $(wildcard components/demo/*.go image/oci/*.go image/oci/cmd/mkoci/*.go)
	@mkdir -p $(OCI_IMAGES_DIR)
	CGO_ENABLED=0 $(GO_CROSS)$(GO) build -trimpath -ldflags '-s -w' -o $(OCI_IMAGES_DIR)/demo ./components/demo
	$(GO) run ./image/oci/cmd/mkoci$(MKOCI_ARCH) -name $(DEMO_IMAGE) -title berth-demo -version $(lastword $(subst :, ,$(DEMO_IMAGE))) -entrypoint /demo -file demo=$(OCI_IMAGES_DIR)/demo -out $@

## rollout-image: the rollout controller's OCI image (docs/rollout.md),
## build/components/images/berth-rollout.tar (ARCH=arm64: arm64's): the static
## berth-rollout command alone, named ROLLOUT_IMAGE; push it where the
## cluster pulls from and set controller.yaml's image to it.
ROLLOUT_IMAGE ?= registry.berth.test/berth/berth-rollout:$(VERSION)
.PHONY: rollout-image
rollout-image: $(OCI_IMAGES_DIR)/berth-rollout.tar
$(OCI_IMAGES_DIR)/berth-rollout.tar: $(filter-out %_test.go,$(wildcard rollout/*/*.go rollout/*/*/*.go rollout/deploy/*.yaml)) $(wildcard image/oci/*.go image/oci/cmd/mkoci/*.go)
	@mkdir -p $(OCI_IMAGES_DIR)
	CGO_ENABLED=0 $(GO_CROSS)$(GO) build -trimpath -ldflags '-s -w' -o $(OCI_IMAGES_DIR)/berth-rollout ./rollout/cmd/berth-rollout
	$(GO) run ./image/oci/cmd/mkoci$(MKOCI_ARCH) -name $(ROLLOUT_IMAGE) -title berth-rollout -version $(VERSION) -entrypoint /berth-rollout -file berth-rollout=$(OCI_IMAGES_DIR)/berth-rollout -out $@

# The cluster's images (install-cni, kube-proxy, coredns, busybox, flannel and its CNI plugin), each
# from its spec in image/oci/images/ by mkoci, which resolves the shared
# libraries of dynamically linked programs (iptables) and refuses an ELF file
# of another machine. A tarball is rebuilt when its spec, its programs or the
# builder change; the host programs it copies (iptables, busybox) are
# prerequisites too, so a package upgrade rebuilds it. For a foreign ARCH
# those host programs, their libraries and iptables' extensions are the
# sysroot's (mkoci -sysroot, as mkimage's), whose package list is a
# prerequisite instead; make sysroot is run first, and it unpacks what the
# image specs here copy as well as what the node image's does.
comma := ,
CLUSTER_IMAGES := $(addprefix $(OCI_IMAGES_DIR)/,install-cni.tar kube-proxy.tar coredns.tar busybox.tar flannel.tar flannel-cni-plugin.tar)
MKOCI_SRCS := $(filter-out %_test.go,$(wildcard image/oci/*.go image/oci/imagespec/*.go image/oci/cmd/mkoci/*.go \
  image/assemble/*.go image/elfdeps/*.go image/spec/*.go image/fstree/*.go image/sysroot/*.go))
# MKOCI_DIR_VARS are the specs' variables but busybox's version, which
# make sysroot (listing the specs' host files before busybox's package is
# unpacked) gives a stand-in.
MKOCI_DIR_VARS = -var CNI_VERSION=$(CNI_VERSION) -var CNI_DIR=$(CNI_DIR) -var KUBE_VERSION=$(KUBE_VERSION) \
  -var KUBE_PROXY_DIR=$(KUBE_PROXY_DIR) -var COREDNS_VERSION=$(COREDNS_VERSION) -var COREDNS_DIR=$(COREDNS_DIR) \
  -var FLANNEL_VERSION=$(FLANNEL_VERSION) -var FLANNEL_DIR=$(FLANNEL_DIR) \
  -var FLANNEL_CNI_VERSION=$(FLANNEL_CNI_VERSION) -var FLANNEL_CNI_DIR=$(FLANNEL_CNI_DIR)
MKOCI_VARS = $(MKOCI_DIR_VARS) \
  -var BUSYBOX_VERSION=$(BUSYBOX_VERSION)$(MKOCI_ARCH)$(if $(SYSROOT), -sysroot $(SYSROOT))
MKOCI_SPEC = @mkdir -p $(OCI_IMAGES_DIR) && $(GO) run ./image/oci/cmd/mkoci -spec image/oci/images/$(1).yaml $(MKOCI_VARS) -out $@
# What the images that copy host programs need besides their own inputs.
ifeq ($(SYSROOT),)
MKOCI_HOST_DEPS :=
else
MKOCI_HOST_DEPS := $(wildcard $(SYSROOT)/.packages) | sysroot
endif

## cluster-images: the test cluster's OCI images (install-cni, kube-proxy, CoreDNS, busybox, flannel,
## flannel-cni-plugin) in build/components/images/, from the specs in image/oci/images/.
cluster-images: $(CLUSTER_IMAGES)

$(OCI_IMAGES_DIR)/install-cni.tar: image/oci/images/install-cni.yaml $(CNI_DIR)/.built $(MKOCI_SRCS) \
  $(filter-out %_test.go,$(wildcard components/installcni/*.go internal/fsutil/*.go))
	$(call MKOCI_SPEC,install-cni)

$(OCI_IMAGES_DIR)/kube-proxy.tar: image/oci/images/kube-proxy.yaml $(KUBE_PROXY_DIR)/.built $(MKOCI_SRCS) \
  $(wildcard $(SYSROOT)/usr/sbin/xtables-nft-multi) $(MKOCI_HOST_DEPS)
	$(call MKOCI_SPEC,kube-proxy)

$(OCI_IMAGES_DIR)/coredns.tar: image/oci/images/coredns.yaml $(COREDNS_DIR)/.built $(MKOCI_SRCS)
	$(call MKOCI_SPEC,coredns)

$(OCI_IMAGES_DIR)/flannel.tar: image/oci/images/flannel.yaml $(FLANNEL_DIR)/.built $(MKOCI_SRCS) \
  $(wildcard $(SYSROOT)/usr/sbin/xtables-nft-multi) $(MKOCI_HOST_DEPS)
	$(call MKOCI_SPEC,flannel)

$(OCI_IMAGES_DIR)/flannel-cni-plugin.tar: image/oci/images/flannel-cni-plugin.yaml $(FLANNEL_CNI_DIR)/.built $(MKOCI_SRCS) \
  $(wildcard $(SYSROOT)/bin/busybox) $(MKOCI_HOST_DEPS)
	$(call MKOCI_SPEC,flannel-cni-plugin)

$(OCI_IMAGES_DIR)/busybox.tar: image/oci/images/busybox.yaml $(MKOCI_SRCS) $(wildcard $(SYSROOT)/bin/busybox) $(MKOCI_HOST_DEPS)
	@test -n "$(BUSYBOX_VERSION)" || { echo "busybox: busybox-static is not installed: run make $(if $(SYSROOT),sysroot ARCH=$(ARCH),deps)"; exit 1; }
	$(call MKOCI_SPEC,busybox)

.PHONY: test-components-images
## test-components-images: opens each cluster image tarball, and the pause and demo ones, and checks
## its architecture, entrypoint, links and ELF machines; a prerequisite of test-qemu, whose cluster test pulls them.
test-components-images: cluster-images pause-images
	BERTH_COMPONENTS_DIR=$(ARCH_COMPONENTS_DIR) BERTH_ARCH=$(ARCH) BERTH_CLUSTER_IMAGES='$(strip $(CLUSTER_IMAGE_REFS))' \
	  $(GO) test -tags components -count=1 -v -run . ./image/oci/imagespec/

.PHONY: test-components
## test-components: the control-plane test against the real binaries (not in test-unit: it needs `make components`).
test-components: kube etcd
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) $(GO) test -tags components -count=1 -v -run . ./qemu-tests/controlplane/

.PHONY: test-components-node
## test-components-node: the real containerd on the config.toml berth renders (`config dump`), what
## make accepts generated (and its copy built into berth, config/manifest/builtin), and the oracle test: config/nodeconfig/testdata/oracle's corpus judged by
## berth and by the real kubelet (in a sandbox, against a fake CRI) and containerd (CRI loaded);
## a prerequisite of test-qemu, whose image already needs containerd built.
## It runs the host's containerd, whatever ARCH is.
test-components-node: $(COMPONENTS_DIR)/containerd-$(CONTAINERD_VERSION)/.built $(KUBE_DIR)/.built $(KUBELET_ACCEPTS) $(CONTAINERD_ACCEPTS)
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) $(GO) test -tags components -count=1 -v -run . ./runtime/containerd/ ./config/accepts/ ./config/manifest/builtin/
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) $(GO) test -tags components -count=1 -v -run TestOracle ./config/nodeconfig/
.PHONY: fuzz-oracle
## fuzz-oracle: FuzzOracle for FUZZ_ORACLE_TIME (default 3m): mutations of the oracle corpus that berth
## accepts must start the real kubelet and containerd; a finding goes into testdata/fuzz and, with its
## reason, into the corpus. Not part of make test.
FUZZ_ORACLE_TIME ?= 3m
fuzz-oracle: $(COMPONENTS_DIR)/containerd-$(CONTAINERD_VERSION)/.built $(KUBE_DIR)/.built $(KUBELET_ACCEPTS) $(CONTAINERD_ACCEPTS)
	BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) $(GO) test -tags components -run '^$$' -fuzz '^FuzzOracle$$' -fuzztime $(FUZZ_ORACLE_TIME) ./config/nodeconfig/

ifneq ($(ARCH),amd64)
$(COMPONENTS_DIR)/containerd-$(CONTAINERD_VERSION)/.built:
	$(MAKE) --no-print-directory containerd ARCH=amd64
endif

# The node image's components at version-independent paths, for
# image/spec.yaml, and their versions for the image manifest.
NODE_COMPONENTS_DIR := $(ARCH_COMPONENTS_DIR)/node
# What the node's kubelet and containerd accept in their configuration
# (config/accepts), generated from their Go modules at the pinned versions
# for the image manifest and for validation (berth check --manifest, the
# oracle test). The generators read Go data and never run the components,
# so the host's files serve an arm64 image as well: they live in the
# host's components directory whatever ARCH is.
ACCEPTS_DIR        := $(COMPONENTS_DIR)/accepts
KUBELET_ACCEPTS    := $(ACCEPTS_DIR)/kubelet-$(KUBE_VERSION).json
CONTAINERD_ACCEPTS := $(ACCEPTS_DIR)/containerd-$(CONTAINERD_VERSION).json

.PHONY: accepts
## accepts: what kubelet and containerd accept (flags, feature gates, field types), for the manifest.
accepts: $(KUBELET_ACCEPTS) $(CONTAINERD_ACCEPTS)

# components/kubeaccepts' go.mod is components/kube's (same requirements,
# so kubelet's packages come from the build cache): its version is checked
# as kubelet's is, and the flags are kubelet's (CGO off, -trimpath).
# Under make -j it waits for kubelet's build (order only), whose packages
# it compiles the same way: two builds of one package at once each do the
# whole work.
$(KUBELET_ACCEPTS): components/kubeaccepts/go.mod components/kubeaccepts/go.sum components/kubeaccepts/main.go | $(KUBELET_DIR)/.built
	@grep -qP '^(require |\t)k8s.io/kubernetes $(KUBE_VERSION)$$' components/kubeaccepts/go.mod || \
	  { echo "kubeaccepts: components/kubeaccepts/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION) (components/kube's version)"; exit 1; }
	@mkdir -p $(ACCEPTS_DIR)
	cd components/kubeaccepts && CGO_ENABLED=0 $(NICE) $(GO) run -trimpath . -out $(abspath $@)

$(CONTAINERD_ACCEPTS): components/containerdaccepts/go.mod components/containerdaccepts/go.sum components/containerdaccepts/main.go
	@grep -qP '^\tgithub.com/containerd/containerd/v2 $(CONTAINERD_VERSION)$$' components/containerdaccepts/go.mod || \
	  { echo "containerdaccepts: components/containerdaccepts/go.mod does not require github.com/containerd/containerd/v2 $(CONTAINERD_VERSION)"; exit 1; }
	@mkdir -p $(ACCEPTS_DIR)
	cd components/containerdaccepts && $(NICE) $(GO) run . -out $(abspath $@)

.PHONY: builtin-manifest
## builtin-manifest: copies what make accepts generated into config/manifest/builtin (gzipped), the
## checks berth check and berth render make without --manifest; commit the result. test-components-node
## fails while they differ.
builtin-manifest: $(KUBELET_ACCEPTS) $(CONTAINERD_ACCEPTS)
	gzip -9n < $(KUBELET_ACCEPTS) > config/manifest/builtin/kubelet.json.gz.tmp && mv config/manifest/builtin/kubelet.json.gz.tmp config/manifest/builtin/kubelet.json.gz
	gzip -9n < $(CONTAINERD_ACCEPTS) > config/manifest/builtin/containerd.json.gz.tmp && mv config/manifest/builtin/containerd.json.gz.tmp config/manifest/builtin/containerd.json.gz

MKIMAGE_COMPONENTS := -accepts $(KUBELET_ACCEPTS) -accepts $(CONTAINERD_ACCEPTS) \
  -component kubelet=$(KUBE_VERSION) -component containerd=$(CONTAINERD_VERSION) \
  -component runc=$(RUNC_VERSION) -component cni-plugins=$(CNI_VERSION)

.PHONY: node-components
## node-components: links the pinned node components into build/components/node/
## (ARCH=arm64: the arm64 ones into build/arm64/components/node/), with the
## host's CA bundle (Debian's ca-certificates) the image carries.
node-components: kubelet containerd runc cni pause-images accepts
	@mkdir -p $(NODE_COMPONENTS_DIR)/cni $(NODE_COMPONENTS_DIR)/images
	@ln -sfn $(KUBELET_DIR)/kubelet $(NODE_COMPONENTS_DIR)/kubelet
	@for b in containerd containerd-shim-runc-v2 ctr; do ln -sfn $(CONTAINERD_DIR)/$$b $(NODE_COMPONENTS_DIR)/$$b; done
	@ln -sfn $(RUNC_DIR)/runc $(NODE_COMPONENTS_DIR)/runc
	@for b in bridge host-local loopback portmap; do ln -sfn $(CNI_DIR)/$$b $(NODE_COMPONENTS_DIR)/cni/$$b; done
	@for i in pause demo; do ln -sfn $(OCI_IMAGES_DIR)/$$i.tar $(NODE_COMPONENTS_DIR)/images/$$i.tar; done
	@# Mozilla's CA roots as Debian's ca-certificates bundles them (the same
	@# for every ARCH; generated by the package's postinst, so the arm64
	@# sysroot, unpacked from .debs, has none): the image's system pool.
	@install -m 0644 /etc/ssl/certs/ca-certificates.crt $(NODE_COMPONENTS_DIR)/ca-certificates.crt

# --- e2e: Kubernetes' end-to-end suite (issue 27) ---------------------------
# e2e.test (`go test -c k8s.io/kubernetes/test/e2e`) and the ginkgo CLI that
# runs it in parallel, from components/e2e, a tools module requiring the same
# k8s.io/kubernetes as components/kube with the same staging replaces, so the
# packages they share come out of kubelet's build cache (order only on
# kubelet's build, as kube-proxy: two go builds compiling one package at once
# each do the whole work). They run on the host, whatever ARCH is, so they go
# under the host's components directory. make test builds them beside the
# amd64 QEMU suite (test-build-e2e) for test-conformance; see
# components/README.md for what they cost.
E2E_DIR := $(COMPONENTS_DIR)/e2e-$(KUBE_VERSION)
.PHONY: e2e
## e2e: e2e.test and ginkgo, from the k8s.io/kubernetes kubelet is built from, in build/components/e2e-<version>/.
e2e: $(E2E_DIR)/.built

$(E2E_DIR)/.built: components/e2e/go.mod components/e2e/go.sum components/e2e/tools.go | $(KUBE_DIR)/.built
	@grep -Eq '^(require )?[[:space:]]*k8s.io/kubernetes $(KUBE_VERSION)$$' components/e2e/go.mod || \
	  { echo "e2e: components/e2e/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION); update it (and every staging replace) with KUBE_VERSION"; exit 1; }
	@echo "e2e: building e2e.test and ginkgo $(KUBE_VERSION) (about 6 CPU minutes with kubelet's build cache, 30 s warm)"
	@rm -rf $(E2E_DIR).tmp && mkdir -p $(E2E_DIR).tmp
	cd components/e2e && CGO_ENABLED=0 $(NICE) $(GO) test -c -trimpath -ldflags '$(KUBE_LDFLAGS)' \
	  -o $(E2E_DIR).tmp/e2e.test k8s.io/kubernetes/test/e2e && \
	  CGO_ENABLED=0 $(NICE) $(GO) build -trimpath -ldflags '-s -w' -o $(E2E_DIR).tmp/ginkgo github.com/onsi/ginkgo/v2/ginkgo
	@for f in e2e.test ginkgo; do if readelf -l $(E2E_DIR).tmp/$$f | grep INTERP >/dev/null; then echo "e2e: $$f is not statically linked"; exit 1; fi; done
	@$(E2E_DIR).tmp/e2e.test --version | grep '$(KUBE_VERSION)' >/dev/null || { echo "e2e: e2e.test --version is not $(KUBE_VERSION)"; exit 1; }
	@# A test binary's build info lists no dependencies: the module's
	@# requirement is the ginkgo library e2e.test was built with.
	@g=$$(cd components/e2e && $(GO) list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2); \
	  $(E2E_DIR).tmp/ginkgo version | grep -x "Ginkgo Version $${g#v}" >/dev/null || \
	  { echo "e2e: ginkgo is not the version e2e.test links ($$g): ginkgo refuses to run a suite of another"; exit 1; }
	@rm -rf $(E2E_DIR) && mv $(E2E_DIR).tmp $(E2E_DIR) && touch $@

# The e2e suite's images (issue 27): the [NodeConformance] specs' images,
# built from their upstream Dockerfiles' contents by mkoci from the specs in
# image/oci/images/e2e/ (its README says what stands in for what), named
# with the upstream references e2e.test --list-images prints; the tags are
# the suite's (test/utils/image/manifest.go at KUBE_VERSION), which
# test-e2e-images checks against e2e.test itself. For the node's ARCH, as
# the cluster images; arm64 would also need the e2e specs' host programs in
# the sysroot (not done: make sysroot lists image/oci/images/*.yaml only).
# E2E_REPO_LIST is the KUBE_TEST_REPO_LIST file that sends the suite's
# pulls to the registry stand-in (image/oci/e2erepo).
E2E_BIN_DIR     := $(ARCH_COMPONENTS_DIR)/e2e-bin-$(KUBE_VERSION)
E2E_IMAGES_DIR  := $(ARCH_COMPONENTS_DIR)/e2e-images
E2E_NGINX_ROOT  := $(ARCH_BUILD)/e2e-nginx
E2E_REPO_LIST   := $(COMPONENTS_DIR)/e2e-repo-list-$(KUBE_VERSION).yaml
# agnhost's version as its image's Makefile stamps it (test/images/agnhost/VERSION).
E2E_AGNHOST_VERSION := 2.59
E2E_PROMOTER    := registry.k8s.io/e2e-test-images
E2E_IMAGE_REFS  := $(E2E_PROMOTER)/agnhost:2.59 $(E2E_PROMOTER)/agnhost:2.55 $(E2E_PROMOTER)/busybox:1.37.0-1 \
  $(E2E_PROMOTER)/nginx:1.14-4 $(E2E_PROMOTER)/nginx:1.15-4 registry.k8s.io/pause:3.10.1 \
  $(E2E_PROMOTER)/nonroot:1.4 $(E2E_PROMOTER)/nonewprivs:1.3 $(E2E_PROMOTER)/kitten:1.7 \
  $(E2E_PROMOTER)/nautilus:1.7 $(E2E_PROMOTER)/ipc-utils:1.3 $(E2E_PROMOTER)/jessie-dnsutils:1.7 \
  $(E2E_PROMOTER)/sample-apiserver:1.29.2 registry.k8s.io/etcd:3.6.6-0 \
  $(E2E_PROMOTER)/regression-issue-74839:1.4 registry.k8s.io/build-image/distroless-iptables:v0.8.9
# Each reference's tarball: REPO-TAG.tar (agnhost-2.59.tar).
E2E_IMAGE_TARS  := $(foreach r,$(E2E_IMAGE_REFS),$(E2E_IMAGES_DIR)/$(subst :,-,$(notdir $(r))).tar)
# The Debian packages whose programs the specs copy from this host (nginx
# is unpacked instead: see e2e-nginx).
E2E_APT_PKGS    := busybox-static bash curl bind9-dnsutils bind9-host netcat-openbsd iproute2 iperf util-linux \
  libpcre2-8-0 libssl3 zlib1g libcrypt1 dash coreutils grep iptables ipset nftables kmod

.PHONY: e2e-images e2e-deps e2e-nginx e2e-repo-list test-e2e-images
## e2e-images: the e2e suite's images for its [NodeConformance] specs, the aggregator's and the sig-node and sig-network specs', in build/components/e2e-images/.
e2e-images: $(E2E_IMAGE_TARS)
## e2e-repo-list: the KUBE_TEST_REPO_LIST file mapping the suite's registries to registry.berth.test.
e2e-repo-list: $(E2E_REPO_LIST)
e2e-nginx: $(E2E_NGINX_ROOT)/.built

## e2e-deps: installs the Debian packages the e2e images copy programs from.
e2e-deps: $(ARCH_BUILD)/.e2e-deps-stamp
$(ARCH_BUILD)/.e2e-deps-stamp: components.mk
	@mkdir -p $(ARCH_BUILD)
	@missing=""; for p in $(E2E_APT_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep 'install ok installed' >/dev/null || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "e2e-deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

# Debian's nginx and nginx-common unpacked (dpkg -x), not installed: the
# package would start an nginx service on the builder. Its libraries are
# e2e-deps' (libpcre2, libssl, zlib, libcrypt).
$(E2E_NGINX_ROOT)/.built: | $(ARCH_BUILD)/.e2e-deps-stamp
	@rm -rf $(E2E_NGINX_ROOT).tmp && mkdir -p $(E2E_NGINX_ROOT).tmp/.debs && chmod 755 $(E2E_NGINX_ROOT).tmp/.debs
	cd $(E2E_NGINX_ROOT).tmp/.debs && apt-get download -q nginx nginx-common 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
	@for d in $(E2E_NGINX_ROOT).tmp/.debs/*.deb; do dpkg -x $$d $(E2E_NGINX_ROOT).tmp; done
	@test -x $(E2E_NGINX_ROOT).tmp/usr/sbin/nginx || { echo "e2e-nginx: apt-get download nginx nginx-common gave no usr/sbin/nginx"; exit 1; }
	@ls $(E2E_NGINX_ROOT).tmp/.debs > $(E2E_NGINX_ROOT).tmp/.packages && rm -rf $(E2E_NGINX_ROOT).tmp/.debs
	@rm -rf $(E2E_NGINX_ROOT) && mv $(E2E_NGINX_ROOT).tmp $(E2E_NGINX_ROOT) && touch $@

# agnhost, nonewprivs' nnp and regression-issue-74839, from the e2e tools
# module, for the node's ARCH; after kubelet's build (order only), whose
# packages agnhost shares.
$(E2E_BIN_DIR)/.built: components/e2e/go.mod components/e2e/go.sum components/e2e/tools.go | $(KUBELET_DIR)/.built
	@grep -Eq '^(require )?[[:space:]]*k8s.io/kubernetes $(KUBE_VERSION)$$' components/e2e/go.mod || \
	  { echo "e2e-bin: components/e2e/go.mod does not require k8s.io/kubernetes $(KUBE_VERSION)"; exit 1; }
	@rm -rf $(E2E_BIN_DIR).tmp && mkdir -p $(E2E_BIN_DIR).tmp
	cd components/e2e && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags "-s -w -X 'main.Version=$(E2E_AGNHOST_VERSION)'" \
	  -o $(E2E_BIN_DIR).tmp/agnhost k8s.io/kubernetes/test/images/agnhost && \
	  CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' -o $(E2E_BIN_DIR).tmp/nnp k8s.io/kubernetes/test/images/nonewprivs && \
	  CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' -o $(E2E_BIN_DIR).tmp/regression-issue-74839 \
	  k8s.io/kubernetes/test/images/regression-issue-74839
ifeq ($(ARCH),amd64)
	@$(E2E_BIN_DIR).tmp/agnhost --version 2>&1 | grep '$(E2E_AGNHOST_VERSION)' >/dev/null || { echo "e2e-bin: agnhost --version is not $(E2E_AGNHOST_VERSION)"; exit 1; }
else
	@$(call CHECK_CROSS,e2e-bin,$(E2E_BIN_DIR).tmp/agnhost $(E2E_BIN_DIR).tmp/nnp $(E2E_BIN_DIR).tmp/regression-issue-74839)
endif
	@rm -rf $(E2E_BIN_DIR) && mv $(E2E_BIN_DIR).tmp $(E2E_BIN_DIR) && touch $@

# The aggregator specs' two images (the [Conformance] "Sample API Server"
# spec runs them in one pod): sample-apiserver, k8s.io/sample-apiserver at
# the tag upstream built its 1.29.2 image from, and etcd, etcd, etcdctl and
# etcdutl at the version of the suite's etcd image (3.6.6-0), each from its
# own tools module (components/sample-apiserver, components/e2e-etcd; their
# tools.go say why apart from components/kube and components/etcd). For the
# node's ARCH, as agnhost. Upstream builds both CGO_ENABLED=0 with no
# -ldflags but etcd's GitSHA, which a module build has not; -s -w as the
# other components.
E2E_SAMPLE_APISERVER_VERSION := v0.29.2
E2E_ETCD_VERSION             := v3.6.6
E2E_SAMPLE_APISERVER_DIR     := $(ARCH_COMPONENTS_DIR)/sample-apiserver-$(E2E_SAMPLE_APISERVER_VERSION)
E2E_ETCD_DIR                 := $(ARCH_COMPONENTS_DIR)/e2e-etcd-$(E2E_ETCD_VERSION)
.PHONY: e2e-sample-apiserver e2e-etcd
e2e-sample-apiserver: $(E2E_SAMPLE_APISERVER_DIR)/.built
e2e-etcd: $(E2E_ETCD_DIR)/.built

$(E2E_SAMPLE_APISERVER_DIR)/.built: components/sample-apiserver/go.mod components/sample-apiserver/go.sum
	@grep -q '^require k8s.io/sample-apiserver $(E2E_SAMPLE_APISERVER_VERSION)$$' components/sample-apiserver/go.mod || \
	  { echo "e2e-sample-apiserver: components/sample-apiserver/go.mod does not require k8s.io/sample-apiserver $(E2E_SAMPLE_APISERVER_VERSION)"; exit 1; }
	@rm -rf $(E2E_SAMPLE_APISERVER_DIR).tmp && mkdir -p $(E2E_SAMPLE_APISERVER_DIR).tmp
	cd components/sample-apiserver && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' \
	  -o $(E2E_SAMPLE_APISERVER_DIR).tmp/sample-apiserver k8s.io/sample-apiserver
	@$(GO) version -m $(E2E_SAMPLE_APISERVER_DIR).tmp/sample-apiserver | grep -P '^\t(mod|dep)\tk8s.io/sample-apiserver\t$(E2E_SAMPLE_APISERVER_VERSION)\t' >/dev/null || \
	  { echo "e2e-sample-apiserver: not built from k8s.io/sample-apiserver $(E2E_SAMPLE_APISERVER_VERSION)"; exit 1; }
	@if readelf -l $(E2E_SAMPLE_APISERVER_DIR).tmp/sample-apiserver | grep INTERP >/dev/null; then echo "e2e-sample-apiserver: not statically linked"; exit 1; fi
ifneq ($(ARCH),amd64)
	@$(call CHECK_CROSS,e2e-sample-apiserver,$(E2E_SAMPLE_APISERVER_DIR).tmp/sample-apiserver)
endif
	@rm -rf $(E2E_SAMPLE_APISERVER_DIR) && mv $(E2E_SAMPLE_APISERVER_DIR).tmp $(E2E_SAMPLE_APISERVER_DIR) && touch $@

$(E2E_ETCD_DIR)/.built: components/e2e-etcd/go.mod components/e2e-etcd/go.sum
	@for m in server etcdctl etcdutl; do grep -Eq "^(require )?[[:space:]]*go.etcd.io/etcd/$$m/v3 $(E2E_ETCD_VERSION)$$" components/e2e-etcd/go.mod || \
	  { echo "e2e-etcd: components/e2e-etcd/go.mod does not require go.etcd.io/etcd/$$m/v3 $(E2E_ETCD_VERSION)"; exit 1; }; done
	@rm -rf $(E2E_ETCD_DIR).tmp && mkdir -p $(E2E_ETCD_DIR).tmp
	cd components/e2e-etcd && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' \
	  -o $(E2E_ETCD_DIR).tmp/etcd go.etcd.io/etcd/server/v3 && \
	  CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' -o $(E2E_ETCD_DIR).tmp/etcdctl go.etcd.io/etcd/etcdctl/v3 && \
	  CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath -ldflags '-s -w' -o $(E2E_ETCD_DIR).tmp/etcdutl go.etcd.io/etcd/etcdutl/v3
	@for f in etcd etcdctl etcdutl; do if readelf -l $(E2E_ETCD_DIR).tmp/$$f | grep INTERP >/dev/null; then echo "e2e-etcd: $$f is not statically linked"; exit 1; fi; done
ifeq ($(ARCH),amd64)
	@$(E2E_ETCD_DIR).tmp/etcd --version | grep -x 'etcd Version: $(E2E_ETCD_VERSION:v%=%)' >/dev/null || { echo "e2e-etcd: etcd --version is not $(E2E_ETCD_VERSION)"; exit 1; }
	@$(E2E_ETCD_DIR).tmp/etcdctl version | grep -x 'etcdctl version: $(E2E_ETCD_VERSION:v%=%)' >/dev/null || { echo "e2e-etcd: etcdctl version is not $(E2E_ETCD_VERSION)"; exit 1; }
	@$(E2E_ETCD_DIR).tmp/etcdutl version | grep -x 'etcdutl version: $(E2E_ETCD_VERSION:v%=%)' >/dev/null || { echo "e2e-etcd: etcdutl version is not $(E2E_ETCD_VERSION)"; exit 1; }
else
	@$(call CHECK_CROSS,e2e-etcd,$(E2E_ETCD_DIR).tmp/etcd $(E2E_ETCD_DIR).tmp/etcdctl $(E2E_ETCD_DIR).tmp/etcdutl)
endif
	@rm -rf $(E2E_ETCD_DIR) && mv $(E2E_ETCD_DIR).tmp $(E2E_ETCD_DIR) && touch $@

# agnhost's /coredns: the cluster's CoreDNS (COREDNS_VERSION, its tools
# module) with the hosts plugin added, which the suite's Corefile for it
# names (components/coredns/e2e/main.go says why not upstream's 1.6.2
# release); after the cluster's build (order only), whose packages it
# shares.
E2E_COREDNS_DIR := $(ARCH_COMPONENTS_DIR)/e2e-coredns-$(COREDNS_VERSION)
.PHONY: e2e-coredns
e2e-coredns: $(E2E_COREDNS_DIR)/.built
$(E2E_COREDNS_DIR)/.built: components/coredns/go.mod components/coredns/go.sum components/coredns/e2e/main.go | $(COREDNS_DIR)/.built
	@rm -rf $(E2E_COREDNS_DIR).tmp && mkdir -p $(E2E_COREDNS_DIR).tmp
	cd components/coredns && CGO_ENABLED=0 $(GO_CROSS)$(NICE) $(GO) build -trimpath \
	  -ldflags '-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(COREDNS_VERSION)' \
	  -o $(E2E_COREDNS_DIR).tmp/coredns ./e2e
	@if readelf -l $(E2E_COREDNS_DIR).tmp/coredns | grep INTERP >/dev/null; then echo "e2e-coredns: coredns is not statically linked"; exit 1; fi
ifeq ($(ARCH),amd64)
	@$(E2E_COREDNS_DIR).tmp/coredns -plugins | grep -x 'hosts' >/dev/null || { echo "e2e-coredns: -plugins lists no hosts"; exit 1; }
else
	@$(call CHECK_CROSS,e2e-coredns,$(E2E_COREDNS_DIR).tmp/coredns)
endif
	@$(GO) version -m $(E2E_COREDNS_DIR).tmp/coredns | grep -P '^\tdep\tgithub.com/coredns/coredns\t$(COREDNS_VERSION)\t' >/dev/null || \
	  { echo "e2e-coredns: not built from github.com/coredns/coredns $(COREDNS_VERSION)"; exit 1; }
	@rm -rf $(E2E_COREDNS_DIR) && mv $(E2E_COREDNS_DIR).tmp $(E2E_COREDNS_DIR) && touch $@

# The busybox image's busybox: upstream BusyBox, the version of the Docker
# library image the suite's busybox is FROM (busybox:1.37.0), built static
# from busybox's defconfig as that image is (tc left out: it needs CBQ
# headers newer kernels dropped). Not Debian's busybox-static: Debian
# reverts upstream's ash change that passes environment variables with
# names that are not shell names (data-1) on to children
# (debian/patches/revert-9c143ce5...), which the suite's envFrom specs
# read through `sh -c env`, and bash as sh prints other error messages
# than ash's, which "a read only busybox container" compares. The source
# is the upstream tarball Debian ships as trixie's busybox orig,
# fetched by apt-get source with a private apt state (deb.debian.org,
# checked by apt against Debian's keyring), and checked against the
# upstream tarball's sha256 here.
E2E_BUSYBOX_VERSION := 1.37.0
E2E_BUSYBOX_SHA256  := 3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
E2E_BUSYBOX_SUITE   := trixie
E2E_BUSYBOX_DIR     := $(ARCH_BUILD)/e2e-busybox-$(E2E_BUSYBOX_VERSION)
E2E_BUSYBOX_APT      = -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$(E2E_BUSYBOX_DIR).tmp/apt/sources \
  -o Dir::State::Lists=$(E2E_BUSYBOX_DIR).tmp/apt/lists -o Dir::Cache=$(E2E_BUSYBOX_DIR).tmp/apt/cache
.PHONY: e2e-busybox
e2e-busybox: $(E2E_BUSYBOX_DIR)/.built
$(E2E_BUSYBOX_DIR)/.built:
	@[ "$(ARCH)" = amd64 ] || { echo "e2e-busybox: ARCH=$(ARCH): the e2e images are built for amd64 only (see above)"; exit 1; }
	@rm -rf $(E2E_BUSYBOX_DIR).tmp && mkdir -p $(E2E_BUSYBOX_DIR).tmp/apt/lists/partial $(E2E_BUSYBOX_DIR).tmp/apt/cache/archives/partial \
	  $(E2E_BUSYBOX_DIR).tmp/apt/sources $(E2E_BUSYBOX_DIR).tmp/src
	@printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: $(E2E_BUSYBOX_SUITE)\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
	  > $(E2E_BUSYBOX_DIR).tmp/apt/sources/busybox-src.sources
	@echo "e2e-busybox: fetching busybox's source from Debian $(E2E_BUSYBOX_SUITE) (upstream $(E2E_BUSYBOX_VERSION))"
	@apt-get $(E2E_BUSYBOX_APT) update -qq 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
	@cd $(E2E_BUSYBOX_DIR).tmp/src && apt-get $(E2E_BUSYBOX_APT) source --download-only -qq busybox 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
	@cd $(E2E_BUSYBOX_DIR).tmp/src && test -f busybox_$(E2E_BUSYBOX_VERSION).orig.tar.bz2 || \
	  { echo "e2e-busybox: Debian $(E2E_BUSYBOX_SUITE)'s busybox source has no busybox_$(E2E_BUSYBOX_VERSION).orig.tar.bz2 (it has: $$(ls))"; exit 1; }
	@cd $(E2E_BUSYBOX_DIR).tmp/src && echo '$(E2E_BUSYBOX_SHA256)  busybox_$(E2E_BUSYBOX_VERSION).orig.tar.bz2' | sha256sum -c --quiet - || \
	  { echo "e2e-busybox: busybox_$(E2E_BUSYBOX_VERSION).orig.tar.bz2 is not upstream's tarball (sha256 differs)"; exit 1; }
	@cd $(E2E_BUSYBOX_DIR).tmp/src && tar -xjf busybox_$(E2E_BUSYBOX_VERSION).orig.tar.bz2 && cd busybox-$(E2E_BUSYBOX_VERSION) && \
	  $(MAKE) -s defconfig >/dev/null && \
	  sed -i 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/; s/^CONFIG_TC=y/# CONFIG_TC is not set/' .config && \
	  grep -qx 'CONFIG_STATIC=y' .config && \
	  $(NICE) $(MAKE) -s -j$$(nproc) busybox > ../build.log 2>&1 || { tail -30 ../build.log; echo "e2e-busybox: the build failed; log: $(E2E_BUSYBOX_DIR).tmp/src/build.log"; exit 1; }
	@b=$(E2E_BUSYBOX_DIR).tmp/src/busybox-$(E2E_BUSYBOX_VERSION)/busybox; $$b 2>&1 | sed -n 1p | grep '^BusyBox v$(E2E_BUSYBOX_VERSION) ' >/dev/null || \
	  { echo "e2e-busybox: the built busybox is not v$(E2E_BUSYBOX_VERSION)"; exit 1; }; \
	  if readelf -l $$b | grep INTERP >/dev/null; then echo "e2e-busybox: busybox is not statically linked"; exit 1; fi; \
	  rm -rf $(E2E_BUSYBOX_DIR) && mkdir -p $(E2E_BUSYBOX_DIR) && cp $$b $(E2E_BUSYBOX_DIR)/busybox && $$b --list > $(E2E_BUSYBOX_DIR)/applets && \
	  rm -rf $(E2E_BUSYBOX_DIR).tmp && touch $(E2E_BUSYBOX_DIR)/.built

# $(call E2E_MKOCI,SPEC,VARS): mkoci on image/oci/images/e2e/SPEC.yaml.
E2E_MKOCI = @mkdir -p $(E2E_IMAGES_DIR) && $(GO) run ./image/oci/cmd/mkoci -spec image/oci/images/e2e/$(1).yaml \
  -var KUBE_VERSION=$(KUBE_VERSION) -var E2E_BIN_DIR=$(E2E_BIN_DIR) -var E2E_NGINX_ROOT=$(E2E_NGINX_ROOT) $(2)$(MKOCI_ARCH)$(if $(SYSROOT), -sysroot $(SYSROOT)) -out $@
E2E_SPEC_DEPS = $(MKOCI_SRCS) $(ARCH_BUILD)/.e2e-deps-stamp

# agnhost's fake registry serves the suite's pause image as pause:testing;
# its busybox is the busybox image's (Alpine's is upstream's 1.37.0), its
# /coredns e2e-coredns.
$(E2E_IMAGES_DIR)/agnhost-%.tar: image/oci/images/e2e/agnhost.yaml $(E2E_BIN_DIR)/.built $(wildcard image/oci/images/e2e/files/localhost.*) \
  $(E2E_IMAGES_DIR)/pause-3.10.1.tar $(E2E_BUSYBOX_DIR)/.built $(E2E_COREDNS_DIR)/.built $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,agnhost,-var AGNHOST_TAG=$* -var PAUSE_TARBALL=$(E2E_IMAGES_DIR)/pause-3.10.1.tar \
	  -var E2E_BUSYBOX=$(E2E_BUSYBOX_DIR)/busybox -var E2E_COREDNS_DIR=$(E2E_COREDNS_DIR))
$(E2E_IMAGES_DIR)/nginx-%.tar: image/oci/images/e2e/nginx.yaml $(E2E_NGINX_ROOT)/.built $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,nginx,-var NGINX_TAG=$*)
$(E2E_IMAGES_DIR)/kitten-%.tar: image/oci/images/e2e/webserver.yaml $(E2E_BIN_DIR)/.built $(wildcard image/oci/images/e2e/files/kitten.*) $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,webserver,-var PICTURE=kitten -var PICTURE_TAG=$*)
$(E2E_IMAGES_DIR)/nautilus-%.tar: image/oci/images/e2e/webserver.yaml $(E2E_BIN_DIR)/.built $(wildcard image/oci/images/e2e/files/nautilus.*) $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,webserver,-var PICTURE=nautilus -var PICTURE_TAG=$*)
$(E2E_IMAGES_DIR)/pause-3.10.1.tar: image/oci/images/e2e/pause.yaml $(wildcard components/pause/*.go) $(MKOCI_SRCS)
	$(call E2E_MKOCI,pause)
$(E2E_IMAGES_DIR)/nonewprivs-1.3.tar: image/oci/images/e2e/nonewprivs.yaml $(E2E_BIN_DIR)/.built $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,nonewprivs)
# The specs that name their one tag themselves.
$(E2E_IMAGES_DIR)/busybox-1.37.0-1.tar: image/oci/images/e2e/busybox.yaml $(E2E_BUSYBOX_DIR)/.built $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,busybox,-var E2E_BUSYBOX=$(E2E_BUSYBOX_DIR)/busybox)
$(E2E_IMAGES_DIR)/nonroot-1.4.tar: image/oci/images/e2e/nonroot.yaml $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,nonroot)
$(E2E_IMAGES_DIR)/ipc-utils-1.3.tar: image/oci/images/e2e/ipc-utils.yaml $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,ipc-utils)
$(E2E_IMAGES_DIR)/jessie-dnsutils-1.7.tar: image/oci/images/e2e/jessie-dnsutils.yaml $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,jessie-dnsutils)
$(E2E_IMAGES_DIR)/regression-issue-74839-1.4.tar: image/oci/images/e2e/regression-issue-74839.yaml $(E2E_BIN_DIR)/.built $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,regression-issue-74839)
$(E2E_IMAGES_DIR)/distroless-iptables-v0.8.9.tar: image/oci/images/e2e/distroless-iptables.yaml $(E2E_SPEC_DEPS)
	$(call E2E_MKOCI,distroless-iptables)

$(E2E_IMAGES_DIR)/sample-apiserver-1.29.2.tar: image/oci/images/e2e/sample-apiserver.yaml $(E2E_SAMPLE_APISERVER_DIR)/.built $(MKOCI_SRCS)
	$(call E2E_MKOCI,sample-apiserver,-var E2E_SAMPLE_APISERVER_DIR=$(E2E_SAMPLE_APISERVER_DIR))
$(E2E_IMAGES_DIR)/etcd-3.6.6-0.tar: image/oci/images/e2e/etcd.yaml $(E2E_ETCD_DIR)/.built $(MKOCI_SRCS)
	$(call E2E_MKOCI,etcd,-var E2E_ETCD_DIR=$(E2E_ETCD_DIR))

$(E2E_REPO_LIST): $(filter-out %_test.go,$(wildcard image/oci/e2erepo/*.go image/oci/cmd/e2erepolist/*.go))
	$(GO) run ./image/oci/cmd/e2erepolist -registry registry.berth.test -out $@

## test-e2e-images: checks each e2e image tarball (name, upstream entrypoint, architecture, ELF machines)
## against the list e2e.test prints, runs in each (unpacked and chrooted into, as root) the commands the suite
## runs in it (image/oci/imagespec/testdata/e2e-commands.yaml), checks that the repo-list file leaves no image
## outside registry.berth.test, and that make conformance's by-name patterns (the subset, the skip list)
## select exactly what they name in e2e.test's own dry run.
test-e2e-images: e2e e2e-images e2e-repo-list
	BERTH_E2E_DIR=$(E2E_DIR) BERTH_E2E_IMAGES_DIR=$(E2E_IMAGES_DIR) BERTH_E2E_REPO_LIST=$(E2E_REPO_LIST) \
	  BERTH_E2E_IMAGE_REFS='$(E2E_IMAGE_REFS)' BERTH_ARCH=$(ARCH) \
	  $(GO) test -tags components,e2e -count=1 -v -run 'TestE2E|TestNamesPatternAgainstSuite|TestSkipListAgainstSuite|TestListTestsAgainstSuite|TestShardsAgainstSuite|TestWiderAgainstSuite' ./image/oci/imagespec/ ./qemu-tests/conformance/
