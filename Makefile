# streamwatch — the two commands a newcomer needs are `make demo` and
# `make test`; the rest are for developers and CI.

GO        ?= go
BIN       := $(CURDIR)/bin
OCB       := $(BIN)/builder
OCB_VER   := v0.165.0
COLLECTOR := $(BIN)/otelcol-streamwatch
FUZZTIME  ?= 15s

# Everything the collector binary is built from: the builder manifest, the
# module files, and the Go files of every package of this module that the two
# components import (internal/testbed is never among them). When none of it is
# newer than the binary, `make collector` does nothing.
COMPONENTS    := ./processor/streamwatchprocessor ./connector/streamwatchconnector
COLLECTOR_SRC := builder-config.yaml go.mod go.sum \
	$(shell $(GO) list -deps -f '{{if and .Module (eq .Module.Path "github.com/streamwatch/streamwatch")}}{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}{{end}}' $(COMPONENTS) 2>/dev/null)

.PHONY: test e2e bench lint fuzz collector demo fakellm loadtest clean

## test: go vet and the race-enabled unit and integration tests.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## e2e: the real collector and a real Prometheus server (see e2e/).
e2e: collector
	STREAMWATCH_COLLECTOR=$(COLLECTOR) $(GO) test -count=1 -tags e2e -timeout 20m -v ./e2e/

## bench: every benchmark, with the baselines they are compared to.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## fuzz: each fuzz target for FUZZTIME.
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
	@echo "==> installing ocb $(OCB_VER) into ./bin"
	GOBIN=$(BIN) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VER)

## collector: build otelcol-streamwatch with ocb into ./bin (skipped when up to date).
collector: $(COLLECTOR)

$(COLLECTOR): $(OCB) $(COLLECTOR_SRC)
	@echo "==> building otelcol-streamwatch with ocb (about 2.5 min with a warm module cache, longer cold); full log in _build/ocb.log"
	@mkdir -p _build; start=$$(date +%s); \
	$(OCB) --config builder-config.yaml --verbose > _build/ocb.log 2>&1 & pid=$$!; \
	while kill -0 $$pid 2>/dev/null; do \
		sleep 10; printf '    … %ss: %s\n' "$$(( $$(date +%s) - start ))" "$$(grep -oE 'Getting go modules|Compiling|Compiled' _build/ocb.log | tail -1)"; \
	done; \
	if ! wait $$pid || ! test -x _build/otelcol-streamwatch/otelcol-streamwatch; then \
		tail -30 _build/ocb.log; echo "ocb build failed; full log: _build/ocb.log"; exit 1; fi; \
	cp _build/otelcol-streamwatch/otelcol-streamwatch $(COLLECTOR); \
	echo "==> built $(COLLECTOR) in $$(( $$(date +%s) - start ))s"

## fakellm: the scripted upstream.
fakellm:
	$(GO) build -o $(BIN)/fakellm ./cmd/fakellm

## demo: build what is missing, run fakellm + the collector + a workload, print the figures.
demo: collector fakellm
	$(GO) run ./cmd/demo -collector $(COLLECTOR) -fakellm $(BIN)/fakellm $(DEMO_FLAGS)

## loadtest: baseline vs shipped pipeline under hedgeprobe-shaped load, alternating (~1 min; not in test or CI).
## LOADTEST_FLAGS passes flags, e.g. LOADTEST_FLAGS='-rounds 5 -slice 10s -pprof _build/pprof'.
loadtest: collector
	$(GO) run ./cmd/loadtest -collector $(COLLECTOR) $(LOADTEST_FLAGS)

clean:
	rm -rf bin _build
