# sweepgate: build, test, lint, run.
#
#   make build   bin/sweepgate, version VERSION (the VERSION file)
#   make image   the container image sweepgate:VERSION (needs Docker),
#                labelled with VERSION and the commit (REVISION)
#   make test    unit and integration tests (race detector), then the e2e
#                tests against a real MinIO, CNCF distribution registry and
#                crane (builds bin/minio, bin/registry, bin/crane, and
#                bin/helm and bin/kubecheck for the Helm chart's test, once), then
#                one short seeded chaos campaign, then every fuzz target for
#                TEST_FUZZTIME
#   make chaos   seeded chaos campaigns for CHAOS_TIME (default 30m),
#                stopping at the first violation (CHAOS_SEED=N: that one)
#   make lint    gofmt, go vet, staticcheck (with every build tag), and the
#                file, function and package size check (scripts/sizecheck)
#   make run     MinIO and sweepgate on loopback, for trying it out
#   make bench   gateway vs direct MinIO benchmarks, and sweepgate's passes vs
#                `registry garbage-collect` on a real registry
#   make fuzz    each Fuzz target for FUZZTIME (default 30s), then the
#                differential suite for SWEEPGATE_DIFFERENTIAL_REQUESTS
#                (default 50000) generated requests
#   make clean   remove bin/, .data/ and test leftovers
#
# Plain `go test ./...` is the quick loop: unit tests only, no server
# started and no process run. The tests against a real MinIO or etcd
# (embedded or a process) carry the build tag integration, and the suites
# that start whole systems theirs: e2e (./e2e), chaos (./chaos) and bench
# (./bench); the targets below pass the tag each suite needs.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build
.DELETE_ON_ERROR:

GO ?= go

# The version of bin/sweepgate and the image (`sweepgate version`,
# sweepgate_build_info): the VERSION file, the version this tree builds,
# which the binary embeds anyway; `make build VERSION=...` overrides it
# (-X main.version wins over the file). The commit is stamped too
# (REVISION, -X main.revision), since Go records it only where it may look
# at the checkout (not with -buildvcs=false, not in a git worktree, whose
# .git is a file); the image's build context has no .git, so `make image`
# passes it as a build argument. A tree with uncommitted changes still
# names HEAD.
VERSION ?= $(shell cat VERSION)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(REVISION)

# The MinIO the e2e tests and `make run` use. It serves the S3 API the tests
# need; building it takes about four minutes on two cores, once.
MINIO_MODULE := github.com/minio/minio
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
STATICCHECK_VERSION := v0.8.2

# The CNCF distribution registry (S3 storage driver) and crane that the
# registry e2e tests and benchmark run in front of sweepgate; the registry
# also runs `registry garbage-collect`, the oracle the digest sweep is
# compared with. The registry takes about six minutes to build on two cores,
# crane half a minute, once.
REGISTRY_MODULE := github.com/distribution/distribution/v3/cmd/registry
REGISTRY_VERSION := v3.1.2
CRANE_MODULE := github.com/google/go-containerregistry/cmd/crane
CRANE_VERSION := v0.22.1
# Helm, which the deploy package's integration test renders and lints the
# chart (deploy/helm/sweepgate) with; about three minutes to build on two
# cores, once.
HELM_MODULE := helm.sh/helm/v4/cmd/helm
HELM_VERSION := v4.3.2
# kubecheck validates every rendered object by decoding it strictly into
# the Kubernetes API's Go types and prometheus-operator's; it is a module of
# its own (deploy/helm/kubecheck), so that those modules stay out of
# go.mod. About forty seconds to build on two cores, once.
KUBECHECK_DIR := deploy/helm/kubecheck
# The tools the e2e tests and benchmarks run as processes.
TEST_TOOLS := bin/minio bin/registry bin/crane
# The tools the deploy package's integration tests run on the Helm chart.
CHART_TOOLS := bin/helm bin/kubecheck

