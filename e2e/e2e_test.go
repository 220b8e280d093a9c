//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/dashboards"
	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
	"github.com/streamwatch/streamwatch/internal/testbed/stack"
	"github.com/streamwatch/streamwatch/internal/testbed/workload"
	"github.com/streamwatch/streamwatch/semconv"
)

// sink is an OTLP/HTTP traces endpoint that keeps what the collector sends.
type sink struct {
	mu    sync.Mutex
	spans []ptrace.Span
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	rss := req.Traces().ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			ss := sss.At(j).Spans()
			for k := range ss.Len() {
				sp := ptrace.NewSpan()
				ss.At(k).CopyTo(sp)
				s.spans = append(s.spans, sp)
			}
		}
	}
	s.mu.Unlock()
	resp, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func (s *sink) all() []ptrace.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ptrace.Span(nil), s.spans...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// stackBinaries returns the collector binary (STREAMWATCH_COLLECTOR, else
// ./bin) and the prometheus on PATH, failing the test when either is
// missing.
func stackBinaries(t *testing.T, root string) (collectorBin, promBin string) {
	t.Helper()
	collectorBin = os.Getenv("STREAMWATCH_COLLECTOR")
	if collectorBin == "" {
		collectorBin = filepath.Join(root, "bin", "otelcol-streamwatch")
	}
	if _, err := os.Stat(collectorBin); err != nil {
		t.Fatalf("collector binary: %v (run make collector)", err)
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not on PATH (apt-get install prometheus): %v", err)
	}
	return collectorBin, promBin
}

// stopWhenDone stops p when the test ends and, if the test failed, logs the
// last lines of p's log under name.
func stopWhenDone(t *testing.T, name string, p *stack.Process, lines int) {
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, tail(p.Log(), lines))
		}
	})
}

