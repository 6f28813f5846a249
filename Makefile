# af — build, test, demo. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export CGO_ENABLED ?= 0

GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/antifailure/af/version.Version=$(VERSION) -X github.com/antifailure/af/version.Commit=$(COMMIT)
# Packages of af itself: the example app is its own module, tested on its own.
PKGS      := ./...
FUZZTIME  ?= 5m
# ROUNDS: how many turns each figure of bench-sidecar (HTTP and DNS) is the median of.
ROUNDS ?= 3
# Minimizing each new input for up to a minute (the default) starves the search itself.
FUZZFLAGS ?= -fuzzminimizetime 100x
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12

.PHONY: help build engine-image deps test unit integration conformance k8s-conformance lint generate check-generated bench bench-sidecar bench-app bench-up bench-handoff bench-publish fuzz fuzz-sidecar demo clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build the static af binary into bin/af
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/af ./cmd/af
	@if command -v ldd >/dev/null && ldd $(BIN)/af >/dev/null 2>&1; then echo "bin/af is not static" >&2; exit 1; fi
	@echo "built $(BIN)/af ($(VERSION))"

deps: ## install the Debian packages the tests use (only what is missing)
	@./hack/deps.sh test

engine-image: build ## write the engine image: bin/engine-image.tar (docker archive) and bin/engine-oci/
	rm -rf $(BIN)/engine-oci
	$(BIN)/af engine-image --tar $(BIN)/engine-image.tar --oci $(BIN)/engine-oci

test: ## everything CI runs: lint, generated files, unit and integration tests; every phase timed and counted, any unexpected skip fails (hack/test.sh)
	@./hack/test.sh

unit: ## go test (with -race) over af and the example app, counted and timed: make test's unit stage (internal/testrun/plan.go)
	@. hack/lib.sh; bin/testrun test -stage unit

integration: ## the real test cluster: bring it up, run the cluster tests and conformance, take it down (always): make test's integration stage
	@. hack/lib.sh; bin/testrun test -stage integration

test-plan: ## print make test's plan (internal/testrun/plan.go): every phase, in order, and what runs beside what
	@. hack/lib.sh; bin/testrun test -n

conformance: ## the conformance roster and startup proof on the local test cluster: bin/conformance-report.jsonl, then the verdict
	./hack/conformance.sh

k8s-conformance: ## the same on a disposable k3d cluster (needs Docker and a network; AF_K8S_CONFORMANCE_KEEP=1 keeps it)
	./hack/k8s-conformance.sh

lint: check-generated ## gofmt, go vet, actionlint on the workflows, shellcheck on the scripts
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet $(PKGS)
	cd examples/shop && $(GO) vet ./...
	$(GO) run $(ACTIONLINT) -no-color .github/workflows/*.yml
	shellcheck hack/*.sh .ci/run
	./hack/test-k8s-conformance.sh

generate: ## regenerate manifest/af.schema.json, docs/errors.md, docs/settings.md and version/engine_gen.go
	$(GO) run ./internal/gen .

check-generated: ## fail when a generated file is stale
	@tmp=$$(mktemp -d); mkdir -p $$tmp/manifest $$tmp/docs; \
	  mkdir -p $$tmp/version; $(GO) run ./internal/gen $$tmp >/dev/null; \
	  for f in manifest/af.schema.json docs/errors.md docs/settings.md version/engine_gen.go; do \
	    cmp -s $$tmp/$$f $$f || { echo "$$f is stale: run 'make generate'"; rm -rf $$tmp; exit 1; }; \
	  done; rm -rf $$tmp

bench: ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

bench-sidecar: ## the sidecar next to direct, squid, tinyproxy and dnsmasq: prints the table
	@./hack/deps.sh bench
	AF_BENCH=1 AF_BENCH_ROUNDS=$(ROUNDS) $(GO) test -count=1 -timeout 30m -run TestBenchSidecarTable -v ./sidecar/

fuzz: ## fuzz the manifest parser for FUZZTIME (default 5m)
	$(GO) test ./manifest -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) $(FUZZFLAGS)

fuzz-sidecar: ## fuzz the sidecar's DNS handler, ClientHello and request parsing, FUZZTIME each
	$(GO) test ./sidecar/dnsserver -run '^$$' -fuzz '^FuzzAnswer$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS)
	$(GO) test ./sidecar/tlshello -run '^$$' -fuzz '^FuzzClientHello$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS)
	$(GO) test ./sidecar/proxy -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS)

bench-app: ## the App's webhook server under load on loopback next to a bare net/http handler: prints the table
	AF_BENCH=1 $(GO) test -count=1 -timeout 10m -run TestBenchAppTable -v ./app/

# bench-up: the test cluster with kube-router, the engine and the example's images imported
# (hack/shop-images.sh, which also exports the gate's and the ingress controller's addresses for
# af), then the table (internal/benchup). RUNS (default 3) rounds; DENY=drop|reject: how the
# enforcer answers a denied packet, for the run.
bench-up: build ## af up/down of the example next to kubectl apply+wait of the same Deployments (local cluster; DENY=drop|reject: how the enforcer answers; ENFORCER=kube-router|kube-network-policies)
	@. hack/lib.sh; afcluster ensure -enforcer $(ENFORCER) >/dev/null; \
	  af=$$PWD/$(BIN)/af work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; . hack/shop-images.sh >/dev/null; \
	  AF_BENCH=1 AF_BENCH_IMAGES="web=$$web_image worker=$$worker_image" \
	  $(GO) test -count=1 -timeout 60m -run '^TestBenchUpTable$$' -v ./internal/benchup/

bench-handoff: ## the kubelet's handoff from a gate to the application: init container against native sidecar (local cluster; PODS, default 10)
	@. hack/lib.sh; afcluster ensure -enforcer $(ENFORCER) >/dev/null; \
	  AF_BENCH=1 $(GO) test -count=1 -timeout 20m -run '^TestBenchHandoffTable$$' -v ./internal/benchup/

bench-publish: build ## a cold publish to the local registry by af next to crane push of the same image
	@./hack/bench-publish.sh

demo: build ## a local cluster, the example up (probe verdict, status, its web answering), then down
	@./hack/demo.sh

clean: ## remove build output
	rm -rf $(BIN)

-include testcluster/cluster.mk
