package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamwatch/streamwatch/internal/testbed/workload"
	"github.com/streamwatch/streamwatch/semconv"
)

type families map[string]*dto.MetricFamily

var (
	callsName     = semconv.PromName(semconv.MetricCalls, semconv.UnitCall, true)
	hedgesName    = semconv.PromName(semconv.MetricHedges, semconv.UnitAttempt, true)
	ttftName      = semconv.PromName(semconv.MetricTimeToFirstChunk, semconv.UnitSeconds, false)
	genName       = semconv.PromName(semconv.MetricGenerationDuration, semconv.UnitSeconds, false)
	activeName    = semconv.PromName(semconv.MetricActiveGenerationDuration, semconv.UnitSeconds, false)
	stallsName    = semconv.PromName(semconv.MetricStalls, semconv.UnitStall, true)
	streamsName   = semconv.PromName(semconv.MetricStreams, semconv.UnitStream, true)
	wastedName    = semconv.PromName(semconv.MetricWastedChunks, semconv.UnitChunk, true)
	ejectionsName = semconv.PromName(semconv.MetricRouteEjections, semconv.UnitEjection, true)
	throttledName = semconv.PromName(semconv.MetricThrottledHedges, semconv.UnitHedge, true)
	stallDur      = semconv.PromName(semconv.MetricStallDuration, semconv.UnitSeconds, false)
	callStall     = semconv.PromName(semconv.MetricCallStallDuration, semconv.UnitSeconds, false)
	callStalls    = semconv.PromName(semconv.MetricCallStalls, semconv.UnitStall, true)
)

