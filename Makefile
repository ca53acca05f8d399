# berth: build, image, tests and demo. Everything the targets need is
# installed by `make deps` (apt packages) and cached under build/.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# With pipefail, never end a pipeline in `grep -q` or `head`: they exit at
# the first match, and a producer still writing (etcdctl prints two lines in
# two writes) dies of SIGPIPE and fails the check now and then (CI, stop 35).
# Write `| grep PATTERN >/dev/null`, which reads to the end.
.DEFAULT_GOAL := build

GO        ?= go
MODULE    := github.com/berth-node/berth
# FIGURE -row KEY -- COMMAND: runs COMMAND and, when it succeeds, writes
# its times into docs/testing.md's timings table (docs/cmd/figure).
FIGURE     = $(GO) run ./docs/cmd/figure -doc docs/testing.md -section timings
BUILD     := $(CURDIR)/build
# Computed once and passed down: the figures make test writes into
# docs/testing.md must not turn the later steps' builds "-dirty".
ifndef VERSION
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
export VERSION
LDFLAGS   := -s -w -X github.com/berth-node/berth/internal/version.Version=$(VERSION)
APT_PKGS  := qemu-system-x86 cpio erofs-utils busybox-static xfsprogs e2fsprogs iproute2 libseccomp-dev \
             cryptsetup-bin dosfstools mtools systemd-boot-efi binutils ovmf iptables netbase nftables ipset \
             binutils-aarch64-linux-gnu sbsigntool efitools openssl genisoimage ca-certificates
export GOFLAGS := -mod=mod

# ARCH is the node's architecture: amd64 (the default) or arm64 (Graviton).
# amd64's outputs stay where they always were (build/berth, build/image-test,
# build/kernel...), which CI and the tests name; arm64's go under
# build/arm64/ with the same layout, so both can be built side by side.
# ARCH_APT_PKGS are the extra packages an arm64 build and its QEMU boots
# need; an amd64 run installs nothing more than before. The cross gcc only
# recommends its libc headers and static libc (libc6-dev-arm64-cross), and
# deps installs without recommends, so runc's cgo needs them named.
ARCH ?= amd64
ifeq ($(ARCH),amd64)
ARCH_BUILD    := $(BUILD)
ARCH_APT_PKGS :=
else ifeq ($(ARCH),arm64)
ARCH_BUILD    := $(BUILD)/arm64
ARCH_APT_PKGS := qemu-system-arm qemu-efi-aarch64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross libseccomp-dev:arm64 \
                 systemd-boot-efi:arm64
else
$(error ARCH=$(ARCH): want amd64 or arm64)
endif

.PHONY: deps build kernel sysroot image image-test disk keys publish update-repo test test-unit test-qemu lint demo bench soak clean size help

## help: every target with its one-line purpose. Read from the "## target:"
## comments in Makefile and components.mk (tools/make-help.awk).
help:
	@echo "make TARGET [ARCH=amd64|arm64]; the targets (docs/testing.md has more on each):"
	@awk -f tools/make-help.awk Makefile components.mk

## deps: install the apt packages the build and tests need (once; stamped).
## With ARCH=arm64 also the cross toolchain, libseccomp-dev:arm64 (after
## `dpkg --add-architecture arm64`), qemu-system-aarch64 and AAVMF.
deps: $(ARCH_BUILD)/.deps-stamp
# The Makefile is a prerequisite so that a package added to APT_PKGS is
# installed on a machine that ran deps before (the check is cheap).
$(ARCH_BUILD)/.deps-stamp: Makefile
	@mkdir -p $(ARCH_BUILD)
	@SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	if [ "$(ARCH)" != "$$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -x '$(ARCH)' >/dev/null; then \
	  echo "deps: dpkg --add-architecture $(ARCH)"; $$SUDO dpkg --add-architecture $(ARCH) && $$SUDO apt-get update -qq; \
	fi
	@missing=""; for p in $(APT_PKGS) $(ARCH_APT_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep 'install ok installed' >/dev/null || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

## build: the static berth binary at build/berth (ARCH=arm64: build/arm64/berth).
build:
	@mkdir -p $(ARCH_BUILD)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ARCH_BUILD)/berth ./init

## size: berth's stripped size and its bytes per module; fails when a
## dependency turns off the linker's dead method elimination.
size:
	tools/size.sh

## lint: gofmt and go vet; any finding fails. go vet runs once per build
## tag set the tree uses (LINT_TAGS), so a test compiled only with tags
## (the components and e2e tiers run late in make test) fails here, in the
## first minute, not after an hour.
LINT_TAGS := components components,e2e interop tools
lint:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt -l found:"; echo "$$out"; exit 1; fi
	@git ls-files -co --exclude-standard '*.go' | xargs sed -n '1s|^//go:build ||p' | sed 's/ *&& */,/g' | sort -u | \
	  while read -r t; do case " $(LINT_TAGS) " in *" $$t "*) ;; *) echo "lint: build tags $$t are not in LINT_TAGS, so go vet would not see their files"; exit 1;; esac; done
	$(GO) vet ./...
	set -e; for t in $(LINT_TAGS); do $(GO) vet -tags $$t ./...; done

## test: everything CI runs, in five steps; in two of them two jobs run
## side by side (-j2), so that one's idle core is the other's:
##   1. lint, alone (gofmt and go vet fail fast);
##   2. test-unit beside test-build-amd64: the unit tier (-race) at
##      normal priority, the amd64 builds at nice 19 filling its gaps;
##   3. test-qemu beside test-build-beside-qemu: the amd64 QEMU suite while
##      the arm64 half and then the e2e suite build at nice 19 in what the
##      guests leave idle, starting once the suite's own prerequisites are
##      made; TestNoCloud and TestRollout, which a build beside them slows
##      most, run last;
##   4. test-qemu-arm64, alone: its builds are done, its tests boot (its
##      aarch64 guests beside the amd64 suite's starved);
##   5. test-e2e-images, then test-conformance, alone: the e2e images'
##      checks and the suite's 22-spec slice on a one-node cluster.
## Each step's time, and the whole run's, goes into docs/testing.md's
## timings table when it succeeds (docs/cmd/figure).
## test-build still builds both halves at once, for a warm-up or a check.
test: deps
	+$(FIGURE) -row test -cold-if-absent $(COMPONENTS_DIR) -- $(MAKE) --no-print-directory test-steps
