# berth: build, image, tests and demo. Everything the targets need is
# installed by `make deps` (apt packages) and cached under build/.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
BUILD     := $(CURDIR)/build
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/berth-node/berth/version.Version=$(VERSION)
APT_PKGS  := qemu-system-x86 cpio erofs-utils busybox-static xfsprogs e2fsprogs iproute2 libseccomp-dev
export GOFLAGS := -mod=mod

.PHONY: deps build image test test-unit test-qemu lint demo clean

## deps: install the apt packages the build and tests need (once; stamped).
deps: $(BUILD)/.deps-stamp
$(BUILD)/.deps-stamp:
	@mkdir -p $(BUILD)
	@missing=""; for p in $(APT_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

## build: the static berth binary at build/berth.
build:
	@mkdir -p $(BUILD)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BUILD)/berth ./init

## lint: gofmt and go vet; any finding fails.
lint:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt -l found:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## test: everything, in order: lint, unit and host tests, QEMU tests.
test: deps lint test-unit test-qemu

test-unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /qemu-tests)

test-qemu: image
	$(GO) test -count=1 -timeout 45m -v ./qemu-tests/... 2>&1 | tee $(BUILD)/qemu-tests.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)' || true; \
	grep -qE '^(FAIL|panic)' $(BUILD)/qemu-tests.log && exit 1 || true

clean:
	rm -rf $(BUILD)
