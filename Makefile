# hwk's build. `make test` is what CI runs (see .ci/run); it needs Go, and
# Node.js with npm for the PowerShell syntax check.

GO       ?= go
BIN      ?= bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X github.com/hwk-dev/hwk/pkg/version.Version=$(VERSION) -X github.com/hwk-dev/hwk/pkg/version.Commit=$(COMMIT)
STATICCHECK_VERSION := v0.7.0
STATICCHECK := $(BIN)/tools/staticcheck-$(STATICCHECK_VERSION)
# actionlint checks the GitHub Actions workflows, which cannot run here.
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(BIN)/tools/actionlint-$(ACTIONLINT_VERSION)
# goreleaser builds the releases (.goreleaser.yaml); v2.16.0 is the newest
# whose module builds with Go 1.26 from the module proxy here. It finds
# cyclonedx-gomod, which makes the SBOMs, on PATH. Its `goreleaser check`
# of the config runs before each build (release-snapshot, release-build),
# not in make lint: goreleaser takes minutes to build cold, most of what
# the gate's lint cost.
GORELEASER_VERSION := v2.16.0
GORELEASER := $(BIN)/tools/goreleaser-$(GORELEASER_VERSION)
CYCLONEDX_VERSION := v1.10.0
CYCLONEDX_DIR := $(BIN)/tools/cyclonedx-gomod-$(CYCLONEDX_VERSION)
RELEASE_PATH := $(CURDIR)/$(CYCLONEDX_DIR):$(PATH)
# nektos/act runs the workflows and the Action here (make workflows),
# pinned by hack/act/go.mod.
ACT := $(BIN)/tools/act
# kind, pinned, for the load benchmark's side-by-side figures.
KIND_VERSION := v0.32.0
KIND := $(BIN)/tools/kind-$(KIND_VERSION)

# hwk's cache, where the node image build keeps what it made and fetched.
HWK_CACHE := $${HWK_HOME:+$$HWK_HOME/cache}; cache=$${cache:-$${XDG_CACHE_HOME:-$$HOME/.cache}/hwk}

# Packages with Windows-only files, whose tests must at least compile for Windows.
WINDOWS_TEST_PKGS := ./internal/state ./internal/kubeconfig ./pkg/cmd ./cmd/hwk ./pkg/node ./drivers/... ./internal/drivers/... ./cmd/hwk-seed ./cmd/hwk-kubelet ./internal/winseed ./internal/nodeimage/winimage ./internal/format/udf ./internal/nodeimage/stage2

.PHONY: test-windows e2e-wine debian-lock workflows ci-cold ci-full nonroot test-race all build test check-ps check-ps-files action-cache fuzz unit lint cross clean node-image node-image-test e2e e2e-store up test-libvirt test-wsl2 bench-load bench-up bench-copy site docs release-snapshot release release-build release-check release-upload

all: build

# hwk, and beside it the Windows programs a Windows node image carries
# (node-image build windows looks for them in windows-amd64/ next to hwk).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/hwk ./cmd/hwk
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/windows-amd64/ ./cmd/hwk-seed ./cmd/hwk-kubelet

# esbuild and @actions/cache, for action/cache.js (see action-cache).
ACTION_CACHE_DEPS := action/cache/node_modules/esbuild

# The packages whose tests run hwk's own goroutines against each other
# over real I/O: streams and SSH sessions (node), resumable downloads and
# pulls (download, imagedist), load-image's fan-out (load), the spinner
# (ui), locks (state), the docker driver's exec streams, the disk
# writers' pipes (diskimage), the Windows kubelet wrapper and the host
# programs' stderr tee (hostexec). Only these
# run under -race: their dependencies are about 560 packages, the
# module's about 1,130, and each package under -race is compiled a
# second time. pkg/cluster's fan-out over nodes is left out: its race
# build is client-go and Kubernetes' API types again, about 400 more
# packages.
RACE_PKGS := ./pkg/node ./internal/download ./internal/nodeimage/imagedist ./internal/load ./internal/ui \
	./internal/state ./internal/drivers/docker ./internal/format/diskimage ./cmd/hwk-kubelet \
	./internal/hostexec