.PHONY: test-steps
test-steps:
	+$(FIGURE) -row lint -- $(MAKE) --no-print-directory lint
	+$(FIGURE) -row unit -- $(MAKE) --no-print-directory -j2 --output-sync=line test-unit test-build-amd64
	+$(FIGURE) -row qemu -- $(MAKE) --no-print-directory -j2 --output-sync=line test-qemu test-build-beside-qemu
	+$(FIGURE) -row arm64 -- $(MAKE) --no-print-directory test-qemu-arm64
	+$(FIGURE) -row conformance-slice -- $(MAKE) --no-print-directory test-e2e-images test-conformance

## test-build: everything test-qemu and test-qemu-arm64 boot, serve or
## pull (the amd64 test image, etcd, the cluster images; the arm64 test
## image, disk and test components), built TEST_JOBS (2) targets at a time
## before any QEMU test runs. One Go build keeps both cores busy while it
## compiles, but its package loading and links, the cross gcc of runc and
## the image builder's erofs and cpio steps leave one idle, and the other
## build fills it. The arm64 half starts once the host's kube and etcd are
## built: its test components link to them, and two makes must not build
## one directory.
TEST_JOBS ?= 2
.PHONY: test-build test-build-all test-build-amd64 test-build-arm64
test-build: deps
	+$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=line test-build-all
test-build-all: test-build-amd64 test-build-arm64
test-build-amd64: image-test update-test-images etcd cluster-images pause-images $(TEST_COMPONENTS)
test-build-arm64: kube etcd
	+$(ARM64_TEST_BUILD)
# The e2e suite and its images (test-conformance's), at nice 19 as the
# arm64 half: under make test they build beside the amd64 QEMU suite,
# after test-build-arm64 (-j2: test-qemu and one build at a time).
.PHONY: test-build-e2e
test-build-e2e:
	+nice -n 19 $(MAKE) --no-print-directory e2e e2e-images e2e-repo-list

## test-unit: every package but the QEMU tests, with -race. It needs the
## kernel package (the image's module resolution is tested against it) and
## ARCH=arm64's packages (UKIs are built with the arm64 stub). The full verbose
## log is build/unit-tests.log; shown are the package results, each failed
## test's own output (tools/failed-tests.awk), and any skip (the host network tests skip only where the machine has no
## network namespaces, and say so loudly).
test-unit: kernel
	+@$(MAKE) --no-print-directory ARCH=arm64 deps
	@mkdir -p $(BUILD); set +e; $(GO) test -race -count=1 -v $$($(GO) list ./... | grep -vx '$(MODULE)/qemu-tests') > $(BUILD)/unit-tests.log 2>&1; rc=$$?; set -e; \
	grep -E '^(ok |FAIL|panic:)|!!! SKIPPED|^\s*--- SKIP' $(BUILD)/unit-tests.log || true; \
	if [ $$rc -ne 0 ]; then \
	  awk -f tools/failed-tests.awk $(BUILD)/unit-tests.log | sed -n 1,400p; \
	  echo "test-unit: FAILED (exit $$rc); full log: $(BUILD)/unit-tests.log"; exit $$rc; fi

## kernel: the Debian kernel package linux-image-$(ARCH) currently depends on,
## downloaded and unpacked into build/kernel/<package>_<version>/ (skipped when
## present); build/kernel/current points at it. ARCH=arm64: build/arm64/kernel/,
## from the arm64 package (dpkg's foreign architecture, added by make deps).
KERNEL_DIR := $(ARCH_BUILD)/kernel/current
# apt names a foreign architecture's package with its :arch suffix; the
# host's own needs none (and amd64's commands stay as they were).
KERNEL_APT_ARCH := $(if $(filter $(ARCH),$(shell dpkg --print-architecture 2>/dev/null)),,:$(ARCH))
kernel: deps
	@mkdir -p $(ARCH_BUILD)/kernel
	@pkg=$$(apt-cache depends linux-image-$(ARCH)$(KERNEL_APT_ARCH) 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $$2; exit}'); \
	if [ -z "$$pkg" ]; then \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; $$SUDO apt-get update -qq; \
	  pkg=$$(apt-cache depends linux-image-$(ARCH)$(KERNEL_APT_ARCH) | awk '/Depends: linux-image-[0-9]/{print $$2; exit}'); \
	fi; \
	pkg=$${pkg%:$(ARCH)}; \
	[ -n "$$pkg" ] || { echo "kernel: cannot resolve linux-image-$(ARCH)'s kernel package"; exit 1; }; \
	ver=$$(apt-cache show "$$pkg$(KERNEL_APT_ARCH)" | awk '/^Version:/{print $$2; exit}'); \
	dir="$$pkg"_"$$ver"; \
	if [ ! -f "$(ARCH_BUILD)/kernel/$$dir/.unpacked" ]; then \
	  echo "kernel: fetching $$pkg$(KERNEL_APT_ARCH) $$ver"; \
	  tmp=$$(mktemp -d "$(ARCH_BUILD)/kernel/.dl-XXXXXX"); chmod 755 "$$tmp"; \
	  (cd "$$tmp" && apt-get download -q "$$pkg$(KERNEL_APT_ARCH)=$$ver"); \
	  rm -rf "$(ARCH_BUILD)/kernel/$$dir"; dpkg -x "$$tmp"/*.deb "$(ARCH_BUILD)/kernel/$$dir"; rm -rf "$$tmp"; \
	  touch "$(ARCH_BUILD)/kernel/$$dir/.unpacked"; \
	fi; \
	ln -sfn "$$dir" $(KERNEL_DIR); echo "kernel: $(KERNEL_DIR) -> $$dir"