// waitMetrics scrapes url until the calls counter has seen every call,
// then until a scrape after the connector's next flush (it flushes every
// interval) succeeds: every span was in before the flush that showed the
// last call, but a series born in the interval before that flush was sent
// at zero by it (its leading zero, docs/telemetry.md) and holds its counts
// from the next.
func waitMetrics(ctx context.Context, url string, calls int, interval, timeout time.Duration) (families, error) {
	deadline := time.Now().Add(timeout)
	var last families
	var settled time.Time // when a scrape holds every count; zero until every call is in
	for {
		scrapedAt := time.Now()
		m, err := scrape(ctx, url)
		if err == nil {
			last = m
			if !settled.IsZero() && !scrapedAt.Before(settled) {
				return m, nil
			}
			if got, _ := sumCounter(m, callsName, nil); settled.IsZero() && got >= float64(calls) {
				// The flush that showed them came before scrapedAt, so
				// the next one comes before scrapedAt + interval.
				settled = scrapedAt.Add(interval + 250*time.Millisecond)
			}
		}
		if time.Now().After(deadline) {
			got, _ := sumCounter(last, callsName, nil)
			if err != nil {
				return nil, fmt.Errorf("the collector reported %v of %d calls after %s (last error: %w)", got, calls, timeout, err)
			}
			return nil, fmt.Errorf("the collector reported %v of %d calls after %s", got, calls, timeout)
		}
		pause := 500 * time.Millisecond
		if !settled.IsZero() {
			pause = min(pause, max(time.Until(settled), 0))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

func scrape(ctx context.Context, url string) (families, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// An error page is no scrape: parsed, an empty one would read as
		// "no calls yet" until the timeout.
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func match(m *dto.Metric, want map[string]string) bool {
	l := labels(m)
	for k, v := range want {
		if l[k] != v {
			return false
		}
	}
	return true
}

// sumCounter adds every series of a counter whose labels match want, and
// reports whether the collector exported the counter at all: a metric it
// does not export is no measured zero.
func sumCounter(f families, name string, want map[string]string) (float64, bool) {
	mf := f[strings.TrimSuffix(name, "_total")]
	if mf == nil {
		mf = f[name]
	}
	if mf == nil {
		return 0, false
	}
	var s float64
	for _, m := range mf.GetMetric() {
		if match(m, want) {
			s += m.GetCounter().GetValue()
		}
	}
	return s, true
}

// byLabel sums a counter per value of one label.
func byLabel(f families, name, label string, want map[string]string) map[string]float64 {
	out := map[string]float64{}
	mf := f[strings.TrimSuffix(name, "_total")]
	if mf == nil {
		mf = f[name]
	}
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		if match(m, want) {
			out[labels(m)[label]] += m.GetCounter().GetValue()
		}
	}
	return out
}

// hist merges every series of a histogram.
type hist struct {
	count  uint64
	sum    float64
	bounds []float64
	cum    []uint64
}

func merged(f families, name string) hist {
	var h hist
	mf := f[name]
	if mf == nil {
		return h
	}
	for _, m := range mf.GetMetric() {
		hh := m.GetHistogram()
		h.count += hh.GetSampleCount()
		h.sum += hh.GetSampleSum()
		for i, b := range hh.GetBucket() {
			if len(h.bounds) <= i {
				h.bounds = append(h.bounds, b.GetUpperBound())
				h.cum = append(h.cum, 0)
			}
			h.cum[i] += b.GetCumulativeCount()
		}
	}
	return h
}

// quantile interpolates linearly inside the bucket, as PromQL's
// histogram_quantile does; like it, it has no estimate (NaN) without a
// finite bucket, and it returns the highest finite bound for a rank in the
// +Inf bucket. A rank no bucket reaches (a series without buckets merged
// in) has no estimate either.
func (h hist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	lower, prev := 0.0, uint64(0)
	for i, b := range h.bounds {
		if float64(h.cum[i]) >= rank {
			switch {
			case math.IsInf(b, 1) && i == 0:
				return math.NaN()
			case math.IsInf(b, 1):
				return lower
			}
			in := float64(h.cum[i] - prev)
			if in == 0 {
				return b
			}
			return lower + (b-lower)*(rank-float64(prev))/in
		}
		lower, prev = b, h.cum[i]
	}
	return math.NaN()
}

func (h hist) mean() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.sum / float64(h.count)
}

func printProbe(w io.Writer, rs []workload.Result) {
	fmt.Fprintln(w, "\nWhat hedgeprobe saw (per scenario):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  scenario\tcalls\toutcomes\thedges (won)\ttruncated")
	for _, r := range append(rs, workload.Totals(rs)) {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%d\n", r.Scenario, r.Calls, counts(r.Outcomes), hedges(r), r.Truncated)
	}
	tw.Flush()
}

// counts formats counts per outcome or trigger as k=v, sorted.
func counts[K ~string](m map[K]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func hedges(r workload.Result) string {
	var parts []string
	for k, v := range r.Hedges {
		parts = append(parts, fmt.Sprintf("%s=%d (%d)", k, v, r.HedgeWins[k]))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// printQueries prints, for a collector the demo did not start, the PromQL
// that reads the demo's counts where its metrics go (its Prometheus
// exporter scraped with honor_labels, or remote write: either way job is
// the spans' service.name), beside what hedgeprobe counted. The counters
// are cumulative since the collector started, so on a collector that has
// seen other traffic from this service they read more.
func printQueries(w io.Writer, probe workload.Result) {
	fmt.Fprintf(w, "\nWhat the collector should count (query its metrics' Prometheus after two connector intervals, plus a scrape interval where scraped: a new series is sent at zero first; job is the spans' service.name, %s):\n", demoService)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	sel := fmt.Sprintf(`job=%q`, demoService)
	fmt.Fprintf(tw, "  sum by (streamwatch_outcome) (%s{%s})\t%s\n", callsName, sel, counts(probe.Outcomes))
	fmt.Fprintf(tw, "  sum by (streamwatch_attempt_trigger) (%s{%s,streamwatch_attempt_outcome=\"winner\"})\t%s\n", hedgesName, sel, counts(probe.HedgeWins))
	fmt.Fprintf(tw, "  sum (%s{%s})\t%d\n", wastedName, sel, probe.WastedChunks)
	fmt.Fprintf(tw, "  sum (%s{%s})\t%d\n", ejectionsName, sel, probe.Ejections)
	tw.Flush()
}

// printCollector prints what the collector measured. Where the probe knows
// a figure exactly (TTFT per call), the exact value is printed beside the
// collector's bucket estimate, each labelled.
func printCollector(w io.Writer, f families, probe workload.Result) {
	fmt.Fprintln(w, "\nWhat the collector measured (read back from its Prometheus endpoint):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	_, reporting := sumCounter(f, callsName, nil)
	calls := byLabel(f, callsName, "streamwatch_outcome", nil)
	trig := byLabel(f, hedgesName, "streamwatch_attempt_trigger", nil)
	wins := byLabel(f, hedgesName, "streamwatch_attempt_trigger", map[string]string{"streamwatch_attempt_outcome": "winner"})
	var hs []string
	for k, v := range trig {
		hs = append(hs, fmt.Sprintf("%s=%s (won %s)", k, num(v, true), num(wins[k], true)))
	}
	sort.Strings(hs)
	switch {
	case !reporting:
		fmt.Fprintf(tw, "  calls\t%s\n", notReported(semconv.MetricCalls))
		fmt.Fprintf(tw, "  hedges by trigger\tn/a\n")
	case len(hs) == 0:
		fmt.Fprintf(tw, "  calls\t%s\n", kv(calls))
		fmt.Fprintf(tw, "  hedges by trigger\tnone\n")
	default:
		fmt.Fprintf(tw, "  calls\t%s\n", kv(calls))
		fmt.Fprintf(tw, "  hedges by trigger\t%s\n", strings.Join(hs, " "))
	}
	ttft := merged(f, ttftName)
	fmt.Fprintf(tw, "  time to first chunk (caller)\tp50 %s   p99 %s   estimated: interpolated in the GenAI buckets, as histogram_quantile does\n",
		secs(ttft.quantile(0.5)), secs(ttft.quantile(0.99)))
	fmt.Fprintf(tw, "    … exact, from hedgeprobe\tp50 %s   p99 %s   exact: order statistics of the %d calls' Stats.TimeToFirstChunk\n",
		dur(probe.TTFTQuantile(0.5)), dur(probe.TTFTQuantile(0.99)), len(probe.TTFTs))
	gen, act := merged(f, genName), merged(f, activeName)
	fmt.Fprintf(tw, "  generation per stream, mean\traw %s   active %s\n", secs(gen.mean()), secs(act.mean()))
	share := "n/a"
	if s := 1 - act.sum/gen.sum; gen.count > 0 && act.count > 0 && gen.sum > 0 && !math.IsNaN(s) && !math.IsInf(s, 0) {
		share = fmt.Sprintf("%.1f %%", 100*s)
	}
	fmt.Fprintf(tw, "  stall share of generation\t%s\n", share)
	if reporting {
		sd := merged(f, stallDur)
		stalled := counter(f, streamsName, map[string]string{"streamwatch_stalled": "yes"})
		fmt.Fprintf(tw, "  stalls (upstream)\t%s segments, mean %s, %s in all; %s of %s streams stalled\n",
			num(counter(f, stallsName, nil), true), secs(sd.mean()), secs(sd.sum), num(stalled, true), num(counter(f, streamsName, nil), true))
	} else {
		fmt.Fprintf(tw, "  stalls (upstream)\tn/a\n")
	}
	if cs := merged(f, callStall); cs.count > 0 {
		fmt.Fprintf(tw, "  stalls callers saw\t%s segments, %s in all over %d calls (a rescued call's wait before its rescue; a silence cut by the rescue is no upstream segment)\n",
			num(counter(f, callStalls, nil), true), secs(cs.sum), cs.count)
	} else {
		fmt.Fprintf(tw, "  stalls callers saw\t%s\n", notReported(semconv.MetricCallStallDuration))
	}
	fmt.Fprintf(tw, "  watchdog timeouts\tttft %s   stall %s\n", num(calls["ttft_timeout"], reporting), num(calls["stall_timeout"], reporting))
	fmt.Fprintf(tw, "  wasted chunks (never delivered)\t%s   (hedgeprobe: %d)\n", num(counter(f, wastedName, nil), reporting), probe.WastedChunks)
	fmt.Fprintf(tw, "  route ejections\t%s   (hedgeprobe: %d)\n", num(counter(f, ejectionsName, nil), reporting), probe.Ejections)
	// The collector counts a refusal once while it repeats unchanged (the
	// call span's events); the probe counts each.
	fmt.Fprintf(tw, "  rescues refused (budget, pushback)\t%s   (hedgeprobe: %d refusals; calls refused a rescue: %d)\n",
		num(counter(f, throttledName, nil), reporting), probe.Throttled, probe.ThrottledCalls)
	tw.Flush()
}

// counter is sumCounter for a collector that reports calls: the
// connector makes a counter's series at its first count, so a counter
// with no series there is a measured zero. (Where the collector reports
// no calls counter either, the report says n/a instead.)
func counter(f families, name string, want map[string]string) float64 {
	v, _ := sumCounter(f, name, want)
	return v
}

// notReported says a metric is missing from the scrape, so that an older
// collector, or one without the connector, reads as such and not as zero.
func notReported(metric string) string {
	return "n/a: this collector does not report " + metric
}

func kv(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+num(v, true))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// num prints a sample value, or n/a where the metric is missing (ok
// false) or the value is no number (a NaN or an infinity in the scrape).
func num(v float64, ok bool) string {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%v", v)
}

func dur(d time.Duration) string {
	if d == 0 {
		return "n/a"
	}
	return secs(d.Seconds())
}

func secs(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fs", v)
}
