package main

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/internal/testbed/workload"
)

func parseScrape(t *testing.T, text string) families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	f, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// reportLine returns what the report prints after label on its line.
func reportLine(out, label string) string {
	_, rest, ok := strings.Cut(out, label)
	if !ok {
		return "<missing>"
	}
	line, _, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(line)
}

const (
	scrapeCalls = `# TYPE streamwatch_calls_total counter
streamwatch_calls_total{streamwatch_outcome="ok"} 3
`
	scrapeGen = `# TYPE streamwatch_generation_duration_seconds histogram
streamwatch_generation_duration_seconds_bucket{le="1"} 1
streamwatch_generation_duration_seconds_bucket{le="+Inf"} 2
streamwatch_generation_duration_seconds_sum 6
streamwatch_generation_duration_seconds_count 2
`
)

// A figure the collector did not export, or exported as no number, reads
// n/a: never a measured-looking zero beside hedgeprobe's figure, never
// "100 %" of generation stalled, never NaN. A counter without series from
// a collector that reports calls is a zero: the connector makes a series
// at its first count.
func TestReportMissingFigures(t *testing.T) {
	probe := workload.Result{WastedChunks: 30, Ejections: 2, Throttled: 3, ThrottledCalls: 1, Outcomes: map[hedgeprobe.Outcome]int{}}
	for _, tc := range []struct {
		name, scrape string
		want         map[string]string // label → line prefix
	}{
		{"only the calls counter", scrapeCalls, map[string]string{
			"calls":                              "ok=3",
			"hedges by trigger":                  "none",
			"stall share of generation":          "n/a",
			"stalls (upstream)":                  "0 segments, mean n/a, 0.00s in all; 0 of 0 streams stalled",
			"wasted chunks (never delivered)":    "0   (hedgeprobe: 30)",
			"route ejections":                    "0   (hedgeprobe: 2)",
			"rescues refused (budget, pushback)": "0   (hedgeprobe: 3 refusals; calls refused a rescue: 1)",
			"watchdog timeouts":                  "ttft 0   stall 0",
			"time to first chunk (caller)":       "p50 n/a   p99 n/a",
			"generation per stream, mean":        "raw n/a   active n/a",
		}},
		{"no active generation", scrapeCalls + scrapeGen, map[string]string{
			"stall share of generation":   "n/a",
			"generation per stream, mean": "raw 3.00s   active n/a",
		}},
		{"NaN values", `# TYPE streamwatch_calls_total counter
streamwatch_calls_total{streamwatch_outcome="ok"} NaN
# TYPE streamwatch_route_ejections_total counter
streamwatch_route_ejections_total +Inf
# TYPE streamwatch_hedges_total counter
streamwatch_hedges_total{streamwatch_attempt_trigger="stall",streamwatch_attempt_outcome="winner"} NaN
` + scrapeGen + `# TYPE streamwatch_generation_active_duration_seconds histogram
streamwatch_generation_active_duration_seconds_bucket{le="+Inf"} 2
streamwatch_generation_active_duration_seconds_sum NaN
streamwatch_generation_active_duration_seconds_count 2
`, map[string]string{
			"calls":                     "ok=n/a",
			"stall share of generation": "n/a",
			"route ejections":           "n/a   (hedgeprobe: 2)",
			"hedges by trigger":         "stall=n/a (won n/a)",
		}},
		{"nothing", "", map[string]string{
			"calls":                              "n/a: this collector does not report streamwatch.calls",
			"hedges by trigger":                  "n/a",
			"stalls (upstream)":                  "n/a",
			"wasted chunks (never delivered)":    "n/a   (hedgeprobe: 30)",
			"route ejections":                    "n/a   (hedgeprobe: 2)",
			"rescues refused (budget, pushback)": "n/a   (hedgeprobe: 3 refusals; calls refused a rescue: 1)",
			"watchdog timeouts":                  "ttft n/a   stall n/a",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			printCollector(&buf, parseScrape(t, tc.scrape), probe)
			out := buf.String()
			for label, want := range tc.want {
				if got := reportLine(out, label); !strings.HasPrefix(got, want) {
					t.Errorf("%s: %q, want %q…", label, got, want)
				}
			}
			if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
				t.Errorf("report prints a non-number:\n%s", out)
			}
		})
	}
}