// startScraped starts otelcol-streamwatch with configs and env on free
// localhost ports, and a Prometheus scraping it (its exporter and its own
// metrics) every second, with deploy/alerts.yml loaded. Both stop when the
// test ends; when it failed, the tails of their logs are logged.
func startScraped(ctx context.Context, t *testing.T, dir, collectorBin, promBin string, configs []string, env ...string) (*stack.Collector, *stack.Prometheus) {
	t.Helper()
	col, err := stack.StartCollector(ctx, dir, collectorBin, configs, env...)
	if err != nil {
		t.Fatal(err)
	}
	stopWhenDone(t, "collector", col.Process, 60)
	prom, err := stack.StartPrometheus(ctx, dir, promBin, col, filepath.Join(repoRoot(t), "deploy", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	stopWhenDone(t, "prometheus", prom.Process, 30)
	return col, prom
}

// The service.name the end-to-end test's spans carry, and the
// service.instance.id of its collector.
const (
	e2eService  = "streamwatch-e2e"
	e2eInstance = "e2e-collector-0"
)

// e2eInterval is the connector's flush interval in TestCollectorEndToEnd:
// twice the test Prometheus's scrape interval (1 s), so that every flush —
// a new series' leading zero too — is scraped before the next replaces it.
const e2eInterval = 2 * time.Second

// TestCollectorEndToEnd runs the demo workload against the real collector
// and checks what Prometheus and the traces say against the script.
func TestCollectorEndToEnd(t *testing.T) {
	root := repoRoot(t)
	collectorBin, promBin := stackBinaries(t, root)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// The LLM SDKs must not be in the collector binary.
	out, err := exec.Command("go", "version", "-m", collectorBin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	for _, sdk := range []string{"github.com/openai/", "github.com/sashabaranov/", "github.com/anthropics/"} {
		if strings.Contains(string(out), sdk) {
			t.Errorf("collector binary contains %s", sdk)
		}
	}

	traces := &sink{}
	sinkSrv := httptest.NewServer(traces)
	defer sinkSrv.Close()

	col, prom := startScraped(ctx, t, dir, collectorBin, promBin,
		[]string{filepath.Join(root, "deploy", "collector.yaml"), filepath.Join(root, "e2e", "testdata", "sink.yaml"),
			filepath.Join(root, "e2e", "testdata", "instance.yaml")},
		"STREAMWATCH_METRICS_INTERVAL="+e2eInterval.String(), "STREAMWATCH_E2E_SINK="+strings.TrimPrefix(sinkSrv.URL, "http://"),
		"STREAMWATCH_INSTANCE="+e2eInstance)

	start := time.Now()
	results := runWorkload(ctx, t, col)
	t.Logf("workload ran in %s", time.Since(start).Round(time.Millisecond))
	total := workload.Totals(results)
	for _, r := range results {
		t.Logf("probe: %-45s %v hedges=%v wins=%v truncated=%d", r.Scenario, r.Outcomes, r.Hedges, r.HedgeWins, r.Truncated)
	}

	calls := semconv.PromName(semconv.MetricCalls, semconv.UnitCall, true)
	waitFor(ctx, t, prom, "sum("+calls+")", float64(total.Calls))
	settle(ctx, t, prom, e2eInterval)

	t.Run("job is the sender's service.name, instance the replica's", func(t *testing.T) {
		// As the docs say of a scrape with honor_labels: true (the scrape
		// configurations in deploy/ set it, and so does the test's).
		v, err := prom.Query(ctx, "count by (job, instance, exported_job, exported_instance) ("+calls+")")
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 1 || string(v[0].Metric["job"]) != e2eService || string(v[0].Metric["instance"]) != e2eInstance ||
			v[0].Metric["exported_job"] != "" || v[0].Metric["exported_instance"] != "" {
			t.Fatalf("calls series labelled %v, want job %q and instance %q only", v, e2eService, e2eInstance)
		}
	})
	t.Run("calls by outcome match the probe", func(t *testing.T) {
		for outcome, n := range total.Outcomes {
			got := scalar(ctx, t, prom, `sum(`+calls+`{streamwatch_outcome="`+string(outcome)+`"})`)
			if got != float64(n) {
				t.Errorf("calls{outcome=%s} = %v, probe saw %d", outcome, got, n)
			}
		}
	})
	t.Run("hedges launched and won match the probe", func(t *testing.T) {
		hedges := semconv.PromName(semconv.MetricHedges, semconv.UnitAttempt, true)
		for _, trig := range []hedgeprobe.Trigger{hedgeprobe.TriggerTTFT, hedgeprobe.TriggerStall, hedgeprobe.TriggerError, hedgeprobe.TriggerResume} {
			got := scalarOr0(ctx, t, prom, `sum(`+hedges+`{streamwatch_attempt_trigger="`+string(trig)+`"})`)
			if got != float64(total.Hedges[trig]) {
				t.Errorf("hedges{trigger=%s} = %v, probe launched %d", trig, got, total.Hedges[trig])
			}
			won := scalarOr0(ctx, t, prom, `sum(`+hedges+`{streamwatch_attempt_trigger="`+string(trig)+`", streamwatch_attempt_outcome="winner"})`)
			if won != float64(total.HedgeWins[trig]) {
				t.Errorf("hedges{trigger=%s, winner} = %v, probe saw %d wins", trig, won, total.HedgeWins[trig])
			}
		}
		if total.Hedges[hedgeprobe.TriggerStall] == 0 || total.Hedges[hedgeprobe.TriggerTTFT] == 0 ||
			total.Hedges[hedgeprobe.TriggerError] == 0 || total.Hedges[hedgeprobe.TriggerResume] == 0 {
			t.Errorf("the workload should hedge on every trigger and resume, probe saw %v", total.Hedges)
		}
	})
	t.Run("route ejections match the probe", func(t *testing.T) {
		ejections := semconv.PromName(semconv.MetricRouteEjections, semconv.UnitEjection, true)
		// fakellm's server-error answers 503 with Retry-After: each refusal
		// ejects the route until then (reason retry_after).
		got := scalarOr0(ctx, t, prom, `sum(`+ejections+`{streamwatch_route="fakellm-server-error"})`)
		if total.Ejections == 0 || got != float64(total.Ejections) {
			t.Errorf("route ejections = %v, the probe reported %d (want at least 1)", got, total.Ejections)
		}
	})
	t.Run("refused rescues match the call spans and the probe", func(t *testing.T) {
		// The connector counts the call spans' throttle events; the probe
		// counts every refusal, a repeat too (Stats.HedgesThrottled). So
		// the events the collector passed on bound the metric exactly, and
		// the probe's figures bound the events: at least one per call that
		// had a refusal, at most one per refusal.
		events := 0
		for _, sp := range traces.all() {
			for _, e := range sp.Events().All() {
				if e.Name() == semconv.EventHedgeThrottled {
					events++
				}
			}
		}
		throttled := semconv.PromName(semconv.MetricThrottledHedges, semconv.UnitHedge, true)
		got := scalarOr0(ctx, t, prom, `sum(`+throttled+`{streamwatch_attempt_trigger="ttft", streamwatch_hedge_throttle_reason="budget"})`)
		all := scalarOr0(ctx, t, prom, `sum(`+throttled+`)`)
		if total.ThrottledCalls == 0 || got != float64(events) || all != got ||
			events < total.ThrottledCalls || events > total.Throttled {
			t.Errorf("refused TTFT hedges %v (all refused rescues %v), %d throttle events in the spans; the probe refused %d times in %d calls (want at least 1 call)",
				got, all, events, total.Throttled, total.ThrottledCalls)
		}
		t.Logf("refused rescues: %v counted, %d throttle events; the probe refused %d times in %d calls", all, events, total.Throttled, total.ThrottledCalls)
	})
	t.Run("the pooled ITL holds the gaps callers got, of winners and of streams cut short", func(t *testing.T) {
		// One observation per gap of every attempt that gave the caller
		// all it received (docs/design.md §5): a winner, or a committed
		// stream the watchdog cut or a resume took over from — the
		// scenarios with a stall timeout and with a resume have those.
		var gaps, cutShort int64
		for _, sp := range traces.all() {
			a := sp.Attributes()
			outcome, ok := a.Get(string(semconv.AttemptOutcome))
			if !ok {
				continue // a call span
			}
			if d, ok := a.Get(string(semconv.Derivation)); ok && (d.Str() == semconv.DerivationBurst || d.Str() == semconv.DerivationAnomaly) {
				continue
			}
			n, _ := a.Get(string(semconv.ChunkCount))
			delivered, _ := a.Get(string(semconv.ChunksDelivered))
			switch {
			case n.Int() < 2:
			case outcome.Str() == semconv.AttemptOutcomeWinner:
				gaps += n.Int() - 1
			case delivered.Int() == n.Int():
				gaps += n.Int() - 1
				cutShort += n.Int() - 1
			}
		}
		perChunk := semconv.PromName(semconv.MetricTimePerOutputChunk, semconv.UnitSeconds, false)
		got := scalar(ctx, t, prom, "sum("+perChunk+"_count)")
		if cutShort == 0 || got != float64(gaps) {
			t.Errorf("time_per_output_chunk observations %v; the attempt spans hold %d gaps callers got, %d of them of attempts that did not end as winner (want some)",
				got, gaps, cutShort)
		}
		t.Logf("pooled ITL: %v observations = %d gaps, %d of them of streams cut short or taken over", got, gaps, cutShort)
	})
	t.Run("a scripted 30 s silence is a 30 s stall", func(t *testing.T) {
		stall := semconv.PromName(semconv.MetricStallDuration, semconv.UnitSeconds, false)
		gen := semconv.PromName(semconv.MetricGenerationDuration, semconv.UnitSeconds, false)
		act := semconv.PromName(semconv.MetricActiveGenerationDuration, semconv.UnitSeconds, false)
		// Only the committed "stall" streams live through their silence;
		// hedged-away losers are cut inside it (a silence after the last
		// chunk is not a gap), and the watchdog scenario fails at 10 s.
		sel := `{streamwatch_route="fakellm-stall", streamwatch_attempt_outcome="winner"}`
		n := scalar(ctx, t, prom, "sum("+stall+"_count"+sel+")")
		if n != 3 {
			t.Fatalf("stall segments on committed stall streams = %v, want 3", n)
		}
		mean := scalar(ctx, t, prom, "sum("+stall+"_sum"+sel+") / sum("+stall+"_count"+sel+")")
		if math.Abs(mean-30) > 1 {
			t.Errorf("mean stall = %.3f s, scripted 30 s", mean)
		}
		diff := scalar(ctx, t, prom, "(sum("+gen+"_sum"+sel+") - sum("+act+"_sum"+sel+")) / sum("+gen+"_count"+sel+")")
		if math.Abs(diff-30) > 1 {
			t.Errorf("raw − active generation = %.3f s per stream, scripted 30 s", diff)
		}
	})
	t.Run("dashboard panels return the numbers the script implies", func(t *testing.T) {
		checkPanels(ctx, t, prom, total)
	})
	t.Run("the route variable offers a route that only answers 503", func(t *testing.T) {
		vals, _, _, err := prom.API.LabelValues(ctx, "streamwatch_route", []string{dashboards.VariableSeries}, start, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range vals {
			got = append(got, string(v))
		}
		for _, want := range []string{"fakellm-server-error", "fakellm-stall", "fakellm-steady", "fakellm-slow-first"} {
			if !slices.Contains(got, want) {
				t.Errorf("route variable offers %v, not %s", got, want)
			}
		}
	})
	t.Run("exemplars link stall and TTFT buckets to the stalled calls' traces", func(t *testing.T) {
		checkExemplars(ctx, t, prom, traces.all(), start)
	})
	t.Run("processor output on a stalled winner", func(t *testing.T) {
		checkStalledWinner(t, traces.all())
	})
	// A note on a complete derivation flags input the wire contract does
	// not allow (a timeline that does not fit its span, say); a burst's
	// note (a Buffered call's caller got every chunk at once) is a finding.
	t.Run("the processor finds nothing to note on hedgeprobe's complete spans", func(t *testing.T) {
		status := map[string]int{}
		for _, sp := range traces.all() {
			a := sp.Attributes()
			d := str(a, semconv.Derivation)
			if d == "" {
				continue
			}
			status[d]++
			if p := str(a, semconv.DerivationProblem); p != "" && d == semconv.DerivationComplete {
				t.Errorf("%s (%s): %s", sp.Name(), str(a, semconv.Route), p)
			}
		}
		if status[semconv.DerivationComplete] == 0 {
			t.Fatalf("no complete derivation: %v", status)
		}
		t.Logf("derivations %v, no complete one with a problem noted", status)
	})
	t.Run("every dashboard expression shows the run's traffic", func(t *testing.T) {
		checkExprsShowTraffic(ctx, t, prom)
	})
	t.Run("the alerts the script implies, and no other", func(t *testing.T) {
		checkAlerts(ctx, t, prom, total)
	})
}

// runWorkload runs the demo workload through hedgeprobe against fakellm's
// built-in profiles (their random draws seeded with 1), served on a
// local port for the run, and sends the spans to col over OTLP/HTTP. It
// returns once every span is sent.
func runWorkload(ctx context.Context, t *testing.T, col *stack.Collector) []workload.Result {
	t.Helper()
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	llmHandler, err := fakellm.New(fakellm.Options{Config: cfg, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	llm := httptest.NewServer(llmHandler)
	defer llm.Close()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(col.OTLPHTTP), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", e2eService))))
	// Shut down at once below; this one is for a run that failed.
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	results, err := workload.Run(ctx, workload.Options{BaseURL: llm.URL + "/v1", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return results
}

// checkExprsShowTraffic asks Prometheus every expression of the dashboard
// as Grafana would, each needing at least one finite, non-zero value after
// the one run. rate() and increase() count only what a series gains after
// its first sample, and the run's series are born during it: without their
// leading zeros (docs/telemetry.md, "Dashboard") they would be born holding
// most of what they get from the run (with leading_zero off, 22 of the 25
// expressions the dashboard had then were 0 or NaN).
func checkExprsShowTraffic(ctx context.Context, t *testing.T, prom *stack.Prometheus) {
	window := strings.NewReplacer("$__rate_interval", "10m", "$__interval", "10m", "$model", ".*", "$route", ".*")
	exprs := dashboards.Exprs()
	t.Logf("%d dashboard expressions", len(exprs))
	for _, expr := range exprs {
		q := window.Replace(expr)
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, err := prom.Query(ctx, q)
			if err != nil {
				t.Errorf("%s: %v", q, err)
				break
			}
			var shown []float64
			for _, s := range v {
				shown = append(shown, float64(s.Value))
			}
			if slices.ContainsFunc(shown, func(x float64) bool { return x != 0 && !math.IsNaN(x) && !math.IsInf(x, 0) }) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("no finite non-zero value after 20 s (%v): %s", shown, q)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// scriptedStalls is the number of stall segments the workload scripts: the
// three committed "stall" streams of "stall after commit" each live through
// one 30 s silence. Every other stalling stream is cut inside its silence
// (a hedge won, or the watchdog fired), and a silence after the last chunk
// is not a gap.
const scriptedStalls = 3

var rateOf = regexp.MustCompile(`(?:rate|increase)\(([^()\[\]]+)\[\$__rate_interval\]\)`)

// cumulative turns a panel expression into its answer over the whole run:
// each rate(M[$__rate_interval]) becomes the counter M itself. The rest of
// the expression — selectors, groupings, ratios — is the panel's own, so
// the figures are what the panel shows in proportion, without the noise of
// rate extrapolation over a 30 s workload.
func cumulative(expr string) string {
	e := rateOf.ReplaceAllString(expr, "$1")
	return strings.NewReplacer("$model", ".*", "$route", ".*").Replace(e)
}

// panelValues evaluates every query of a panel cumulatively and keys the
// results by their legend (with {{label}} filled in).
func panelValues(ctx context.Context, t *testing.T, prom *stack.Prometheus, title string) map[string]float64 {
	t.Helper()
	var panel *dashboards.Panel
	for _, p := range dashboards.Panels() {
		if p.Title == title {
			panel = &p
			break
		}
	}
	if panel == nil {
		t.Fatalf("no panel %q", title)
	}
	out := map[string]float64{}
	for _, q := range panel.Queries {
		v, err := prom.Query(ctx, cumulative(q.Expr))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v {
			key := q.Legend
			for name, value := range s.Metric {
				key = strings.ReplaceAll(key, "{{"+string(name)+"}}", string(value))
			}
			out[key] = float64(s.Value)
		}
	}
	return out
}

// checkPanels compares the calls, failed calls, hedges, stalls and wasted
// chunks panels with the probe's own figures and the script.
func checkPanels(ctx context.Context, t *testing.T, prom *stack.Prometheus, total workload.Result) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	expect := func(title string, want map[string]float64) {
		t.Helper()
		got := panelValues(ctx, t, prom, title)
		if len(got) != len(want) {
			t.Errorf("%s: %v, the script implies %v", title, got, want)
			return
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || !near(g, w) {
				t.Errorf("%s: %v, the script implies %v", title, got, want)
				return
			}
		}
	}

	calls, failed := map[string]float64{}, map[string]float64{}
	for o, n := range total.Outcomes {
		calls[string(o)] = float64(n)
		if o != hedgeprobe.OutcomeOK {
			failed[string(o)] = float64(n)
		}
	}
	expect("Calls by outcome", calls)
	expect("Watchdog timeouts and failed calls", failed)

	rate, win := map[string]float64{}, map[string]float64{}
	for trig, n := range total.Hedges {
		rate[string(trig)] = float64(n) / float64(total.Calls)
		win[string(trig)] = float64(total.HedgeWins[trig]) / float64(n)
	}
	expect("Hedge rate by trigger (hedges per call)", rate)
	expect("Hedge win rate by trigger", win)

	expect("Stalls per stream", map[string]float64{"stalls per stream": scriptedStalls / float64(total.Streams)})
	expect("Share of streams that stalled", map[string]float64{"share of streams stalled": scriptedStalls / float64(total.Streams)})
	byRoute := panelValues(ctx, t, prom, "Stall segments by route (streams that outlived the silence)")
	for r, v := range byRoute {
		want := 0.0
		if r == "fakellm-stall" {
			want = scriptedStalls
		}
		if v != want {
			t.Errorf("stall segments by route: %v, the script implies %d on fakellm-stall and none elsewhere", byRoute, scriptedStalls)
			break
		}
	}
	expect("Wasted chunks (received, never delivered)", map[string]float64{"chunks/s": float64(total.WastedChunks)})
}

// checkExemplars asks Prometheus for the exemplars of the stall-duration
// and caller-TTFT histograms — what a Grafana user clicks to go from a
// bucket to a trace — and checks they lead to the scripted stalled calls:
// every stall exemplar to a committed "stall" stream, every TTFT exemplar
// of the fakellm-stall route's series to a call that route won (the
// "stall after commit" and watchdog calls), each with the value that
// call's span carries.
func checkExemplars(ctx context.Context, t *testing.T, prom *stack.Prometheus, spans []ptrace.Span, start time.Time) {
	stallOf, ttftOf := map[string]float64{}, map[string]float64{}
	for _, sp := range spans {
		a := sp.Attributes()
		id := sp.TraceID().String()
		if str(a, semconv.Route) == "fakellm-stall" && str(a, semconv.AttemptOutcome) == "winner" {
			if v, ok := a.Get(string(semconv.StallMs)); ok {
				stallOf[id] = v.Double() / 1000
			}
		}
		if sp.Name() == semconv.CallSpanName && str(a, semconv.WinnerRoute) == "fakellm-stall" {
			if v, ok := a.Get(string(semconv.GenAIResponseTimeToFirstChunk)); ok {
				ttftOf[id] = v.Double()
			}
		}
	}
	if len(stallOf) != scriptedStalls || len(ttftOf) != 5 {
		t.Fatalf("traces: %d committed stall streams (want %d), %d calls won by fakellm-stall (want 5)", len(stallOf), scriptedStalls, len(ttftOf))
	}
	check := func(metric string, want map[string]float64, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := prom.API.QueryExemplars(ctx, metric+`_bucket{streamwatch_route="fakellm-stall"}`, start, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var seen, wrong []string
			for _, r := range res {
				for _, ex := range r.Exemplars {
					id := string(ex.Labels["trace_id"])
					if v, ok := want[id]; ok && math.Abs(float64(ex.Value)-v) < 1e-3 {
						seen = append(seen, id)
					} else {
						wrong = append(wrong, fmt.Sprintf("%s=%.3fs (trace's own: %v)", id, float64(ex.Value), want[id]))
					}
				}
			}
			if len(wrong) > 0 {
				t.Errorf("%s exemplars that do not lead to %s: %v", metric, what, wrong)
				return
			}
			if len(seen) > 0 {
				t.Logf("%s: %d exemplars, each leading to %s with its value", metric, len(seen), what)
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: no exemplar after 20 s (is exemplar storage on?)", metric)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	check(semconv.PromName(semconv.MetricStallDuration, semconv.UnitSeconds, false), stallOf, "a committed stall stream")
	check(semconv.PromName(semconv.MetricTimeToFirstChunk, semconv.UnitSeconds, false), ttftOf, "a call the stalling route won")
}

// checkStalledWinner compares the processed attempt span of a committed
// "stall" stream with what the profile scripts: 40 content chunks, one
// silence of 30 s after chunk index 4 (the fifth chunk) bridged by a
// keepalive every second, and the figures that follow.
func checkStalledWinner(t *testing.T, spans []ptrace.Span) {
	t.Helper()
	var sp ptrace.Span
	found := false
	for _, s := range spans {
		a := s.Attributes()
		if str(a, semconv.Route) == "fakellm-stall" && str(a, semconv.AttemptOutcome) == "winner" {
			sp, found = s, true
			break
		}
	}
	if !found {
		t.Fatalf("no committed fakellm-stall attempt span among %d spans", len(spans))
	}
	a := sp.Attributes()
	exact := map[string]any{
		string(semconv.Derivation):       semconv.DerivationComplete,
		string(semconv.ChunkCount):       int64(40),
		string(semconv.StallCount):       int64(1),
		string(semconv.StallThresholdMs): 2000.0,
	}
	for k, want := range exact {
		v, ok := a.Get(k)
		if !ok {
			t.Errorf("%s absent", k)
			continue
		}
		if got := v.AsRaw(); got != want {
			t.Errorf("%s = %v (%T), want %v", k, got, got, want)
		}
	}
	near := map[string][2]float64{ // value, tolerance in ms
		string(semconv.StallMs):            {30_000, 1_000},
		string(semconv.ActiveGenerationMs): {34 * 25, 500}, // 39 gaps, 34 of them ~25 ms
	}
	for k, w := range near {
		v, ok := a.Get(k)
		if !ok || math.Abs(v.Double()-w[0]) > w[1] {
			t.Errorf("%s = %v, want %v ± %v", k, v.AsRaw(), w[0], w[1])
		}
	}
	var stalls int
	for i := range sp.Events().Len() {
		ev := sp.Events().At(i)
		if ev.Name() != semconv.EventStall {
			continue
		}
		stalls++
		ea := ev.Attributes()
		if v, _ := ea.Get(string(semconv.StallAfterChunk)); v.Int() != 4 {
			t.Errorf("stall after chunk %d, scripted 4", v.Int())
		}
		if v, _ := ea.Get(string(semconv.StallKeepalives)); v.Int() < 25 || v.Int() > 31 {
			t.Errorf("keepalives inside the silence = %d, scripted one a second for 30 s", v.Int())
		}
	}
	if stalls != 1 {
		t.Errorf("%d stall events, want 1", stalls)
	}
}

func str(a pcommon.Map, k attribute.Key) string {
	v, ok := a.Get(string(k))
	if !ok {
		return ""
	}
	return v.AsString()
}

// poll asks Prometheus expr, a query of one value, every step until ok
// holds of its value or timeout has passed, and returns the last value it
// got and whether ok held.
func poll(ctx context.Context, prom *stack.Prometheus, expr string, step, timeout time.Duration, ok func(float64) bool) (float64, bool) {
	deadline := time.Now().Add(timeout)
	var got float64
	for {
		if v, err := prom.Query(ctx, expr); err == nil && len(v) == 1 {
			if got = float64(v[0].Value); ok(got) {
				return got, true
			}
		}
		if time.Now().After(deadline) {
			return got, false
		}
		time.Sleep(step)
	}
}

func waitFor(ctx context.Context, t *testing.T, prom *stack.Prometheus, expr string, want float64) {
	t.Helper()
	if got, ok := poll(ctx, prom, expr, 500*time.Millisecond, 90*time.Second, func(v float64) bool { return v == want }); !ok {
		t.Fatalf("%s = %v after 90 s, want %v", expr, got, want)
	}
}

// settle waits until Prometheus holds, of every series, a sample taken
// after the connector's next flush; call it once waitFor has seen the last
// call. Every span was in before the flush that showed that call, but a
// series born in the interval before that flush was sent at zero by it
// (its leading zero, docs/telemetry.md) and holds its counts from the
// next, which comes within interval. A scraped sample is stamped when it
// was scraped, a pushed one when it was flushed: either way one stamped
// later than interval after now was taken after that next flush.
func settle(ctx context.Context, t *testing.T, prom *stack.Prometheus, interval time.Duration) {
	t.Helper()
	after := time.Now().Add(interval + 250*time.Millisecond)
	// Every series is sent at every flush, so the oldest newest sample of
	// all says when the last flush was whole (a push split into several
	// requests lands piece by piece). timestamp() drops the metric name;
	// the copy in "metric" keeps the series apart.
	const expr = `min(timestamp(label_replace({__name__=~"(gen_ai|streamwatch)_.+"}, "metric", "$1", "__name__", "(.+)")))`
	want := float64(after.UnixMilli()) / 1000
	if got, ok := poll(ctx, prom, expr, 200*time.Millisecond, interval+30*time.Second, func(v float64) bool { return v > want }); !ok {
		t.Fatalf("%s = %.3f, want after %.3f", expr, got, want)
	}
}

func scalar(ctx context.Context, t *testing.T, prom *stack.Prometheus, expr string) float64 {
	t.Helper()
	v, err := prom.Query(ctx, expr)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 {
		t.Fatalf("%s: %d series, want 1", expr, len(v))
	}
	return float64(v[0].Value)
}

func scalarOr0(ctx context.Context, t *testing.T, prom *stack.Prometheus, expr string) float64 {
	t.Helper()
	v, err := prom.Query(ctx, expr)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) == 0 {
		return 0
	}
	return float64(v[0].Value)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkAlerts asks Prometheus, which evaluates deploy/alerts.yml every
// second over the run's series, what its rules recorded and which alerts
// are active, against what the probe counted: a rule whose names, labels
// or values were wrong would record nothing here, one whose grouping were
// wrong would record the wrong figure, and an alert firing on a workload
// under its floors is a false alarm. Every rule must also have evaluated
// without error.
func checkAlerts(ctx context.Context, t *testing.T, prom *stack.Prometheus, total workload.Result) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var records []string
	alerting := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records = append(records, r.Record)
			} else {
				alerting++
			}
		}
	}

	rules, err := prom.API.Rules(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch r := r.(type) {
			case promv1.AlertingRule:
				loaded++
				if r.Health != promv1.RuleHealthGood {
					t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
				}
			case promv1.RecordingRule:
				loaded++
				if r.Health != promv1.RuleHealthGood {
					t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
				}
			}
		}
	}
	if loaded != alerting+len(records) {
		t.Errorf("Prometheus loaded %d rules, deploy/alerts.yml has %d", loaded, alerting+len(records))
	}

	// Every recorded figure exists for the run's service, and is finite.
	// Rules run every second: wait for one that has seen the last flush.
	job := fmt.Sprintf(`{job=%q}`, e2eService)
	for _, r := range records {
		if r == "job:streamwatch_calls_per_15m:min1h" {
			// Recorded only once an hour of 15-minute counts is: a run of
			// minutes must leave it empty, or a service's first burst
			// would qualify it for StreamwatchCallsStopped.
			if v, err := prom.Query(ctx, r+job); err != nil || len(v) != 0 {
				t.Errorf("%s after a run of minutes: %v, %v; want nothing", r, v, err)
			}
			continue
		}
		if _, ok := poll(ctx, prom, "count("+r+job+")", time.Second, 15*time.Second, func(v float64) bool { return v > 0 }); !ok {
			t.Errorf("%s recorded nothing for the run", r)
			continue
		}
		v, err := prom.Query(ctx, r+job)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v {
			if f := float64(s.Value); math.IsNaN(f) || math.IsInf(f, 0) {
				t.Errorf("%s%v = %v", r, s.Metric, f)
			}
		}
		t.Logf("%s: %v", r, v)
	}
	// The figures the script implies: no call failed; the watchdog's
	// stall timeouts are all on the stall profile's route; hedges per
	// call as the probe counted them (within 10 %: each rate extrapolates
	// over its own series' samples).
	if total.Outcomes[hedgeprobe.OutcomeError]+total.Outcomes[hedgeprobe.OutcomeTTFTTimeout]+total.Outcomes[hedgeprobe.OutcomeCanceled] == 0 {
		if got := scalar(ctx, t, prom, "sum(job_model:streamwatch_calls_failed:ratio_rate10m"+job+")"); got != 0 {
			t.Errorf("failed-call share %v, the probe saw no failed call", got)
		}
	}
	stall := scalar(ctx, t, prom, `sum(job_model_route:streamwatch_calls_stall_timeout:ratio_rate15m{streamwatch_route="fakellm-stall"})`)
	other := scalar(ctx, t, prom, `sum(job_model_route:streamwatch_calls_stall_timeout:ratio_rate15m{streamwatch_route!="fakellm-stall"})`)
	if (stall > 0) != (total.Outcomes[hedgeprobe.OutcomeStallTimeout] > 0) || other != 0 {
		t.Errorf("stall-timeout share on fakellm-stall %v, elsewhere %v; the probe saw %d stall timeouts", stall, other, total.Outcomes[hedgeprobe.OutcomeStallTimeout])
	}
	hedges := 0
	for _, n := range total.Hedges {
		hedges += n
	}
	want := float64(hedges) / float64(total.Calls)
	if got := scalar(ctx, t, prom, "sum(job:streamwatch_hedges_per_call:ratio_rate30m"+job+")"); math.Abs(got-want) > 0.1*want {
		t.Errorf("hedges per call %v, the probe launched %d hedges in %d calls: %.3f", got, hedges, total.Calls, want)
	}

	// Under its floors (31 calls, 2 stall timeouts, 6 stalls callers saw)
	// the demo workload raises no alert but one: fakellm's server-error
	// answers 503 with Retry-After, an ejection (pushback) each, pending
	// for its 15 minutes.
	var active []string
	if total.Ejections > 0 {
		active = append(active, fmt.Sprintf(`StreamwatchRoutePushback pending job=%q, streamwatch_route="fakellm-server-error"`, e2eService))
	}
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		alerts, err := prom.API.Alerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, a := range alerts.Alerts {
			var ls []string
			for k, v := range a.Labels {
				if k != "alertname" && k != "severity" {
					ls = append(ls, fmt.Sprintf("%s=%q", k, v))
				}
			}
			slices.Sort(ls)
			got = append(got, fmt.Sprintf("%s %s %s", a.Labels["alertname"], a.State, strings.Join(ls, ", ")))
		}
		slices.Sort(got)
		if slices.Equal(got, active) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if !slices.Equal(got, active) {
		t.Errorf("active alerts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(active, "\n"))
	}
	t.Logf("%d rules; active alerts:\n%s", loaded, strings.Join(got, "\n"))
}