# The packages left out of RACE_PKGS whose tests run goroutines, under
# -race: .ci/run's "race" stage, when time allows.
RACE_LATER_PKGS := ./pkg/cluster/...
test-race:
	HWK_REQUIRE_PSCHECK=1 $(GO) test -vet=off -race -count=1 -timeout 30m $(RACE_LATER_PKGS)

# Unit tests plus the integration tests that run on this machine. The
# PowerShell hwk generates is checked by the Go tests that make it, which
# fail without the checker here, and action/cache.js by a test that fails
# without esbuild. RACE_PKGS under -race, every other package without;
# -vet=off: make lint vets every package.
# -timeout: a cold machine builds CNCF distribution's registry and a
# systemd test image inside tests, and under -race on two cores a package
# can pass Go's default ten minutes without being stuck.
# The committed .ps1 files are checked first (check-ps-files); the
# scripts hwk generates are checked by the tests that make them, which
# make test runs anyway, so it does not run check-ps's go test again.
TEST_ENV := HWK_REQUIRE_PSCHECK=1 HWK_REQUIRE_ACTION_CACHE=1 HWK_REQUIRE_DISK_ORACLES=1
test: check-ps-files $(ACTION_CACHE_DEPS)
	race=$$($(GO) list $(RACE_PKGS)) && rest=$$($(GO) list ./... | grep -vxF "$$race") && \
	$(TEST_ENV) $(GO) test -vet=off -count=1 -timeout 30m $$rest && \
	$(TEST_ENV) $(GO) test -vet=off -race -count=1 -timeout 30m $$race

# Every package's tests built for windows/amd64 and run under Wine 10, in
# a Debian trixie root that hack/wine.sh makes once and caches (Go for
# Windows too, built from the host Go's source): a table of packages and
# results, and the failures that are Wine's, each with its reason
# (hack/wintest/wine.go). Needs root; the docker driver's tests use this
# machine's engine through a loopback relay. PKGS narrows the packages
# (a regular expression of paths, e.g. PKGS='internal/state|internal/drivers/.*').
PKGS ?=
test-windows:
	$(GO) run ./hack/wintest -run '$(PKGS)'

# hwk.exe end to end under Wine against this machine's Docker engine
# (through a loopback TCP relay to its socket): doctor, up of a
# Linux-only cluster, the kubeconfig it writes read by the Linux kubectl,
# load-image, stop/start, export logs and down with nothing left; then
# hwk.exe's own build of the Linux node image through the engine, and a
# cluster from it. Needs root, a Docker engine and the node image built
# on Linux first (its kubectl, and the runc a Windows host downloads).
# WINE_RUN narrows the tests (go test -run).
WINE_RUN ?= ^TestWindowsHost
e2e-wine: build
	$(BIN)/hwk node-image build linux --source source --formats docker
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/hwk.exe ./cmd/hwk
	hack/wine.sh root >/dev/null
	HWK_E2E_WINE=1 HWK_EXE=$(CURDIR)/$(BIN)/hwk.exe $(GO) test -tags e2e -count=1 -timeout 80m -v -run '$(WINE_RUN)' ./e2e/

# Every PowerShell file in the tree, and every script hwk generates (the
# tests of each package that imports internal/testing/pscheck render them; the
# one list of all of them is internal/testing/pscatalog, whose tests also check
# that every command word names its module and that the list is
# complete), through a real PowerShell grammar (tree-sitter's, from npm,
# pinned by hack/pscheck/package-lock.json). No PowerShell runs here:
# this catches syntax and unqualified or unknown cmdlets, not wrong
# parameters.
PSCHECK := hack/pscheck/node_modules/tree-sitter-powershell
check-ps: check-ps-files
	HWK_REQUIRE_PSCHECK=1 $(GO) test -short -count=1 $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | awk '/internal\/testing\/pscheck( |$$)/ && $$1 !~ /internal\/testing\/pscheck$$/ {print $$1}')

