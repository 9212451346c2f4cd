# Tidings — run `make help` for the targets.
SHELL := /bin/bash
SQLC_VERSION := v1.29.0
SQLC := bin/sqlc
GOTESTSUM_VERSION := v1.13.0
GOTESTSUM := bin/gotestsum
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck
GO_PACKAGES := ./...
# The Redoc release api/docsassets holds (make docs-assets).
REDOC_VERSION := 2.5.4

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: mjml-deps ## Build bin/api, bin/worker and its one-role binaries (bin/worker-sends, -segments, -domains, -webhooks), bin/devtoken and bin/tidings (and install the MJML compiler)
	@echo "building the Go binaries into bin/ (the first build downloads and compiles the modules: a few minutes)"
	go build -o bin/api ./cmd/api
	go build -o bin/worker ./cmd/worker
	@for role in sends segments domains webhooks; do echo "go build -o bin/worker-$$role ./cmd/worker-$$role"; \
		go build -o bin/worker-$$role ./cmd/worker-$$role || exit 1; done
	go build -o bin/devtoken ./cmd/devtoken
	go build -o bin/tidings ./cmd/tidings

.PHONY: services
services: ## Make sure PostgreSQL and Redis are up (starts or installs them)
	@echo "checking PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379)"
	@scripts/ensure-services.sh

.PHONY: run
run: services build ## Build, prepare the database and start api + worker locally (MAILPIT=1: send to a local mail catcher with a web page)
	@scripts/run.sh

# Mailpit, the local mail catcher of MAILPIT=1 make run (SMTP on 1025, a
# web page on 8025); docker-compose.yml runs its image.
MAILPIT_VERSION := v1.33.1

.PHONY: mailpit
mailpit: ## Install the Mailpit mail catcher into var/bin (for MAILPIT=1 make run; needs the Go module proxy)
	@echo "installing Mailpit $(MAILPIT_VERSION) into var/bin (the first time takes a few minutes)"
	GOBIN=$(CURDIR)/var/bin go install github.com/axllent/mailpit@$(MAILPIT_VERSION)

.PHONY: browser
browser: ## Make sure a headless Chromium is installed (the browser tests; apt-get the first time)
	@scripts/ensure-browser.sh

.PHONY: docs-assets
docs-assets: ## Vendor Redoc's bundle for GET /docs into api/docsassets (REDOC_VERSION=2.5.4; needs the npm registry)
	@REDOC_VERSION=$(REDOC_VERSION) scripts/docs-assets.sh

.PHONY: mjml-deps
mjml-deps: internal/mjml/node/node_modules/.package-lock.json ## Install the pinned mjml npm package (npm ci)

internal/mjml/node/node_modules/.package-lock.json: internal/mjml/node/package.json internal/mjml/node/package-lock.json
	@command -v node >/dev/null || { echo "node is required for MJML (apt-get install nodejs npm)"; exit 1; }
	@echo "installing the pinned MJML compiler (npm ci; the first time takes a minute or two)"
	npm ci --prefix internal/mjml/node --no-audit --no-fund --loglevel=error
	@touch $@

# The two linters of docs/openapi.json and the TypeScript client's
# packages, pinned by their package-lock.json files.
.PHONY: lint-deps
lint-deps: tools/lint/node_modules/.package-lock.json

