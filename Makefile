# streamwatch — the two commands a newcomer needs are `make demo` and
# `make test`; the rest are for developers and CI.

GO        ?= go
BIN       := $(CURDIR)/bin
OCB       := $(BIN)/builder
OCB_VER   := v0.165.0
COLLECTOR := $(BIN)/otelcol-streamwatch
# The CPU profile the collector is built with (profile-guided optimization):
# the load test's shipped, drop_timeline and gateway pipelines (`make pgo`).
PGO       := $(CURDIR)/otelcol-streamwatch.pgo
FUZZTIME  ?= 15s
# Ollama, the end-to-end suite's real LLM server, built from the Go module
# proxy (see docs/ollama.md).
OLLAMA_VER := v0.17.4
OLLAMA     := $(BIN)/ollama
OLLAMA_HDR := internal/testbed/ollama/include/miniaudio/miniaudio.h

# Everything the collector binary is built from: the builder manifest, the
# module files, and the Go files of every package of this module that the two
# components import (internal/testbed is never among them). When none of it is
# newer than the binary, `make collector` does nothing.
COMPONENTS    := ./processor/streamwatchprocessor ./connector/streamwatchconnector
COLLECTOR_SRC := builder-config.yaml go.mod go.sum otelcol-streamwatch.pgo \
	$(shell $(GO) list -deps -f '{{if and .Module (eq .Module.Path "github.com/streamwatch/streamwatch")}}{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}{{end}}' $(COMPONENTS) 2>/dev/null)

.PHONY: test e2e bench lint fuzz collector ollama demo fakellm loadtest simulation pgo clean

## test: go vet, the race-enabled unit and integration tests, the hedge
## simulation's targets (virtual time, too slow under -race), and
## hedgeprobe's random invariants over 100,000 calls (10,000 under -race):
## some violations show once in a few hundred thousand calls.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run 'TestSimulation$$|TestResumeTargets|TestRouteHealthEffect|TestAdaptiveDelayWarm' ./internal/testbed/hedgesim/
	$(GO) test -count=1 -run 'TestInvariantsRandom' ./hedgeprobe/ -args -invariants.sessions=20000 -invariants.seed=1

## e2e: the real collector, a real Prometheus server and two Ollama servers (see e2e/).
e2e: collector ollama
	STREAMWATCH_COLLECTOR=$(COLLECTOR) STREAMWATCH_OLLAMA=$(OLLAMA) $(GO) test -count=1 -tags e2e -timeout 20m -v ./e2e/ ./cmd/loadtest/

## bench: every benchmark, with the baselines they are compared to. One
## package at a time (-p 1): go test's default runs a package per core, and a
## benchmark that shares the cores with another package's measures that too.
bench:
	$(GO) test -p 1 -run='^$$' -bench=. -benchmem ./...

## fuzz: each fuzz target for FUZZTIME: a duration (15s) or a count of inputs (20000x).
fuzz:
	@for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "== $$t $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$t || exit 1; \
		done; \
	done

## lint: gofmt, go vet and staticcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

$(OCB):
	@echo "==> installing ocb $(OCB_VER) into ./bin (under a minute; silent while it downloads and compiles)"
	GOBIN=$(BIN) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VER)

## collector: build otelcol-streamwatch with ocb into ./bin (skipped when up to date).
collector: $(COLLECTOR)

$(COLLECTOR): $(OCB) $(COLLECTOR_SRC)
	@echo "==> building otelcol-streamwatch with ocb, profile-guided (about 3 min with a warm module cache, longer cold); full log in _build/ocb.log"
	@mkdir -p _build; start=$$(date +%s); \
	GOFLAGS="$$GOFLAGS -pgo=$(PGO)" $(OCB) --config builder-config.yaml --verbose > _build/ocb.log 2>&1 & pid=$$!; \
	while kill -0 $$pid 2>/dev/null; do \
		sleep 10; printf '    … %ss: %s\n' "$$(( $$(date +%s) - start ))" "$$(grep -oE 'Getting go modules|Compiling|Compiled' _build/ocb.log | tail -1)"; \
	done; \
	if ! wait $$pid || ! test -x _build/otelcol-streamwatch/otelcol-streamwatch; then \
		tail -30 _build/ocb.log; echo "ocb build failed; full log: _build/ocb.log"; exit 1; fi; \
	cp _build/otelcol-streamwatch/otelcol-streamwatch $(COLLECTOR); \
	echo "==> built $(COLLECTOR) in $$(( $$(date +%s) - start ))s"