# The race detector makes the e2e tests' 100 MiB transfers slow on two
# cores, and their servers are separate processes anyway: unit and
# integration packages run with -race, e2e without (SWEEPGATE_E2E_RACE=1
# builds the gateway under test with -race instead).
#
# The timeouts bound what a hung test can cost: with the MinIO build, a
# fresh CI run stays under 40 minutes even at worst (normally it takes a
# fraction of that).
UNIT_TIMEOUT ?= 10m
E2E_TIMEOUT ?= 20m
TESTFLAGS ?=
FUZZTIME ?= 30s
# make test runs every fuzz target briefly too, so a parser change that
# panics on hostile input fails the ordinary run; make fuzz runs longer.
TEST_FUZZTIME ?= 5s
# make test runs one chaos campaign with CHAOS_TEST_DURATION of workload
# (about a minute more for setup, final passes and checks); make chaos runs
# campaigns of CHAOS_DURATION each for CHAOS_TIME (see chaos/campaigns.sh).
CHAOS_TEST_DURATION ?= 60s
CHAOS_TEST_TIMEOUT ?= 8m
CHAOS_TIME ?= 30m

# The build tags: integration for the tests of each package against a real
# MinIO or etcd, and those of the suites that start whole systems. Without
# them `go test ./...` runs the unit tests alone; make lint checks the
# tagged files with all of them set.
INTEGRATION_TAGS := integration
E2E_TAGS := e2e
CHAOS_TAGS := chaos
BENCH_TAGS := bench
LINT_TAGS := $(INTEGRATION_TAGS),$(E2E_TAGS),$(CHAOS_TAGS),$(BENCH_TAGS)

.PHONY: build
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/sweepgate ./cmd/sweepgate

# The container image, with the same version, and the commit it was built
# from (its binary's commit and the image's OCI labels).
.PHONY: image
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t sweepgate:$(VERSION) .

bin/minio:
	@echo "Building MinIO $(MINIO_VERSION) into bin/ (once; about four minutes on two cores)..."
	GOBIN=$(CURDIR)/bin $(GO) install $(MINIO_MODULE)@$(MINIO_VERSION)

bin/registry:
	@echo "Building the distribution registry $(REGISTRY_VERSION) into bin/ (once; about six minutes on two cores)..."
	GOBIN=$(CURDIR)/bin $(GO) install $(REGISTRY_MODULE)@$(REGISTRY_VERSION)

bin/crane:
	GOBIN=$(CURDIR)/bin $(GO) install $(CRANE_MODULE)@$(CRANE_VERSION)

bin/helm:
	@echo "Building Helm $(HELM_VERSION) into bin/ (once; about three minutes on two cores)..."
	GOBIN=$(CURDIR)/bin $(GO) install $(HELM_MODULE)@$(HELM_VERSION)