check-ps-files: $(PSCHECK)
	node --no-deprecation hack/pscheck/check.mjs $$(git ls-files '*.ps1')

$(PSCHECK):
	@command -v npm >/dev/null || { echo "check-ps needs Node.js and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix hack/pscheck --no-audit --no-fund --loglevel=error

# action/cache.js, the Action's node image cache (GitHub's @actions/cache
# bundled by esbuild, both pinned by action/cache/package-lock.json): run
# after changing action/cache/. action/action_test.go fails while the
# committed bundle is not what this makes.
action-cache: $(ACTION_CACHE_DEPS)
	node action/cache/build.mjs

$(ACTION_CACHE_DEPS):
	@command -v npm >/dev/null || { echo "action-cache needs Node.js and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix action/cache --no-audit --no-fund --loglevel=error

# Every fuzz target (func FuzzXxx) for FUZZTIME each (default 5m), one
# after another, with a line of figures per target. Not in CI: `make test`
# runs each target's seed corpus as an ordinary test instead. Packages in
# PKGS (default ./...).
fuzz:
	hack/fuzz/run.sh $(PKGS)

# The Debian package locks of the node image and of the images' userland
# (node-images/linux/debian.lock.yaml, images/userland.lock.yaml), made
# again from the live mirror: after changing a recipe's package list, or
# when the mirror no longer serves a locked version.
debian-lock:
	$(GO) run ./hack/debianlock

# Unit tests only: no binary builds, no daemons.
unit:
	$(GO) test -short ./...

# The Linux node image, built from source through the Go module proxy, in
# every format (needs a Docker engine to configure the Debian root in).
# Cold: about half an hour on two cores; unchanged inputs: seconds.
node-image: build
	$(BIN)/hwk node-image build linux --source source

# Builds the node image (or finds it cached), checks a second build is a
# cache hit and that the root holds exactly the Debian lock's packages,
# boots the docker format in the docker driver and the qcow2 under QEMU. Then the Windows image's build with everything real but
# Windows: binaries from source for windows/amd64, the ISO read through
# UDF, a libvirt VM that boots it and powers off as Setup would (needs a
# running libvirt, see hack/libvirt.sh). And the Debian root configured
# in a libvirt VM (TCG here) instead of Docker, read back and compared
# with Docker's. CI runs it after make test.
node-image-test:
	HWK_NODE_IMAGE_TEST=1 $(GO) test -count=1 -timeout 85m -v \
		-run 'TestSecondBuildIsCached|TestRootIsTheLock|TestDockerFormatBoots|TestDiskFormats|TestWindowsImageBuild|TestVMKernel' ./pkg/nodeimage/
	# The Debian locks name exactly the packages debootstrap installs for
	# the same recipes (the resolver's oracle; as root, cached in hwk's cache).
	HWK_NODE_IMAGE_TEST=1 $(GO) test -count=1 -v -run TestLockMatchesDebootstrap ./hack/debianlock/
	# The node's locked Debian packages (the .debs the build fetched, in
	# hwk's cache), assembled in Go: each path once, and they configure
	# with one dpkg --configure -a in an unprivileged container.
	cache=$(HWK_CACHE); HWK_STAGE1_DOCKER=1 HWK_STAGE1_CACHE=$$cache/debian \
		$(GO) test -count=1 -v -timeout 30m -run 'TestStage1ConfiguresInDocker|TestNodeSetEachPathOnce' ./internal/debian/
	# The Go disk writer, checked against e2fsprogs and QEMU, on the real
	# node root.
	cache=$(HWK_CACHE); \
	tar=$$(ls -t $$cache/node-images/linux-*/rootfs.tar.gz 2>/dev/null | head -n 1); \
	[ -n "$$tar" ] || { echo "no node rootfs.tar.gz under $$cache/node-images"; exit 1; }; \
	HWK_REQUIRE_DISK_ORACLES=1 HWK_DISK_FROM_NODE_TAR=$$tar $(GO) test -count=1 -v -run TestWriteRawDiskFromNodeTar ./internal/format/diskimage/

# The libvirt driver against a real libvirtd: the API on test:///default,
# networks and volumes on qemu:///system, and a node VM booted from the
# Linux node image's qcow2 (built from source, a cache hit after
# node-image or node-image-test; under TCG where KVM does not work).
# Installs and starts libvirt when missing; needs root.
test-libvirt: build
	hack/libvirt.sh
	$(BIN)/hwk node-image build linux --source source --formats qcow2
	HWK_REQUIRE_LIBVIRT=1 HWK_LIBVIRT_BOOT_TEST=1 $(GO) test -count=1 -timeout 30m -v ./internal/drivers/libvirt/

# The WSL2 driver's node setup on Linux: the Linux node image's rootfs tar
# (from source; a cache hit after node-image or node-image-test) unpacked
# as wsl --import would, the driver's setup run in it through a chroot,
# then booted with systemd in a container (needs root and a Docker
# engine). Everything but wsl.exe itself.
test-wsl2: build
	$(BIN)/hwk node-image build linux --source source --formats tar
	HWK_WSL2_BOOT_TEST=1 $(GO) test -count=1 -timeout 20m -v -run TestNodeBootsFromRootfs ./internal/drivers/wsl2/

# End to end on the docker driver with real Kubernetes: builds hwk and the
# Linux node image (docker format, from source; a cache hit after
# node-image or node-image-test), then runs e2e/ (needs root and a Docker
# engine). Prints the time to API-ready and to all-nodes-Ready.
# E2E_RUN and E2E_SKIP narrow the tests (go test -run, -skip).
E2E_RUN ?= .
E2E_SKIP ?=
e2e: build
	$(BIN)/hwk node-image build linux --source source --formats docker
	HWK_BIN=$(CURDIR)/$(BIN)/hwk $(GO) test -tags e2e -count=1 -timeout 80m -v -run '$(E2E_RUN)' -skip '$(E2E_SKIP)' ./e2e/

# load-image from Docker's containerd image store (Docker Engine 28.5.2
# built from the module proxy by hack/dockerd-store.sh, which runs it
# beside the system's engine, in a network namespace of its own): a
# rebuilt image's save is filtered as it streams, and each node gets only
# its new layer. What needs the network (the node image, the test binary)
# is built first, outside that namespace. Root.
e2e-store: build
	$(BIN)/hwk node-image build linux --source source --formats docker
	$(GO) test -c -tags e2e -o $(BIN)/e2e.test ./e2e/
	hack/dockerd-store.sh start
	hack/dockerd-store.sh exec $(BIN)/hwk node-image build linux --source source --formats docker && \
		cd e2e && HWK_E2E_CONTAINERD_STORE=1 HWK_BIN=$(CURDIR)/$(BIN)/hwk ../hack/dockerd-store.sh exec \
		../$(BIN)/e2e.test -test.count=1 -test.timeout 30m -test.v -test.run TestLoadFromContainerdStore; \
		rc=$$?; cd $(CURDIR) && hack/dockerd-store.sh stop; exit $$rc

# The GitHub workflows and the Action, run for real with nektos/act on
# this machine, offline (hack/workflows): the publishing workflow end to
# end against a local registry, then an up from the pin it made; the
# release workflow up to its upload; the Action with nothing published;
# CI's Linux jobs. Needs root, a Docker engine and the Linux node image
# (make node-image-test builds it). WORKFLOWS narrows the tests (-run),
# WORKFLOWS_SKIP leaves some out (-skip): .ci/run leaves out
# TestCIWorkflow, whose jobs (lint, unit, cross, e2e) are its own stages.
WORKFLOWS ?= .
WORKFLOWS_SKIP ?=
workflows: build $(ACT)
	HWK_REQUIRE_WORKFLOWS=1 HWK_ACT=$(CURDIR)/$(ACT) HWK_BIN=$(CURDIR)/$(BIN)/hwk \
		$(GO) test -count=1 -timeout 80m -v -run '$(WORKFLOWS)' -skip '$(WORKFLOWS_SKIP)' ./hack/workflows/

$(ACT): hack/act/go.mod hack/act/go.sum
	cd hack/act && CGO_ENABLED=0 $(GO) build -trimpath -o $(CURDIR)/$(ACT) github.com/nektos/act

# .ci/run as on a fresh machine, without wiping this one: a fresh clone,
# empty Go, hwk and npm caches and a Docker engine of its own with an
# empty data root (hack/ci-cold.sh; root). Prints the stage table; the
# cold figure CI's budget is about.
ci-cold:
	hack/ci-cold.sh

# The node image build and hwk up, status and down as an ordinary user in
# the docker group (hack/nonroot.sh, which makes the user; root). Needs
# the node image built by root first: it copies the component binaries.
nonroot: build
	hack/nonroot.sh

# Every stage of .ci/run, with no deadline: what a bigger machine or the
# nightly workflow (.github/workflows/nightly.yml) runs.
ci-full:
	HWK_CI_DEADLINE=0 .ci/run

# The main job on a fresh Linux machine: installs what is missing, builds
# the node image when none is cached, and brings up a cluster. Arguments
# for hwk up go in ARGS.
up:
	hack/up.sh $(ARGS)

# hwk load-image beside kind load docker-image: the same ~500 MB image into
# the same node (a one-node hwk cluster labelled for kind), several
# rounds of first loads and of rebuilds (warm and cold page cache),
# medians and ratios. Needs root and a Docker engine
# and the node image (docker format). Flags for hack/benchload in ARGS
# (e.g. ARGS="-rounds 5").
bench-load: build $(KIND)
	$(BIN)/hwk node-image build linux --source source --formats docker
	$(GO) run ./hack/benchload -hwk $(BIN)/hwk -kind $(KIND) $(ARGS)

# hwk up, stop, start and down of a 1-node and a 2-node Linux cluster on
# the docker driver, N runs each: every step's and every readiness
# phase's min/median/max, each node's idle memory split by program, and
# the medians on lines a script reads (hack/benchup). Needs root, a Docker
# engine and the node image (docker format). Flags in ARGS (e.g.
# ARGS="-runs 3").
bench-up: build
	$(GO) run ./hack/benchup -hwk $(BIN)/hwk $(ARGS)

bench-copy:
	$(GO) test -run - -bench CopyTo -benchtime 5x ./pkg/node

$(KIND):
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install sigs.k8s.io/kind@$(KIND_VERSION)
	mv $(BIN)/tools/kind $(KIND)

# shellcheck also reads hack/workflows/bin: the stand-ins for act runs are
# shell named as the programs they stand for, without .sh.
lint: $(STATICCHECK) $(ACTIONLINT)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/
	GOOS=windows $(GO) vet ./...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags e2e ./e2e/
	GOOS=windows $(STATICCHECK) ./...
	$(ACTIONLINT) .github/workflows/*.yml .github/workflows/*.yaml site/static/examples/*.yml hack/workflows/testdata/*.yml
	shellcheck -S warning $$(git ls-files '*.sh' 'hack/workflows/bin/*')

# Every release archive, built here without publishing (goreleaser
# --snapshot, into dist/), then checked by hack/release's test: six
# archives with binaries for their platform, checksums, SBOMs, Scoop and
# winget manifests. RELEASE_TARGETS (os/arch ...) narrows it, e.g. to one
# archive per OS (windows/amd64 linux/amd64 darwin/arm64); the release
# workflow builds all six, and .ci/run runs that workflow under act.
RELEASE_TARGETS ?=
release-snapshot: $(GORELEASER) $(CYCLONEDX_DIR)/cyclonedx-gomod
	$(GORELEASER) check
	hack/release/config.sh $(RELEASE_TARGETS) >$(BIN)/goreleaser-snapshot.yaml
	PATH="$(RELEASE_PATH)" HWK_COMMIT=$(COMMIT) $(GORELEASER) release --snapshot --clean --config $(BIN)/goreleaser-snapshot.yaml
	HWK_RELEASE_TARGETS="$(RELEASE_TARGETS)" HWK_REQUIRE_RELEASE=1 $(GO) test -count=1 ./hack/release/

# A real release, from the tag TAG (default: HEAD's), in three steps that
# .github/workflows/release.yml runs one by one. release-build builds into
# dist/ all a tag publishes and publishes nothing (goreleaser's free
# edition cannot publish a dist/ it built before, so the upload is not
# goreleaser's); release-check checks dist/ is that tag's release, every
# file; release-upload makes the draft GitHub release of exactly the files
# hack/release/assets.sh lists, with goreleaser's changelog as its notes
# (needs the GitHub CLI, gh, with GH_TOKEN).
TAG ?= $(shell git describe --tags --exact-match 2>/dev/null)
release: release-build release-check release-upload

release-build: $(GORELEASER) $(CYCLONEDX_DIR)/cyclonedx-gomod
	@[ -n "$(TAG)" ] || { echo "release-build: HEAD has no tag (make release-snapshot builds without one)"; exit 1; }
	$(GORELEASER) check
	PATH="$(RELEASE_PATH)" HWK_COMMIT=$(COMMIT) $(GORELEASER) release --clean --skip=publish

release-check:
	@[ -n "$(TAG)" ] || { echo "release-check: no TAG and HEAD has no tag"; exit 1; }
	HWK_RELEASE_TAG=$(TAG) HWK_REQUIRE_RELEASE=1 $(GO) test -count=1 ./hack/release/

# --verify-tag: the tag must already be on GitHub (the workflow runs on its
# push), never made by gh at the default branch's head.
release-upload:
	@[ -n "$(TAG)" ] || { echo "release-upload: no TAG and HEAD has no tag"; exit 1; }
	files=$$(hack/release/assets.sh) && \
	gh release create "$(TAG)" --draft --verify-tag --title "hwk $(TAG)" --notes-file dist/CHANGELOG.md $$files

$(GORELEASER):
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)
	mv $(BIN)/tools/goreleaser $(GORELEASER)

$(CYCLONEDX_DIR)/cyclonedx-gomod:
	GOBIN=$(CURDIR)/$(CYCLONEDX_DIR) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

$(ACTIONLINT):
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv $(BIN)/tools/actionlint $(ACTIONLINT)

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/tools/staticcheck $(STATICCHECK)

# Everything builds for Windows and macOS, and the Windows-only files'
# tests compile (one go command, which links the test binaries side by
# side). make lint vets for Windows.
cross:
	GOOS=windows GOARCH=amd64 $(GO) build -trimpath ./...
	GOOS=darwin GOARCH=arm64 $(GO) build -trimpath ./...
	d=$$(mktemp -d) && GOOS=windows GOARCH=amd64 $(GO) test -c -o $$d/ $(WINDOWS_TEST_PKGS); rc=$$?; rm -rf "$$d"; exit $$rc

# The site's reference pages (every command, the cluster config), written
# from the code by hack/gendocs; its test fails when they are stale.
docs:
	$(GO) run ./hack/gendocs

# The documentation site, with Debian's hugo (apt-get install hugo).
site:
	@command -v hugo >/dev/null || { echo "make site needs Hugo (Debian: apt-get install hugo)"; exit 1; }
	cd site && hugo --quiet --destination public

clean:
	rm -rf $(BIN) site/public site/resources