## ollama: build Ollama $(OLLAMA_VER) from the Go module proxy into ./bin (skipped when up to date).
ollama: $(OLLAMA)

# The module zip lacks llama.cpp's vendor/ headers: nlohmann/json and stb
# come from Debian (nlohmann-json3-dev, libstb-dev, in /usr/include), and
# miniaudio.h is the project's own stand-in (audio input unsupported).
# The stamp names the version, so changing OLLAMA_VER rebuilds.
$(OLLAMA): $(OLLAMA_HDR) _build/ollama-$(OLLAMA_VER).stamp
	@echo "==> building ollama $(OLLAMA_VER) from the Go module proxy (CPU only; about 2.5 min from an empty build cache, longer on a busy machine); full log in _build/ollama.log"
	@mkdir -p _build; start=$$(date +%s); \
	CGO_ENABLED=1 CGO_CPPFLAGS="-I$(CURDIR)/internal/testbed/ollama/include" GOBIN=$(BIN) \
		$(GO) install -v -ldflags "-X github.com/ollama/ollama/version.Version=$(OLLAMA_VER:v%=%)" \
		github.com/ollama/ollama@$(OLLAMA_VER) > _build/ollama.log 2>&1 & pid=$$!; \
	n=0; while kill -0 $$pid 2>/dev/null; do \
		sleep 1; n=$$((n + 1)); [ $$((n % 10)) -eq 0 ] || continue; \
		printf '    … %ss: %s packages compiled, now %s\n' "$$(( $$(date +%s) - start ))" \
			"$$(grep -cv '^go: ' _build/ollama.log)" "$$(grep -v '^go: ' _build/ollama.log | tail -1)"; \
	done; \
	if ! wait $$pid || ! test -x $(OLLAMA); then \
		tail -30 _build/ollama.log; echo "ollama build failed; full log: _build/ollama.log"; exit 1; fi; \
	touch $(OLLAMA); \
	echo "==> built $(OLLAMA) (version $$($(OLLAMA) --version 2>&1 | grep -o "[0-9][0-9.]*$$" | tail -1)) in $$(( $$(date +%s) - start ))s"

_build/ollama-%.stamp:
	@mkdir -p _build; rm -f _build/ollama-*.stamp; touch $@

## fakellm: the scripted upstream.
fakellm:
	$(GO) build -o $(BIN)/fakellm ./cmd/fakellm

## demo: build what is missing, run fakellm + the collector + a workload, print the figures.
# Built, not go run: measured on this demo (Go 1.26), Ctrl-C ending a -keep run that
# stopped cleanly left make with "Error 1" under go run; the binary exits 0.
demo: collector fakellm
	$(GO) build -o $(BIN)/demo ./cmd/demo
	$(BIN)/demo -collector $(COLLECTOR) -fakellm $(BIN)/fakellm $(DEMO_FLAGS)

## loadtest: baseline vs shipped pipeline under hedgeprobe-shaped load, alternating (~1 min; not in test or CI).
## LOADTEST_FLAGS passes flags, e.g. LOADTEST_FLAGS='-rounds 5 -slice 10s -pprof _build/pprof'.
loadtest: collector
	$(GO) run ./cmd/loadtest -collector $(COLLECTOR) $(LOADTEST_FLAGS)

## simulation: the hedge simulation's reports, seed and stress scenarios, and
## the seed scenario's sensitivity to its assumptions, in virtual time
## (~3 min; docs/performance.md). SIM_FLAGS passes flags, e.g.
## SIM_FLAGS='-calls=2000 -seed=3'; the route-health rows: make simulation
## SIM_RUN=TestRouteHealthReport.
SIM_RUN ?= (TestSimulationReport|TestSensitivityReport)
SIM_FLAGS ?= -calls=10000
simulation:
	$(GO) test ./internal/testbed/hedgesim -count=1 -timeout 30m -run '^$(SIM_RUN)$$' -v $(SIM_FLAGS)

## pgo: profile the collector under the load test's shipped, drop_timeline
## and gateway pipelines and write the profile the next build uses (~1.5 min).
pgo: collector
	@rm -rf _build/pgo
	$(GO) run ./cmd/loadtest -collector $(COLLECTOR) -rounds 1 -slice 12s -pipelines shipped,drop_timeline,gateway -pprof _build/pgo
	$(GO) tool pprof -proto _build/pgo/shipped.pprof _build/pgo/drop_timeline.pprof _build/pgo/gateway.pprof > $(PGO)
	@echo "==> wrote $(PGO); make collector rebuilds with it"

clean:
	rm -rf bin _build