# Rebuilt when its source or module files change.
bin/kubecheck: $(wildcard $(KUBECHECK_DIR)/*.go) $(KUBECHECK_DIR)/go.mod $(KUBECHECK_DIR)/go.sum
	$(GO) build -C $(KUBECHECK_DIR) -o $(CURDIR)/bin/kubecheck .

bin/staticcheck:
	GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Both suites run even when the first fails, so one run shows everything;
# the target fails if either did. TestMakeRun (e2e) runs bin/sweepgate, which
# is why test builds it; the deploy package's tests render, lint and
# validate the Helm chart with bin/helm and bin/kubecheck.
.PHONY: test
test: build $(TEST_TOOLS) $(CHART_TOOLS)
	@status=0; \
	echo "== unit and integration tests (-race)"; \
	$(GO) test -race -tags $(INTEGRATION_TAGS) -count=1 -timeout $(UNIT_TIMEOUT) $(TESTFLAGS) ./... || status=1; \
	echo "== e2e tests (real MinIO, sweepgate binary, real clients, registry and crane)"; \
	$(GO) test -tags $(E2E_TAGS) -count=1 -timeout $(E2E_TIMEOUT) $(TESTFLAGS) ./e2e/ || status=1; \
	echo "== e2e multipart, reclaim, digest and failover tests over $(E2E_SHARDS) etcd shards"; \
	$(E2E_SHARDS_TEST) || status=1; \
	echo "== chaos campaign ($(CHAOS_TEST_DURATION) of workload under faults; its seed is printed) and the cases campaigns found"; \
	CHAOS_DURATION=$(CHAOS_TEST_DURATION) SWEEPGATE_BIN=$(CURDIR)/bin/sweepgate \
		$(GO) test -tags $(CHAOS_TAGS) -count=1 -v -timeout $(CHAOS_TEST_TIMEOUT) $(TESTFLAGS) ./chaos/ || status=1; \
	echo "== fuzz targets, $(TEST_FUZZTIME) each"; \
	FUZZTIME=$(TEST_FUZZTIME) GO=$(GO) scripts/fuzz.sh || status=1; \
	exit $$status

.PHONY: test-unit
test-unit: bin/minio $(CHART_TOOLS)
	$(GO) test -race -tags $(INTEGRATION_TAGS) -count=1 -timeout $(UNIT_TIMEOUT) $(TESTFLAGS) ./...

.PHONY: test-e2e
test-e2e: build $(TEST_TOOLS)
	$(GO) test -tags $(E2E_TAGS) -count=1 -timeout $(E2E_TIMEOUT) $(TESTFLAGS) ./e2e/

# The e2e tests of multipart sessions, the reclaimer, the digest layout and
# failover again, with every gateway over E2E_SHARDS etcd shards and each
# test's buckets spread over them (SWEEPGATE_E2E_SHARDS, docs/testing.md).
E2E_SHARDS ?= 3
E2E_SHARDS_RUN := ^(TestMultipart|TestSessions.*|TestRaceModel|TestReclaim(PartStreamingPastGrace|PartAroundGatewayRevertsMark|ClockOfAGatewayBehind|CrashAfterDeleteIntent|Election|Passes)|TestDigest.*|TestMultiNode)$$
E2E_SHARDS_TEST = SWEEPGATE_E2E_SHARDS=$(E2E_SHARDS) $(GO) test -tags $(E2E_TAGS) -count=1 -timeout $(E2E_TIMEOUT) -run '$(E2E_SHARDS_RUN)' $(TESTFLAGS) ./e2e/

.PHONY: test-e2e-shards
test-e2e-shards: build $(TEST_TOOLS)
	$(E2E_SHARDS_TEST)

# Seeded chaos campaigns one after another for CHAOS_TIME, stopping at the
# first that finds a violation; CHAOS_SEED=N runs that seed once (with the
# CHAOS_DURATION and CHAOS_CLIENTS it printed). Logs go to .data/chaos/.
.PHONY: chaos
chaos: build bin/minio
	CHAOS_TIME=$(CHAOS_TIME) CHAOS_TAGS=$(CHAOS_TAGS) GO=$(GO) SWEEPGATE_BIN=$(CURDIR)/bin/sweepgate chaos/campaigns.sh

# sizecheck fails on a Go file over 600 lines, a function over 100 (a
# table excepted) or a package over 25 non-test files that does not say
# why on a "// Size:" line.
.PHONY: lint
lint: bin/staticcheck
	@files=$$(find . -name '*.go' -not -path './bin/*' -not -path './.data/*'); \
	unformatted=$$(gofmt -l $$files); \
	if [[ -n $$unformatted ]]; then echo "gofmt: these files need formatting (gofmt -w):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags $(LINT_TAGS) ./...
	bin/staticcheck -tags $(LINT_TAGS) ./...
	$(GO) vet -C $(KUBECHECK_DIR) ./...
	cd $(KUBECHECK_DIR) && $(CURDIR)/bin/staticcheck ./...
	$(GO) run ./scripts/sizecheck

.PHONY: bench
bench: build $(TEST_TOOLS)
	$(GO) test -tags $(BENCH_TAGS) -run '^$$' -bench . -timeout 60m ./bench/...

.PHONY: run
run: build bin/minio
	scripts/run.sh

# The fuzz targets and the differential suite live in untagged test files
# (the tagged suites have none), so neither needs -tags.
.PHONY: fuzz
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh
	$(MAKE) --no-print-directory bin/minio && SWEEPGATE_DIFFERENTIAL_REQUESTS=$${SWEEPGATE_DIFFERENTIAL_REQUESTS:-50000} $(GO) test -tags $(INTEGRATION_TAGS) -count=1 -timeout 60m -v -run '^TestDifferentialOneMeaning$$' ./gateway/

.PHONY: clean
clean:
	rm -rf bin .data coverage.out coverage.html *.coverprofile bench/results.json
	$(GO) clean -testcache