tools/lint/node_modules/.package-lock.json: tools/lint/package.json tools/lint/package-lock.json
	@command -v node >/dev/null || { echo "node is required for the OpenAPI linters (apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix tools/lint --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: ts-client-deps
ts-client-deps: clients/ts/node_modules/.package-lock.json ## Install the TypeScript client's pinned packages (openapi-typescript, openapi-fetch, typescript)

clients/ts/node_modules/.package-lock.json: clients/ts/package.json clients/ts/package-lock.json
	@command -v node >/dev/null || { echo "node is required for the TypeScript client (apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix clients/ts --no-audit --no-fund --loglevel=error
	@touch $@

# Redocly CLI (recommended-strict: warnings fail) and Spectral (spectral:oas,
# any finding fails); the waivers and their reasons are in tools/lint.
.PHONY: lint-openapi
lint-openapi: lint-deps ## Lint docs/openapi.json with Redocly CLI and Spectral: 0 errors, 0 warnings
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true tools/lint/node_modules/.bin/redocly lint docs/openapi.json \
		--config tools/lint/redocly.yaml --format=summary
	tools/lint/node_modules/.bin/spectral lint docs/openapi.json --ruleset tools/lint/.spectral.yaml --fail-severity=hint

.PHONY: test
test: services tools mjml-deps browser lint-deps ts-client-deps ## vet, staticcheck, gofmt, generated-code check and go test -race
	go vet $(GO_PACKAGES)
	$(STATICCHECK) $(GO_PACKAGES)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(SQLC) diff || (echo "generated code is stale: run make generate" && exit 1)
	@$(MAKE) --no-print-directory client-diff
	@$(MAKE) --no-print-directory lint-openapi
	@# -timeout 30m: go test's 10 minutes is too short for the api package under -race on a busy 2-core machine.
	@echo "go test -race: building the race binaries takes a few minutes the first time; then one line per package"
	$(GOTESTSUM) --format pkgname-and-test-fails --format-hide-empty-pkg -- -race -count=1 -timeout 30m $(GO_PACKAGES)

# Every fuzz target, as package:target. make fuzz runs each in turn (Go
# fuzzes one target per go test invocation); their seed corpora (f.Add and
# testdata/fuzz/) run as ordinary tests in make test.
FUZZ_TARGETS := \
	./internal/sequences/definition:FuzzParseDefinition \
	./internal/rules:FuzzParseRule \
	./internal/storable:FuzzJSON \
	./api:FuzzDecodeBody \
	./internal/sendgridevents:FuzzParse \
	./internal/tracking:FuzzParseToken \
	./internal/tracking:FuzzTokenTamper \
	./internal/tracking:FuzzRewrite \
	./internal/render/sanitize:FuzzSanitize \
	./internal/render/sanitize:FuzzSanitizeMJML \
	./internal/render/sanitize:FuzzMayNeedSanitize \
	./internal/render/sanitize:FuzzSanitizeRender \
	./internal/render:FuzzSkeleton \
	./api:FuzzAPI
FUZZTIME ?= 5m
FUZZPARALLEL ?= 1
# A new interesting input is minimised for up to this long, during which
# nothing else runs; Go's default (1m) can eat a short run.
FUZZMINIMIZETIME ?= 10s

.PHONY: fuzz
fuzz: services mjml-deps ## Fuzz every target in turn: make fuzz FUZZTIME=30s FUZZPARALLEL=2 (not part of make test)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) \
			-parallel $(FUZZPARALLEL) $$pkg; \
	done

.PHONY: generate
generate: tools services mjml-deps ts-client-deps ## Regenerate sqlc code, the OpenAPI examples and docs/openapi.json (from the route table), and the Go and TypeScript clients
	$(SQLC) generate
	go test ./api -run '^TestOpenAPIExamples$$' -count=1 -update
	go test ./api -run '^TestOpenAPIFile$$' -count=1 -update
	go generate ./clients/go
	npm run --prefix clients/ts --silent generate

# The clients generated from docs/openapi.json must be the ones committed
# (TestOpenAPIFile checks that the file is the served document, and
# TestOpenAPIExamples that its examples are what the service answers).
.PHONY: client-diff
client-diff: ts-client-deps
	@tmp=$$(mktemp -d) && sed "s|^output: .*|output: $$tmp/client.gen.go|" clients/go/oapi-codegen.yaml > $$tmp/config.yaml && \
		go tool oapi-codegen -config $$tmp/config.yaml docs/openapi.json && \
		cmp -s $$tmp/client.gen.go clients/go/client.gen.go; st=$$?; rm -rf $$tmp; \
		if [ $$st -ne 0 ]; then echo "clients/go is stale: run make generate"; exit 1; fi
	@tmp=$$(mktemp -d) && clients/ts/node_modules/.bin/openapi-typescript docs/openapi.json -o $$tmp/schema.d.ts --silent && \
		cmp -s $$tmp/schema.d.ts clients/ts/src/schema.d.ts; st=$$?; rm -rf $$tmp; \
		if [ $$st -ne 0 ]; then echo "clients/ts is stale: run make generate"; exit 1; fi

.PHONY: bench
bench: services mjml-deps ## Run the Go benchmarks
	go test -run '^$$' -bench . -benchmem $(GO_PACKAGES)

.PHONY: bench-http
bench-http: services mjml-deps ## HTTP load: authenticated GET /api/api-keys vs a bare fiber handler (docs/benchmarks.md)
	@bench/run-auth.sh

.PHONY: bench-events
bench-events: services mjml-deps ## HTTP load: POST /api/events over many tenants vs the same record call straight on pgx (docs/benchmarks.md)
	@bench/run-events.sh

.PHONY: bench-import
bench-import: services build ## Contact import of 1,000,000 CSV rows end to end against a bare COPY of the file, and another tenant's GET latency meanwhile; the worker in its own process (IMPORT_FLAGS='-rows 100000', or '-worker-bin= -parts 1 -cpuprofile f' in one process; docs/benchmarks.md)
	go run ./bench/importbench -worker-bin bin/worker $(IMPORT_FLAGS)

.PHONY: bench-live
bench-live: services ## Live segments: event ingest and contact update beside 10 live segments (ratios, fail below 0.7), the tick at 100,000 and 1,000,000 contacts (LIVE_TICK_N; fails above 2x), write-to-membership p50/p99 at 1,000 writes/s (LIVE_LATENCY_RATE, LIVE_LATENCY_SECONDS) (docs/benchmarks.md)
	go test ./internal/segments -run '^$$' -bench 'BenchmarkLiveIngest$$' -benchtime 300x -count 1
	go test ./internal/segments -run '^$$' -bench 'BenchmarkLiveUpdate$$' -benchtime 1000x -count 1
	go test ./internal/segments -run '^$$' -bench 'BenchmarkLiveTick$$' -benchtime 1x -timeout 60m
	go test ./worker -run '^$$' -bench 'BenchmarkLiveLatency$$' -benchtime 1x -timeout 30m

.PHONY: bench-roles
bench-roles: services build ## Worker roles: due sends' p99 lateness while a 1,000,000-contact segment computes, alone / separate processes / one process, repeated in alternation (ROLES_FLAGS='-contacts 100000 -repeat 3'; '-bin DIR' for binaries built elsewhere; docs/benchmarks.md)
	go run ./bench/roles -bin bin $(ROLES_FLAGS)

# The fault run's own binaries: bin/ may be shared with other checkouts.
CHAOS_BIN := var/chaos/bin

.PHONY: chaos-bin
chaos-bin: mjml-deps
	go build -o $(CHAOS_BIN)/api ./cmd/api
	go build -o $(CHAOS_BIN)/worker ./cmd/worker

.PHONY: chaos
chaos: services chaos-bin ## Fault run: 2 api + workers under load and provider faults while processes, Redis and PostgreSQL fail; the oracle judges what the fake provider received (CHAOS_FLAGS='-d 2m -seed 7 -roles sends,webhooks+maintenance -cluster')
	go run ./bench/chaos -bin $(CHAOS_BIN) $(CHAOS_FLAGS)

.PHONY: chaos-selftest
chaos-selftest: services chaos-bin ## Show the chaos oracle fails: its unit tests, then a short run passing clean and failing each planted duplicate, loss and lying status
	go test -count=1 ./bench/chaos
	go run ./bench/chaos -bin $(CHAOS_BIN) -selftest -d 40s -contacts 120 -pg-restart=false -optouts=false -out var/chaos-selftest $(CHAOS_FLAGS)

.PHONY: bench-abuse
bench-abuse: services mjml-deps ## Slow-import abuse: another tenant's GET p99 idle, then with 50 slow imports of one tenant open; fails above 2x or if /readyz is not ready (ABUSE_FLAGS; docs/benchmarks.md)
	go run ./bench/abusebench $(ABUSE_FLAGS)

.PHONY: bench-load
bench-load: services mjml-deps ## Load: 50 tenants at 4x the rate limit for 5 minutes; only 2xx and 429, p99, RSS start to end (docs/benchmarks.md)
	@bench/run-load.sh

.PHONY: token
token: ## Print a dev session token for make run's stack (var/secrets.env): make token ORG=acme
	@eval "$$(scripts/dev-secrets.sh)" && go run ./cmd/devtoken -org "$(ORG)"

.PHONY: tools
tools: ## Install the pinned sqlc, gotestsum and staticcheck into bin/
	@if ! [ -x $(GOTESTSUM) ] || [ "$$($(GOTESTSUM) --version)" != "gotestsum version $(GOTESTSUM_VERSION)" ]; then \
		GOBIN=$(CURDIR)/bin go install gotest.tools/gotestsum@$(GOTESTSUM_VERSION); \
	fi
	@if ! [ -x $(STATICCHECK) ] || ! $(STATICCHECK) -version | grep -q "($(STATICCHECK_VERSION:v%=%))"; then \
		GOBIN=$(CURDIR)/bin go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi
	@if ! [ -x $(SQLC) ] || [ "$$($(SQLC) version)" != "$(SQLC_VERSION)" ]; then \
		echo "installing sqlc $(SQLC_VERSION) (first time only, takes a few minutes)"; \
		GOBIN=$(CURDIR)/bin go install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION); \
	fi

.PHONY: reset
reset: ## Drop the development database, flush the development Redis database, empty var/outbox (asks first)
	@scripts/reset.sh

.PHONY: clean
clean: ## Remove build output
	rm -rf bin var