## sysroot: for an ARCH other than the host's (arm64 on amd64), the host
## programs of the image (busybox, mkfs.*, mount, iptables, nft, ipset) and
## of the cluster images (kube-proxy's iptables, busybox) and their
## libraries from that architecture's Debian packages, unpacked into
## build/arm64/sysroot/. The packages are those that own, on this host, the
## files the specs copy (mkimage and mkoci -host-files, dpkg -S); redone
## only when their list or a version changes (tools/sysroot.sh). The host's
## own architecture reads them from / and needs none.
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
SYSROOT   := $(if $(filter $(HOST_ARCH),$(ARCH)),,$(ARCH_BUILD)/sysroot)
sysroot: deps
ifeq ($(SYSROOT),)
	@echo "sysroot: ARCH=$(ARCH) is this host's: the image reads its host programs from /"
else
	@mkdir -p $(ARCH_BUILD)
	$(GO) run ./image/cmd/mkimage -spec image/spec.yaml -variant test -arch $(HOST_ARCH) -var NODE_COMPONENTS=$(NODE_COMPONENTS_DIR) -host-files \
	  > $(SYSROOT).host-files.tmp
	for s in image/oci/images/*.yaml; do \
	  $(GO) run ./image/oci/cmd/mkoci -spec $$s $(MKOCI_DIR_VARS) -var BUSYBOX_VERSION=any -arch $(HOST_ARCH) -host-files; \
	done >> $(SYSROOT).host-files.tmp
	sort -u $(SYSROOT).host-files.tmp | tools/sysroot.sh $(ARCH) $(SYSROOT)
	@rm -f $(SYSROOT).host-files.tmp
endif

# UPDATE_URL is the update repository an image's nodes ask by default
# (recorded in its manifest); empty: none, user data names one
# (berth.dev/update-repository). The image trusts the repository keys'
# root.json (KEYS_DIR/update/root.json, make keys), placed in its root at
# /usr/share/berth/update/root.json, when there is one.
UPDATE_URL ?=
UPDATE_ROOT = $(KEYS_DIR)/update/root.json
MKIMAGE = $(GO) run ./image/cmd/mkimage -spec image/spec.yaml -arch $(ARCH) -berth $(ARCH_BUILD)/berth -version $(VERSION) -kernel $(KERNEL_DIR) \
  -var NODE_COMPONENTS=$(NODE_COMPONENTS_DIR) $(if $(SYSROOT),-sysroot $(SYSROOT)) $(MKIMAGE_COMPONENTS) \
  $(if $(wildcard $(UPDATE_ROOT)),-update-root $(UPDATE_ROOT)) $(if $(UPDATE_URL),-update-url $(UPDATE_URL))

## image: the node image in build/image/ (vmlinuz, initramfs.img, manifest.json, and root.erofs:
## the root filesystem and its dm-verity tree, attached read-only as a virtio disk with serial
## berth-root on a direct-kernel boot; it is not in the initramfs).
image: build kernel sysroot node-components
	$(MKIMAGE) -variant default -out $(ARCH_BUILD)/image

## disk: the node image plus build/image/disk.raw, a GPT disk that boots
## under UEFI (EC2, OVMF) with Secure Boot: ESP with systemd-boot and the
## UKI, both signed with KEYS_DIR's db key (make keys makes the set first
## when there is none) and the keys to enroll in setup mode; root slots a
## (dm-verity root) and b (empty, for an update); growable data partition.
## Same spec as `image`; the manifest records the disk's sha256 and its
## signer. The signed UKI is also written beside it as berth.efi, for
## make update-repo. UNSIGNED=1 builds it unsigned (it boots only with
## Secure Boot off); ENROLL=0 leaves the keys off the ESP. `image`, `disk`
## and `image-test` carry KEYS_DIR/update/root.json, the update
## repository's trusted root, when make keys has made it, and UPDATE_URL
## as the default update repository.
UNSIGNED ?=
ENROLL   ?= 1
disk: deps build kernel sysroot node-components $(if $(UNSIGNED),,keys)
	$(MKIMAGE) -variant default -out $(ARCH_BUILD)/image -disk $(ARCH_BUILD)/image/disk.raw \
	  $(if $(UNSIGNED),,-keys $(KEYS_DIR) -enroll=$(if $(filter 0,$(ENROLL)),false,true))

# KEYS_DIR is where `make keys` writes the Secure Boot key set (one for
# every architecture); KEYS_FROM a directory of your own keys to take.
KEYS_DIR  ?= $(BUILD)/keys
KEYS_FROM ?=
KEYS_FORCE ?=

## keys: the UEFI Secure Boot keys the disk is signed with, in build/keys/
## (KEYS_DIR): PK, KEK and db (RSA-2048 .key and self-signed .crt), their
## signature lists (.esl), the signed variables that enroll them (.auth)
## and EC2's uefi-data (register-image --uefi-data); in update/, the update
## repository's TUF keys (tuf-<role>.pem) and the root.json images trust.
## Made once: an existing set is kept and checked. KEYS_FROM=DIR takes your
## own PK/KEK/db .key and .crt instead and adds what is missing;
## KEYS_FORCE=1 replaces an existing set, update keys included. Keep the
## .key and .pem files secret.
# Under a lock: image-test and the arm64 half's disk both need the set,
# and test-build makes them side by side (two makes), so two mkkeys must
# not make two sets at once. flock is util-linux's, on every Debian.
keys:
	@mkdir -p $(BUILD)
	flock $(BUILD)/.keys.lock $(GO) run ./image/cmd/mkkeys -out $(KEYS_DIR) $(if $(KEYS_FROM),-from $(KEYS_FROM)) $(if $(KEYS_FORCE),-force)

## publish: make an AMI of the disk `make disk` built (build/image/disk.raw,
## ARCH=arm64: build/arm64/image/disk.raw) through the EBS direct APIs: no
## S3 bucket, no vmimport role. Region and credentials from the AWS
## configuration chain (AWS_REGION, AWS_PROFILE...); Secure Boot keys from
## build/keys/uefi-data when make keys wrote it. Prints the AMI ID. It never
## rebuilds the disk: it publishes the one the manifest describes, checked
## by its sha256. PUBLISH_FLAGS adds flags (-dry-run, -region, -workers).
publish:
	@for f in $(ARCH_BUILD)/image/manifest.json $(ARCH_BUILD)/image/disk.raw; do \
	  [ -f "$$f" ] || { echo "publish: $$f does not exist: run make disk first" >&2; exit 1; }; done
	$(GO) run ./image/cmd/publish -image $(ARCH_BUILD)/image -uefi-data $(if $(wildcard $(KEYS_DIR)/uefi-data),$(KEYS_DIR)/uefi-data,none) $(PUBLISH_FLAGS)

## update-repo: adds the build `make disk` left in build/image (ARCH=arm64:
## build/arm64/image) to the update repository UPDATE_REPO (build/update-repo;
## made from KEYS_DIR/update/root.json when it does not exist): the signed
## UKI and the root slot image for its architecture and version, signed
## with KEYS_DIR/update's keys. The version must be a release version:
## `make disk update-repo VERSION=1.2.3`. Serve the directory with any
## static web server or bucket. UPDATE_REPO_FLAGS adds flags (-refresh
## re-signs the metadata before the timestamp expires, and adds nothing).
UPDATE_REPO       ?= $(BUILD)/update-repo
UPDATE_REPO_FLAGS ?=
update-repo:
	@[ -f "$(UPDATE_ROOT)" ] || { echo "update-repo: $(UPDATE_ROOT) does not exist: run make keys first" >&2; exit 1; }
	$(GO) run ./image/cmd/updaterepo -image $(ARCH_BUILD)/image -keys $(KEYS_DIR)/update -repo $(UPDATE_REPO) \
	  $(if $(filter -refresh,$(UPDATE_REPO_FLAGS)),,-version $(VERSION)) $(UPDATE_REPO_FLAGS)

## image-test: the test image in build/image-test/ (adds busybox and test
## helpers), trusting KEYS_DIR/update's root.json (make keys is run first,
## which keeps an existing set): the QEMU update tests sign their
## repository with those keys.
image-test: build kernel sysroot node-components keys
	$(MKIMAGE) -variant test -out $(ARCH_BUILD)/image-test

## update-test-images: the releases TestUpdate boots and publishes in its
## update repository, built from the test image's inputs with release
## versions: build/update-test/1.0.0/ (the node's first disk) and 1.0.1/
## (good ones), and 1.0.2/ (its kubelet is ctr under kubelet's name: it
## boots, but kubelet never starts, so its trial must fail). Made before
## test-qemu, with image-test.
UPDATE_TEST_DIR := $(ARCH_BUILD)/update-test
.PHONY: update-test-images
update-test-images: $(UPDATE_TEST_DIR)/1.0.0/manifest.json $(UPDATE_TEST_DIR)/1.0.1/manifest.json $(UPDATE_TEST_DIR)/1.0.2/manifest.json
# image-test is phony (mkimage runs on every make); this rule lets the
# releases depend on its manifest, which make looks at again after
# image-test has run: a clean clone has none until then.
$(ARCH_BUILD)/image-test/manifest.json: image-test ;
$(UPDATE_TEST_DIR)/1.0.%/manifest.json: $(ARCH_BUILD)/image-test/manifest.json
	$(MKIMAGE) -variant test -version 1.0.$* -out $(UPDATE_TEST_DIR)/1.0.$*
$(UPDATE_TEST_DIR)/1.0.2/manifest.json: $(ARCH_BUILD)/image-test/manifest.json
	@rm -rf $(UPDATE_TEST_DIR)/node-broken && mkdir -p $(UPDATE_TEST_DIR) && cp -a $(NODE_COMPONENTS_DIR)/. $(UPDATE_TEST_DIR)/node-broken/
	@rm -f $(UPDATE_TEST_DIR)/node-broken/kubelet && cp $(NODE_COMPONENTS_DIR)/ctr $(UPDATE_TEST_DIR)/node-broken/kubelet
	$(MKIMAGE) -variant test -version 1.0.2 -var NODE_COMPONENTS=$(UPDATE_TEST_DIR)/node-broken -out $(UPDATE_TEST_DIR)/1.0.2

# TEST_COMPONENTS_DIR is the components directory (BERTH_COMPONENTS_DIR)
# that test-qemu, test-qemu-arm64, demo, bench and soak give a node
# joining the host's cluster: the host's control plane and etcd, with the
# node architecture's cluster, pause and demo images, which the registry
# stand-in serves. For amd64 that is build/components itself. For arm64 it
# is build/arm64/test-components/, links combining the host's amd64 control
# plane with the arm64 node images, made by test-components-dir
# (TEST_COMPONENTS: the prerequisite that makes it; none for amd64).
ifeq ($(ARCH),amd64)
TEST_COMPONENTS_DIR = $(COMPONENTS_DIR)
TEST_COMPONENTS    :=
else
TEST_COMPONENTS_DIR = $(ARCH_BUILD)/test-components
TEST_COMPONENTS    := test-components-dir
endif

# QEMU_TEST_TIMEOUT bounds test-qemu's go test. The suite took 57 min
# here with make test's builds beside it (TestRollout about 22 of them),
# and CI's 2-core machine can run it slower; with the other steps' 17 or
# so, a suite near this bound would run past CI's 90 minutes anyway: it
# stops a hung suite, it is no budget. test-qemu-busy gives a loaded run about twice
# that, since a hog halves the guests' CPU and the check there is that the
# suite passes, not how fast.
QEMU_TEST_TIMEOUT ?= 70m
# QEMU_LAST runs after the rest of the suite, inside the same timeout:
# TestNoCloud and TestRollout, the tests with several guests at once,
# which a build beside them slows most, then run with make test's nice-19
# builds done (tools/qemu-suite.sh says more). QEMU_SKIP is left out:
# TestCluster is make test-cluster's (its network checks run in
# TestRollout's cluster).
QEMU_LAST ?= ^(TestNoCloud|TestRollout)$$
QEMU_SKIP ?= ^TestCluster$$
# QEMU_NO_RERUN: tests a hung guest does not run again (tools/qemu-suite.sh):
# TestRollout resets its hung nodes itself, and a second run of it does
# not fit in CI's time.
QEMU_NO_RERUN ?= ^TestRollout$$

## test-qemu: boots build/image-test under QEMU (TCG), one guest at a time,
## TestNoCloud and TestRollout last (QEMU_LAST), all but TestCluster
## (make test-cluster's); full log in build/qemu-tests.log,
## each VM's console in build/qemu-logs/. A run whose every failure is a
## hung guest kernel (the harness's ErrGuestStalled: a soft lockup, or a
## silent console, both seen under TCG) runs those tests
## once more (tools/qemu-suite.sh), all but QEMU_NO_RERUN's (TestRollout
## resets a hung node itself); both runs are printed, the second's
## logs end in .again. ARCH=arm64: build/arm64/image-test
## with the arm64 node images (TEST_COMPONENTS_DIR), under qemu-system-aarch64.
TEST_QEMU_DEPS := image-test update-test-images etcd test-components-node test-components-images rollout-image $(TEST_COMPONENTS)
test-qemu: $(TEST_QEMU_DEPS)
	@BERTH_IMAGE=$(ARCH_BUILD)/image-test BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) GO=$(GO) NO_RERUN='$(QEMU_NO_RERUN)' \
	  tools/qemu-suite.sh test-qemu $(ARCH_BUILD)/qemu-tests.log $(ARCH_BUILD)/qemu-logs $(QEMU_TEST_TIMEOUT) '' '$(QEMU_LAST)' '$(QEMU_SKIP)'

## test-cluster: TestCluster: two nodes on a virtual network with its
## workloads (pods, Service, DNS, NodePort, kubectl across them), which
## make test leaves out for CI's time (its network checks run in
## TestRollout); log in build/test-cluster.log, consoles in
## build/qemu-logs-cluster/.
.PHONY: test-cluster
test-cluster: $(TEST_QEMU_DEPS)
	@BERTH_IMAGE=$(ARCH_BUILD)/image-test BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) GO=$(GO) \
	  tools/qemu-suite.sh test-cluster $(ARCH_BUILD)/test-cluster.log $(ARCH_BUILD)/qemu-logs-cluster 40m '^TestCluster$$'

## test-rollout: TestRollout alone, on N nodes (default 2, as in make
## test; `make test-rollout N=3` for three, by hand: three TCG guests and
## a control plane want more than two cores); log in
## build/test-rollout.log, consoles in build/qemu-logs-rollout/.
ROLLOUT_N := $(if $(filter command line,$(origin N)),$(N),2)
.PHONY: test-rollout
test-rollout: $(TEST_QEMU_DEPS)
	@BERTH_ROLLOUT_NODES=$(ROLLOUT_N) BERTH_IMAGE=$(ARCH_BUILD)/image-test BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) GO=$(GO) NO_RERUN='$(QEMU_NO_RERUN)' \
	  tools/qemu-suite.sh test-rollout $(ARCH_BUILD)/test-rollout.log $(ARCH_BUILD)/qemu-logs-rollout 60m '^TestRollout$$'

# make test's third step: the builds beside the amd64 QEMU suite, the
# arm64 half and then the e2e suite, one at a time (-j1 here; each Go
# build fills both cores by itself). They wait (order-only) until the
# suite's own prerequisites are made: image-test is remade in every make
# (berth's binary is), and a job slot that a build's sub-make takes is
# held until that build ends. Without the wait, the cold run of
# 2026-11-29 had test-qemu wait 11 minutes for a slot, its image-test
# queued behind both builds.
.PHONY: test-build-beside-qemu
test-build-beside-qemu: | $(TEST_QEMU_DEPS)
	+$(MAKE) --no-print-directory -j1 test-build-arm64 test-build-e2e

## test-qemu-busy: test-qemu with BUSY CPU hogs (default 1) beside it at
## normal priority, to check that the suite holds on a loaded host, as
## CI's 2-core machine is (tools/busy.sh). One hog on 2 cores halves the
## guests' CPU and about doubles the suite's time, so its go test gets
## BUSY_TEST_TIMEOUT (120m). Not part of make test.
BUSY ?= 1
BUSY_TEST_TIMEOUT ?= 120m
.PHONY: test-qemu-busy
test-qemu-busy: $(TEST_QEMU_DEPS)
	+$(FIGURE) -row test-qemu-busy -- tools/busy.sh $(BUSY) $(MAKE) --no-print-directory QEMU_TEST_TIMEOUT=$(BUSY_TEST_TIMEOUT) test-qemu

## test-qemu-arm64: the arm64 image under qemu-system-aarch64 (TCG, AAVMF),
## one guest at a time:
## builds `image-test` and `disk` with ARCH=arm64, then runs the tests that
## take their platform from the image's manifest: TestBootReport (modules by
## modalias, the guest is aarch64, the root is the virtio root disk behind
## dm-verity), TestHostPrograms (the sysroot's
## iptables, nft, ipset, mkfs, mount run), TestDiskBoot's verified root
## (signed systemd-bootaa64 and UKI on linuxaa64.efi.stub under AAVMF with
## the test keys enrolled, verity root, data partition by the arm64
## mkfs.ext4), TestSecureBoot's tampered command line (AAVMF refuses the
## UKI) and TestJoin without its subtests (joins the host's amd64 control plane, runs the
## demo pod, then system_powerdown: the ACPI power button, services stopped
## in order, power off). TestPowerDown (the same power button with nothing
## running) and TestDiskBoot's second boot and corrupted root test berth's
## logic, the same on both arches: they run on amd64 only, saving 2 min of
## aarch64 TCG. Full log in build/arm64/qemu-tests.log, consoles in
## build/arm64/qemu-logs/.
## The join test's components directory (BERTH_COMPONENTS_DIR) is arm64's
## TEST_COMPONENTS_DIR, build/arm64/test-components/: links to the host's
## control plane and etcd with the arm64 node's components and images
## (TestJoin applies only install-cni).
## The cluster images those tests pull are install-cni's alone
## (ARM64_TEST_IMAGES): arm64 kube-proxy and CoreDNS, cross-built only for
## `make demo ARCH=arm64`, cost minutes cold and no test here pulls them.
ARM64_QEMU_TESTS := ^(TestBootReport|TestHostPrograms|TestDiskBoot|TestJoin|TestSecureBoot)$$/^(verified_root|tampered_command_line)$$
ARM64_TEST_COMPONENTS := $(BUILD)/arm64/test-components
ARM64_TEST_IMAGES := install-cni
# deps first, alone: under test-build's -j, runc's cross build must not
# start before the cross gcc and libseccomp are installed.
# nice 19: under make test the arm64 half builds beside the amd64 QEMU
# suite and must take only what the guests leave idle.
ARM64_TEST_BUILD = nice -n 19 $(MAKE) --no-print-directory ARCH=arm64 deps && \
  nice -n 19 $(MAKE) --no-print-directory ARCH=arm64 TEST_IMAGES='$(ARM64_TEST_IMAGES)' image-test disk test-components-dir
.PHONY: test-qemu-arm64
test-qemu-arm64:
	+$(ARM64_TEST_BUILD)
	@BERTH_IMAGE=$(BUILD)/arm64/image-test BERTH_COMPONENTS_DIR=$(ARM64_TEST_COMPONENTS) GO=$(GO) \
	  tools/qemu-suite.sh test-qemu-arm64 $(BUILD)/arm64/qemu-tests.log $(BUILD)/arm64/qemu-logs 55m '$(ARM64_QEMU_TESTS)'


## faults: the fault suite at full strength (test-qemu runs it reduced):
## kill -9 of containerd and kubelet BERTH_FAULT_KILLS times each (100),
## IMDS faults, containerd config rejected, /var and /run full, with the
## slower checks (BERTH_FAULT_FULL=1), plus the DHCP-server-gone host test;
## ends with the table of faults. Full log in build/faults.log, each VM's
## console in build/qemu-logs-faults/.
.PHONY: faults
faults: image-test
	@rm -rf $(BUILD)/qemu-logs-faults; set +e; \
	$(GO) test -count=1 -v -run 'TestDHCPServerGone' ./network > $(BUILD)/faults.log 2>&1; rc=$$?; \
	BERTH_FAULT_KILLS=$${BERTH_FAULT_KILLS:-100} BERTH_FAULT_FULL=1 BERTH_IMAGE=$(BUILD)/image-test BERTH_COMPONENTS_DIR=$(COMPONENTS_DIR) \
	  BERTH_QEMU_LOGDIR=$(BUILD)/qemu-logs-faults $(GO) test -count=1 -timeout 180m -v -run 'TestFault' ./qemu-tests >> $(BUILD)/faults.log 2>&1; rc2=$$?; set -e; \
	grep -E '^(=== RUN|\s*--- (PASS|FAIL|SKIP)|PASS|FAIL|ok |panic)|_test\.go:[0-9]+: ' $(BUILD)/faults.log | grep -v 'figure: FAULT |' || true; \
	echo; echo "=== fault table"; grep -h 'figure: FAULT | ' $(BUILD)/faults.log | sed 's/.*figure: FAULT | //' | \
	  awk -F' [|] ' '{ sub(/^fault=/, "", $$1); sub(/^action=/, "", $$2); sub(/^recover=/, "", $$3); sub(/^lost=/, "", $$4); \
	    printf "%s\n    did:     %s\n    recover: %s\n    lost:    %s\n", $$1, $$2, $$3, $$4 }'; \
	if [ $$rc -ne 0 ] || [ $$rc2 -ne 0 ]; then echo "faults: FAILED; full log: $(BUILD)/faults.log"; exit 1; fi

include components.mk

# After components.mk: its prerequisites name OCI_IMAGES_DIR.
## test-components-dir: for a foreign ARCH, TEST_COMPONENTS_DIR's links:
## the host's kube and etcd directories (the control plane stays amd64;
## the test harness finds its binaries in the subdirectories), the node's
## components, and images/ with that ARCH's pause and demo tarballs and
## the cluster images TEST_IMAGES names (default all six: install-cni,
## kube-proxy, coredns, busybox, flannel, flannel-cni-plugin;
## test-qemu-arm64 asks for fewer, and the
## test rig's clusterimages.Find takes what is there). Remade whole each
## time (links only; a rename puts it in place).
TEST_IMAGES ?= install-cni kube-proxy coredns busybox flannel flannel-cni-plugin
.PHONY: test-components-dir
ifeq ($(ARCH),amd64)
test-components-dir:
	@echo "test-components-dir: ARCH=amd64's is $(TEST_COMPONENTS_DIR) itself"
else
test-components-dir: kube etcd node-components $(addprefix $(OCI_IMAGES_DIR)/,$(addsuffix .tar,$(TEST_IMAGES)))
	@t=$(TEST_COMPONENTS_DIR); rm -rf $$t.tmp && mkdir -p $$t.tmp/images; \
	ln -s $(KUBE_DIR) $(ETCD_DIR) $$t.tmp/; ln -s $(NODE_COMPONENTS_DIR) $$t.tmp/node; \
	for i in $(TEST_IMAGES) pause demo; do ln -s $(OCI_IMAGES_DIR)/$$i.tar $$t.tmp/images/; done; \
	rm -rf $$t && mv $$t.tmp $$t
endif

## demo: the main job: a node in QEMU joins a local control plane. Builds everything, starts a local control plane (etcd,
## kube-apiserver, controller-manager, scheduler) on the host with the
## cluster's add-ons (install-cni, kube-proxy, CoreDNS) and the registry
## stand-in, boots a node in QEMU that joins it from its user data, goes Ready
## by the CNI DaemonSet, answers a Service by name from a pod, shows kubectl
## logs and debug node, prints the boot timeline and powers the node off.
## ARCH=arm64: the arm64 test image under qemu-system-aarch64, joining the
## host's amd64 control plane, with arm64 install-cni, kube-proxy, CoreDNS,
## busybox and demo images (TEST_COMPONENTS_DIR); output in build/arm64/demo.
# The demo's one node runs install-cni, kube-proxy and CoreDNS: flannel's
# images (the two-node tests') are not built for it.
DEMO_CLUSTER_IMAGES := $(addprefix $(OCI_IMAGES_DIR)/,install-cni.tar kube-proxy.tar coredns.tar busybox.tar)
demo: deps image-test etcd $(DEMO_CLUSTER_IMAGES) $(TEST_COMPONENTS)
	BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) BERTH_IMAGE=$(ARCH_BUILD)/image-test $(FIGURE) -row demo -- \
	  $(GO) run ./qemu-tests/demo -out $(ARCH_BUILD)/demo $(if $(filter amd64,$(ARCH)),-readme README.md)

## cluster: a cluster of CLUSTER_N (default 2; `make cluster N=3`) berth
## nodes on one virtual network on this machine: the control plane on the
## host with flannel, kube-proxy and CoreDNS, each node with its own
## address, instance ID, hostname, IMDS at 169.254.169.254 and
## instance-store disk (qemu-tests/cluster). Waits until every node is
## Ready, writes build/cluster/kubeconfig and says how to use it, and runs
## until Ctrl-C or `make cluster-down`, which power the nodes off in
## order. CLUSTER_FLAGS adds flags: -node-config node-b=FILE (a NodeConfig
## part for one node: labels, taints), -cni install-cni, -seed nocloud
## (machines off EC2: each node's user data on a NoCloud seed, no IMDS;
## -seed nocloud-iso for an iso9660 seed on a CD drive),
## -exit-when-ready (power off once Ready; figures in
## build/cluster/figures.json). Not part of make test.
CLUSTER_N := $(if $(filter command line,$(origin N)),$(N),2)
.PHONY: cluster cluster-down
cluster: deps image-test etcd $(DEMO_CLUSTER_IMAGES) $(addprefix $(OCI_IMAGES_DIR)/,flannel.tar flannel-cni-plugin.tar) $(TEST_COMPONENTS)
	BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) BERTH_IMAGE=$(ARCH_BUILD)/image-test $(GO) run ./qemu-tests/cluster -n $(CLUSTER_N) -out $(ARCH_BUILD)/cluster $(CLUSTER_FLAGS)

## cluster-down: stops the cluster `make cluster` runs (SIGTERM to the pid
## in build/cluster/cluster.pid) and waits until its nodes are off.
cluster-down:
	@f=$(ARCH_BUILD)/cluster/cluster.pid; if [ ! -f $$f ]; then echo "cluster-down: no cluster runs ($$f is absent)"; exit 0; fi; \
	pid=$$(cat $$f); if ! kill -TERM "$$pid" 2>/dev/null; then echo "cluster-down: pid $$pid is gone"; rm -f $$f; exit 0; fi; \
	echo "cluster-down: powering the nodes off (pid $$pid)"; \
	for i in $$(seq 300); do kill -0 "$$pid" 2>/dev/null || { echo "cluster-down: done"; exit 0; }; sleep 1; done; \
	echo "cluster-down: pid $$pid still runs after 300 s"; exit 1

## conformance: Kubernetes' own e2e suite, offline, against berth nodes
## (qemu-tests/conformance): a cluster of CONFORMANCE_N nodes (default 1;
## `make conformance N=2`) as `make cluster` brings it up, with the e2e
## images served beside the cluster's; e2e.test under ginkgo (PROCS
## processes, default 4) with --provider=skeleton, FOCUS (default
## [NodeConformance] on one node, [Conformance] on two or more, which
## needs them; or FOCUS_FILE, a file holding it) and SKIP, and
## the specs that cannot pass here skipped by name from qemu-tests/conformance/skips.yaml, each with its
## reason. Writes the JUnit report and the logs under build/conformance/,
## prints passed, failed and skipped with each failure's first line, and
## rewrites docs/conformance.md unless FOCUS or SKIP was given. TIMEOUT
## (ginkgo --timeout, default 4h) bounds the suite: when it runs out,
## the spec then running fails as timed out, those not yet run are
## counted as not reached (apart from the suite's own skips, which give
## a reason), and the rest stands. RERUN=JUNIT (an earlier run's
## junit_01.xml) runs again just the specs it says failed or never
## started, into build/conformance-rerun/: to tell a spec that failed
## under load from a bug. RERUN may also be a part's record
## (docs/conformance-parts/*.json, which outlives build/): its failed and
## unreached specs, less those passed run again since. RERUN may name
## several files (a run's parts' records: RERUN='docs/conformance-parts/
## Conformance-part-*-of-2.json'): one cluster runs all their specs. A
## rerun of a part's report or record is recorded with the part (its own
## specs' outcomes only), and the doc shows how each failure went run
## again; any other rerun leaves the doc alone. RERUN_SKIPPED=1 also
## runs again the specs the suite skipped at run time (a skip the rig
## caused, and no longer does), and the doc says how each went.
## SHARD=K/N runs part K of N of the focus's specs (every Nth, from the Kth, of those
## e2e.test lists), each part with its own cluster, into
## build/conformance-shards/shard-K-of-N/: for a run longer than the time
## there is (the two-node [Conformance] run, about 3.5 hours here, in two
## parts of under two); each part, when it ends, records its result in
## docs/conformance-parts/ (commit it: a part run in one session, or on
## one machine, counts with the others run elsewhere, its build/ gone)
## and rewrites the doc from the parts recorded so far, naming those not
## yet run. SELECTION=FILE (qemu-tests/conformance/wider.yaml: the
## node's and the network's specs beyond [Conformance], in parts: `make
## conformance N=2 PROCS=2 SELECTION=qemu-tests/conformance/wider.yaml
## SHARD=K/3`) runs the specs the file selects, a focus less rules that
## each give their reason, instead of FOCUS; its output goes under
## build/conformance-wider-shards/ (for wider.yaml) and the doc's section,
## with the rules and their counts, is named for the file.
## Not part of make test (its subset is: test-conformance).
CONFORMANCE_N := $(if $(filter command line,$(origin N)),$(N),1)
FOCUS ?= $(if $(filter 1,$(CONFORMANCE_N)),\[NodeConformance\],\[Conformance\])
SKIP  ?=
PROCS ?= 4
CONFORMANCE_DOC := $(if $(RERUN)$(if $(FOCUS_FILE)$(filter command line environment,$(origin FOCUS) $(origin SKIP)),,x),-doc docs/conformance.md -parts docs/conformance-parts)
# FOCUS_FILE: a file holding the focus, for one make cannot carry on its
# command line (a pattern of whole spec names ends in `$`, which make
# would expand).
CONFORMANCE_FOCUS = $(if $(SELECTION),$(if $(wildcard $(SELECTION)),-selection '$(SELECTION)',$(error SELECTION=$(SELECTION): no such file)),$(CONFORMANCE_FOCUS_ONLY))
CONFORMANCE_FOCUS_ONLY = $(if $(FOCUS_FILE),$(if $(wildcard $(FOCUS_FILE)),-focus "$$(cat '$(FOCUS_FILE)')",$(error FOCUS_FILE=$(FOCUS_FILE): no such file)),-focus '$(FOCUS)')
CONFORMANCE_DEPS := deps image-test etcd $(DEMO_CLUSTER_IMAGES) $(addprefix $(OCI_IMAGES_DIR)/,flannel.tar flannel-cni-plugin.tar) $(TEST_COMPONENTS) \
  e2e e2e-images e2e-repo-list
# $(call CONFORMANCE_RUN,OUT,FLAGS[,PREFIX]): the cluster command built
# into OUT, then the runner (behind PREFIX), its output under OUT. A
# whole one-node run of the default focus times itself into
# docs/testing.md (CONFORMANCE_FIGURE).
CONFORMANCE_FIGURE = $(if $(and $(CONFORMANCE_DOC),$(filter 1,$(CONFORMANCE_N))),$(if $(SHARD),,$(FIGURE) -row conformance --))
CONFORMANCE_RUN = @mkdir -p $(1) && $(GO) build -o $(1)/cluster-cmd ./qemu-tests/cluster && \
  $(3) $(GO) run ./qemu-tests/conformance -cluster $(1)/cluster-cmd -e2e $(E2E_DIR) -kubectl $(KUBE_DIR)/kubectl \
  -repo-list $(E2E_REPO_LIST) -e2e-images $(E2E_IMAGES_DIR) -components $(TEST_COMPONENTS_DIR) -image $(ARCH_BUILD)/image-test \
  -procs $(PROCS) -out $(1) $(2)
.PHONY: conformance test-conformance
# A selection's runs have a folder of their own: its parts are not the
# focus's of the same number.
CONFORMANCE_OUT = $(ARCH_BUILD)/conformance$(if $(SELECTION),-$(basename $(notdir $(SELECTION))))
conformance: $(CONFORMANCE_DEPS)
	$(call CONFORMANCE_RUN,$(CONFORMANCE_OUT)$(if $(RERUN),-rerun,$(if $(SHARD),-shards)),-n $(CONFORMANCE_N) $(if $(RERUN),$(foreach f,$(RERUN),$(foreach g,$(or $(wildcard $(f)),$(f)),-rerun '$(abspath $(g))'))$(if $(RERUN_SKIPPED), -rerun-skipped),$(CONFORMANCE_FOCUS)) -skip '$(SKIP)' $(if $(SHARD),-shard '$(SHARD)') $(if $(TIMEOUT),-timeout $(TIMEOUT)) $(CONFORMANCE_DOC),$(CONFORMANCE_FIGURE))

## conformance-merge: runs nothing; records in docs/conformance-parts/
## the parts of a SHARD=K/SHARDS run (SHARDS, default 2) of FOCUS (N=2:
## [Conformance]) or SELECTION there are under build/conformance-shards/
## (build/conformance-SELECTION-shards/) and not yet
## recorded there, and rewrites docs/conformance.md's section from the
## parts recorded, naming each part not yet run (a part does both itself
## when it ends; this is for a part run by an older runner, or whose
## record was lost).
.PHONY: conformance-merge
conformance-merge: e2e
	$(GO) run ./qemu-tests/conformance -e2e $(E2E_DIR) -out $(CONFORMANCE_OUT)-shards -merge $(or $(SHARDS),2) $(CONFORMANCE_FOCUS) -doc docs/conformance.md -parts docs/conformance-parts

## test-conformance: make test's slice of the suite, the specs
## qemu-tests/conformance/subset.yaml names (each area of a pod's life on
## the node: lifecycle, probes, hooks, volumes, security contexts,
## sysctls, logs, exec, image pulls, the pod network...), on one node;
## every one must pass, and a name e2e.test no longer has fails it.
## Its node's pods are on install-cni's bridge, as every one-node QEMU
## test's (flannel's pulls and flanneld cost minutes under TCG, and
## TestRollout checks flannel across two nodes).
## Output under build/conformance-subset/. Bounded for CI: the cluster
## must be up within 15 minutes and the specs done within 25 (about 3 and
## 9 on a loaded 2-core host).
test-conformance: $(CONFORMANCE_DEPS)
	$(call CONFORMANCE_RUN,$(ARCH_BUILD)/conformance-subset,-n 1 -cni install-cni -subset qemu-tests/conformance/subset.yaml -up-timeout 15m -timeout 25m)

## bench: boot the test image N times (default 5) without config and N times
## joining a local control plane, one at a time; print min, median and max per
## phase and for kernel → kubelet exec; write build/bench/bench.json. With
## BASE=old.json, show each median's change. Not part of make test.
N ?= 5
bench: deps image-test etcd $(TEST_COMPONENTS)
	BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) BERTH_IMAGE=$(ARCH_BUILD)/image-test $(GO) run ./qemu-tests/bench -n $(N) -out $(ARCH_BUILD)/bench $(if $(BASE),-base $(BASE))

## soak: boot the test image joining a local control plane and let berth
## supervise for DURATION (default 1h), reading its live figures (RSS and its
## split, live heap, goroutines, open files) every minute; write
## build/soak/soak.json and print start, min, median, max, end and the slope
## per hour of each. SOAK_FLAGS adds flags: -join=false boots with no config,
## -append 'GOGC=25' adds to the kernel command line. Not part of make test.
DURATION ?= 1h
soak: deps image-test etcd $(TEST_COMPONENTS)
	BERTH_COMPONENTS_DIR=$(TEST_COMPONENTS_DIR) BERTH_IMAGE=$(ARCH_BUILD)/image-test $(GO) run ./qemu-tests/soak -duration $(DURATION) -out $(ARCH_BUILD)/soak $(SOAK_FLAGS)

## clean: removes build/ (everything the targets made).
clean:
	rm -rf $(BUILD)