// quantile estimates as PromQL's histogram_quantile does, and has no
// estimate where it has none.
func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    hist
		q    float64
		want float64 // NaN: no estimate
	}{
		{"inside a bucket", hist{count: 4, bounds: []float64{1, 2, math.Inf(1)}, cum: []uint64{2, 4, 4}}, 0.75, 1.5},
		{"first bucket from 0", hist{count: 4, bounds: []float64{1, 2, math.Inf(1)}, cum: []uint64{4, 4, 4}}, 0.5, 0.5},
		{"in +Inf: the highest finite bound", hist{count: 4, bounds: []float64{1, 2, math.Inf(1)}, cum: []uint64{1, 2, 4}}, 0.99, 2},
		{"only +Inf", hist{count: 4, bounds: []float64{math.Inf(1)}, cum: []uint64{4}}, 0.5, math.NaN()},
		{"no sample", hist{bounds: []float64{1, math.Inf(1)}, cum: []uint64{0, 0}}, 0.5, math.NaN()},
		{"no bucket reaches the rank", hist{count: 4, bounds: []float64{0.5, math.Inf(1)}, cum: []uint64{1, 1}}, 0.5, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.h.quantile(tc.q)
			if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Fatalf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

// A metrics endpoint answering an HTTP error is reported as such, not as
// a collector that saw no call.
func TestWaitMetricsHTTPError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(scrapeCalls)) // an error page is no scrape, whatever it holds
	}))
	defer srv.Close()
	_, err := waitMetrics(context.Background(), srv.URL, 1, time.Millisecond, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable") {
		t.Fatalf("waitMetrics = %v, want the 503", err)
	}
}

// A collector that answers but has not seen every call is reported
// without a "last error: <nil>".
func TestWaitMetricsShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(scrapeCalls))
	}))
	defer srv.Close()
	if _, err := waitMetrics(context.Background(), srv.URL, 3, time.Millisecond, time.Minute); err != nil {
		t.Fatalf("3 of 3 calls: %v", err)
	}
	_, err := waitMetrics(context.Background(), srv.URL, 5, time.Millisecond, 100*time.Millisecond)
	if err == nil || err.Error() != "the collector reported 3 of 5 calls after 100ms" {
		t.Fatalf("waitMetrics = %v", err)
	}
}

// Once every call is in, waitMetrics returns the scrape after the
// connector's next flush, not the one that showed the last call: a series
// born just before that flush was sent at zero by it. Here the first
// complete scrape shows a new hedges series at its leading zero, the next
// its count.
func TestWaitMetricsNextFlush(t *testing.T) {
	var scrapes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hedges := "0"
		if scrapes.Add(1) > 1 {
			hedges = "1"
		}
		w.Write([]byte(scrapeCalls + "# TYPE streamwatch_hedges_total counter\nstreamwatch_hedges_total{streamwatch_attempt_trigger=\"ttft\"} " + hedges + "\n"))
	}))
	defer srv.Close()
	const interval = 300 * time.Millisecond
	start := time.Now()
	m, err := waitMetrics(context.Background(), srv.URL, 3, interval, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := sumCounter(m, hedgesName, nil); got != 1 || scrapes.Load() < 2 {
		t.Fatalf("hedges %v after %d scrapes, want 1 after 2 or more", got, scrapes.Load())
	}
	if waited := time.Since(start); waited < interval {
		t.Fatalf("returned after %v, before the next flush (%v)", waited, interval)
	}
}

// A scrape that fails after every call is in is tried again, not
// reported: the demo's figures come from the next one that works.
func TestWaitMetricsRetriesLastScrape(t *testing.T) {
	var scrapes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if scrapes.Add(1) == 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(scrapeCalls))
	}))
	defer srv.Close()
	if _, err := waitMetrics(context.Background(), srv.URL, 3, time.Millisecond, time.Minute); err != nil || scrapes.Load() != 3 {
		t.Fatalf("waitMetrics = %v after %d scrapes, want success at the third", err, scrapes.Load())
	}
}

// With -otlp the report gives, per count, the PromQL that reads it where
// the collector's metrics go, on the demo's job, and hedgeprobe's value.
func TestQueriesReport(t *testing.T) {
	var buf bytes.Buffer
	printQueries(&buf, workload.Result{
		Outcomes:     map[hedgeprobe.Outcome]int{hedgeprobe.OutcomeOK: 29, hedgeprobe.OutcomeStallTimeout: 2},
		HedgeWins:    map[hedgeprobe.Trigger]int{hedgeprobe.TriggerTTFT: 4, hedgeprobe.TriggerResume: 3},
		WastedChunks: 30,
		Ejections:    2,
	})
	for _, want := range []string{
		`sum by (streamwatch_outcome) (streamwatch_calls_total{job="streamwatch-demo"})`,
		"ok=29 stall_timeout=2\n",
		`sum by (streamwatch_attempt_trigger) (streamwatch_hedges_total{job="streamwatch-demo",streamwatch_attempt_outcome="winner"})`,
		"resume=3 ttft=4\n",
		`sum (streamwatch_wasted_chunks_total{job="streamwatch-demo"})`,
		`sum (streamwatch_route_ejections_total{job="streamwatch-demo"})`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, buf.String())
		}
	}
}
