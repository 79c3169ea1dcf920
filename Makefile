# gate-operator. `make help` lists the targets.

K8S_VERSION            ?= v1.37.2
CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION  ?= v2.15.0
PROMTOOL_VERSION       ?= v0.316.0

LOCALBIN       := $(CURDIR)/bin
CONTROLLER_GEN := $(LOCALBIN)/controller-gen
GOLANGCI_LINT  := $(LOCALBIN)/golangci-lint
PROMTOOL       := $(LOCALBIN)/promtool
PROMQL_REFS    := $(LOCALBIN)/promql-refs
RELEASE        := $(LOCALBIN)/release
# Tools of this repository in Go modules of their own, so the product's go.mod does not grow by
# their libraries: `go test ./...` and `go vet ./...` at the root skip them, so the targets below
# name them.
HACK_MODULES   := hack/promql-refs hack/release
ENVTEST_ASSETS := $(LOCALBIN)/k8s/$(K8S_VERSION)
GO_TEST_FLAGS  ?= -race -count=1 -timeout 20m

export KUBEBUILDER_ASSETS := $(ENVTEST_ASSETS)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: tools ## Generate deepcopy code (api/**/zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: tools ## Generate CRDs into config/crd/bases and RBAC into config/rbac.
	$(CONTROLLER_GEN) crd rbac:roleName=gate-operator-manager paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: chart-sync
chart-sync: ## Regenerate the chart's CRDs, ClusterRoles and webhook configurations from config/.
	hack/sync-chart.sh

# The nocel build: gate-hook as the images ship it, without CEL, and the packages it builds with (or with nocel
# files). Only their product code builds without CEL (the tests and gatetest need it). unused and
# unparam are left to the default build: here they would flag what only the CEL files use.
NOCEL_PKGS := ./internal/gate/ ./internal/gate/toolname/ ./internal/strictjson/ ./internal/runtime/claudecode/ ./cmd/gate-hook/

.PHONY: lint
lint: tools ## Run golangci-lint (.golangci.yml) over every package, the conformance suite included, and over the nocel build.
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags nocel --tests=false --disable unused,unparam $(NOCEL_PKGS)
	@for m in $(HACK_MODULES); do echo "golangci-lint in $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...) || exit 1; done

.PHONY: verify
verify: generate manifests chart-sync lint ## Fail when generated files are stale, code is not gofmt-ed, go vet complains, or the linters do.
	@stale=$$(git status --porcelain -- api config charts); \
	if [ -n "$$stale" ]; then echo "generated files are stale; run 'make generate manifests chart-sync' and commit:"; echo "$$stale"; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-ed (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	@for m in $(HACK_MODULES); do echo "go vet -C $$m ./..."; go vet -C $$m ./... || exit 1; done

.PHONY: build
build: ## Build every package and the binaries in cmd/ into bin/.
	go build ./...
	@for d in cmd/*/; do [ -d "$$d" ] || continue; echo "building bin/$$(basename $$d)"; \
		CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/$$(basename $$d) ./$$d || exit 1; done

# The tests that run the local node (root, bin/ node components); every other package is in
# `make unit`. `make test` runs both sets in one `go test ./...`, so the packages run in parallel.
E2E_PKGS  := ./test/e2e/...
UNIT_PKGS  = $(shell go list ./... | grep -v -x -F "$$(go list $(E2E_PKGS))")

.PHONY: test
test: envtest-assets node-assets tools ## Run every test: `make unit` and `make e2e` in one go (builds the control plane, the node and the tools first if missing; the e2e test needs root).
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) hack-module-tests

.PHONY: unit
unit: envtest-assets tools ## Run every test that needs neither root nor the node: unit, fuzz seeds, envtest, install, CLI (builds the control plane and the tools first if missing).
	go test $(GO_TEST_FLAGS) $(UNIT_PKGS)
	$(MAKE) hack-module-tests

.PHONY: hack-module-tests
hack-module-tests: ## Run the tests of the tool modules under hack/ (HACK_MODULES), without the race detector: they are build and release tooling.
	@for m in $(HACK_MODULES); do echo "go test -C $$m ./..."; go test -C $$m -count=1 -timeout 10m ./... || exit 1; done

.PHONY: e2e
e2e: envtest-assets node-assets tools ## Run the tests on the local node (needs root; builds the control plane, the node and the tools first if missing).
	go test $(GO_TEST_FLAGS) $(E2E_PKGS)

.PHONY: conformance
conformance: ## Drive the artefacts through the real, pinned peer packages (npm ci into test/conformance/node_modules); Claude Code also in a sandbox pod on the local node (needs root).
	go test -tags conformance -count=1 -timeout 40m -v ./test/conformance/

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, kube-controller-manager and etcd into bin/k8s/ if missing.
	K8S_VERSION=$(K8S_VERSION) hack/build-control-plane.sh

.PHONY: node-assets
node-assets: ## Build the local node's components (kubelet, kube-proxy, kube-scheduler, containerd, CNI plugins, kube-router) into bin/ if missing; installs Debian's runc, iptables, nftables, conntrack, ipset.
	K8S_VERSION=$(K8S_VERSION) hack/build-node.sh

.PHONY: tools
tools: ## Install the pinned tools (controller-gen, helm, golangci-lint, promtool) and build promql-refs and release (hack/promql-refs, hack/release) into bin/; nothing is rebuilt that is already at its pinned version or newer than its sources.
	hack/install-tool.sh $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_GEN_VERSION)
	hack/install-tool.sh $(LOCALBIN)/helm helm.sh/helm/v4/cmd/helm v4.3.2
	hack/install-tool.sh $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint $(GOLANGCI_LINT_VERSION)
	hack/install-tool.sh $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool $(PROMTOOL_VERSION)
	hack/build-tool.sh $(PROMQL_REFS) hack/promql-refs
	hack/build-tool.sh $(RELEASE) hack/release

##@ Demo

.PHONY: demo
demo: tools ## Run gate-operator where users run it: a local cluster with a real node, the chart, the images (needs root; builds what is missing first).
	go run ./hack/demo

##@ Release

IMAGE_ARCH ?= $(shell go env GOARCH)

.PHONY: images
images: ## Build the manager and confirmer images for linux/amd64 and linux/arm64, an OCI image index each (tagged with the chart's appVersion) in the OCI image layout bin/images/oci, and print the index digests; also bin/images/*.tar (docker-archive, IMAGE_ARCH only). No container engine or registry.
	go run ./hack/images -out $(LOCALBIN)/images -arch $(IMAGE_ARCH)
