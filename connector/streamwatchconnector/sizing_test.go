package streamwatchconnector

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/semconv"
)

// The sizing of docs/scale.md: the series a replica makes for U upstreams
// (route, provider, model), C call pairs (requested model, winning route)
// and S services, and the ceiling max_series puts on it. Both are figures
// operators plan with, so they are checked here against what the
// connector really emits.

// sizingAttempt appends a derived attempt span of upstream u.
func sizingAttempt(ss ptrace.SpanSlice, u int, outcome, trigger, derivation string, stalls, chunks, delivered int64) {
	sp := ss.AppendEmpty()
	sp.SetName("chat")
	sp.SetStartTimestamp(pcommon.Timestamp(1e18))
	sp.SetEndTimestamp(pcommon.Timestamp(1e18 + 5e9))
	a := sp.Attributes()
	a.PutStr(string(semconv.GenAIOperationName), "chat") // one operation: the table's case
	a.PutStr(string(semconv.GenAIProviderName), fmt.Sprintf("provider-%d", u))
	a.PutStr(string(semconv.GenAIRequestModel), fmt.Sprintf("model-%d", u))
	a.PutStr(string(semconv.Route), fmt.Sprintf("route-%d", u))
	a.PutInt(string(semconv.AttemptIndex), 1)
	a.PutStr(string(semconv.AttemptTrigger), trigger)
	a.PutStr(string(semconv.AttemptOutcome), outcome)
	a.PutInt(string(semconv.ChunkCount), chunks)
	a.PutInt(string(semconv.ChunksDelivered), delivered)
	a.PutStr(string(semconv.Derivation), derivation)
	a.PutDouble(string(semconv.TTFTMs), 100)
	a.PutDouble(string(semconv.GenerationMs), 4000)
	a.PutDouble(string(semconv.ActiveGenerationMs), 1000)
	a.PutDouble(string(semconv.StallMs), 3000)
	a.PutInt(string(semconv.StallCount), stalls)
	a.PutEmptySlice(string(semconv.GapBucketCounts)).AppendEmpty().SetInt(chunks - 1)
	ev := sp.Events().AppendEmpty()
	ev.SetName(semconv.EventStall)
	ev.Attributes().PutDouble(string(semconv.StallDurationMs), 3000)
}

// sizingCall appends a derived call span of pair (model, route), with
// error.type errType when it is not empty and, when evRoute is not empty,
// events about route evRoute: one ejection per reason and one throttled
// hedge per trigger and reason that hedgeprobe can refuse (a resume only
// for the budget: one no route can take is skipped, not throttled).
func sizingCall(ss ptrace.SpanSlice, model, route, outcome, errType, evRoute string) {
	sp := ss.AppendEmpty()
	sp.SetName(semconv.CallSpanName)
	sp.SetStartTimestamp(pcommon.Timestamp(1e18))
	sp.SetEndTimestamp(pcommon.Timestamp(1e18 + 5e9))
	a := sp.Attributes()
	a.PutStr(string(semconv.GenAIOperationName), "chat")
	a.PutStr(string(semconv.GenAIRequestModel), model)
	a.PutStr(string(semconv.WinnerRoute), route)
	a.PutStr(string(semconv.Outcome), outcome)
	a.PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), 0.2)
	// The processor's figures of a caller's view that holds content.
	a.PutStr(string(semconv.Derivation), semconv.DerivationComplete)
	a.PutDouble(string(semconv.TTFTMs), 200)
	a.PutDouble(string(semconv.StallMs), 3000)
	a.PutInt(string(semconv.StallCount), 1)
	if errType != "" {
		a.PutStr(string(semconv.ErrorType), errType)
	}
	if evRoute == "" {
		return
	}
	for _, reason := range []string{"failures", "retry_after"} {
		ev := sp.Events().AppendEmpty()
		ev.SetName(semconv.EventRouteEjected)
		ev.Attributes().PutStr(string(semconv.EventRoute), evRoute)
		ev.Attributes().PutStr(string(semconv.EventEjectionReason), reason)
	}
	for _, trigger := range []string{semconv.TriggerTTFT, semconv.TriggerStall, semconv.TriggerError, semconv.TriggerResume} {
		for _, reason := range []string{"budget", "pushback"} {
			if trigger == semconv.TriggerResume && reason == "pushback" {
				continue
			}
			ev := sp.Events().AppendEmpty()
			ev.SetName(semconv.EventHedgeThrottled)
			ev.Attributes().PutStr(string(semconv.EventRoute), evRoute)
			ev.Attributes().PutStr(string(semconv.EventTrigger), trigger)
			ev.Attributes().PutStr(string(semconv.EventThrottleReason), reason)
		}
	}
}

// seriesOf counts, per metric, the OTel series (data points) and the
// Prometheus series they become: a histogram point is its buckets, _sum
// and _count.
func seriesOf(md pmetric.Metrics) (otel, prom map[string]int) {
	otel, prom = map[string]int{}, map[string]int{}
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				switch m.Type() {
				case pmetric.MetricTypeHistogram:
					for _, dp := range m.Histogram().DataPoints().All() {
						otel[m.Name()]++
						prom[m.Name()] += dp.ExplicitBounds().Len() + 1 + 2
					}
				case pmetric.MetricTypeSum:
					otel[m.Name()] += m.Sum().DataPoints().Len()
					prom[m.Name()] += m.Sum().DataPoints().Len()
				}
			}
		}
	}
	return otel, prom
}

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

func flushOnce(t *testing.T, cfg *Config, td ptrace.Traces) pmetric.Metrics {
	t.Helper()
	sink := &consumertest.MetricsSink{}
	c := create(t, cfg, sink)
	require.NoError(t, c.ConsumeTraces(t.Context(), td))
	snapshot(t, c)
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0]
}

// TestSizing fills every label value of the sizing table for U upstreams,
// C call pairs and S services and checks the table metric by metric and
// the bound (266 U + (197 + 17 E) C) × S in Prometheus series, E the
// error.type values of calls that ended in error; then fills every
// metric past the default max_series and checks the ceiling,
// 8 histograms × 1,001 × 17 + 8 counters × 1,001. It proves the table's
// count for the label values the table lists; a new label value would
// need a new row here and in docs/scale.md.
func TestSizing(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		const U, C, S, E = 2, 3, 2, 3
		td := ptrace.NewTraces()
		for s := range S {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", s))
			ss := rs.ScopeSpans().AppendEmpty().Spans()
			for u := range U {
				for _, outcome := range []string{semconv.AttemptOutcomeWinner, semconv.AttemptOutcomeCanceled, semconv.AttemptOutcomeFailed} {
					// A winner that delivered 9 of its 10 chunks wastes one,
					// so wasted_chunks has a winner series too.
					delivered := int64(0)
					if outcome == semconv.AttemptOutcomeWinner {
						delivered = 9
					}
					for _, d := range []string{semconv.DerivationComplete, semconv.DerivationPartial, semconv.DerivationBurst} {
						for _, stalls := range []int64{0, 1} {
							for _, trigger := range []string{semconv.TriggerTTFT, semconv.TriggerStall, semconv.TriggerError, semconv.TriggerResume} {
								sizingAttempt(ss, u, outcome, trigger, d, stalls, 10, delivered)
							}
						}
					}
				}
				// Ejections and throttled hedges are per route (and
				// reason, trigger): ride on a call of the first pair,
				// whose outcomes are all filled anyway.
				sizingCall(ss, "cmodel-0", "croute-0", semconv.OutcomeOK, "", fmt.Sprintf("route-%d", u))
			}
			for c := range C {
				// What hedgeprobe writes: one error.type for each timeout,
				// two for canceled (the caller's cancel or its deadline).
				for _, o := range [][2]string{{semconv.OutcomeOK, ""},
					{semconv.OutcomeTTFTTimeout, "ttft_timeout"}, {semconv.OutcomeStallTimeout, "stall_timeout"},
					{semconv.OutcomeCanceled, "canceled"}, {semconv.OutcomeCanceled, "deadline_exceeded"}} {
					sizingCall(ss, fmt.Sprintf("cmodel-%d", c), fmt.Sprintf("croute-%d", c), o[0], o[1], "")
				}
				for e := range E {
					sizingCall(ss, fmt.Sprintf("cmodel-%d", c), fmt.Sprintf("croute-%d", c), semconv.OutcomeError, fmt.Sprintf("%d", 500+e), "")
				}
			}
		}
		otel, prom := seriesOf(flushOnce(t, createDefaultConfig().(*Config), td))
		for name, want := range map[string]int{ // the table of docs/scale.md
			semconv.MetricAttemptTimeToFirstChunk:  3 * U * S,
			semconv.MetricGenerationDuration:       3 * U * S,
			semconv.MetricActiveGenerationDuration: 3 * U * S,
			semconv.MetricStallDuration:            3 * U * S,
			semconv.MetricTimePerOutputChunk:       U * S,
			semconv.MetricStreams:                  18 * U * S,
			semconv.MetricStalls:                   3 * U * S,
			semconv.MetricWastedChunks:             3 * U * S,
			semconv.MetricHedges:                   12 * U * S,
			semconv.MetricRouteEjections:           2 * U * S,
			semconv.MetricThrottledHedges:          7 * U * S,
			semconv.MetricTimeToFirstChunk:         C * S,
			semconv.MetricOperationDuration:        (5 + E) * C * S,
			semconv.MetricCalls:                    5 * C * S,
			semconv.MetricCallStallDuration:        5 * C * S,
			semconv.MetricCallStalls:               5 * C * S,
		} {
			require.Equalf(t, want, otel[name], "series of %s", name)
		}
		require.Len(t, otel, 16)
		require.Equal(t, (266*U+(197+17*E)*C)*S, total(prom), "Prometheus series")
	})
	t.Run("cap", func(t *testing.T) {
		if testing.Short() {
			t.Skip("fills 16 metrics past the cap")
		}
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc")
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for u := range 1100 {
			sizingAttempt(ss, u, semconv.AttemptOutcomeWinner, semconv.TriggerTTFT, semconv.DerivationComplete, 1, 10, 9)
			sizingCall(ss, "m", fmt.Sprintf("route-%d", u), semconv.OutcomeOK, "", fmt.Sprintf("route-%d", u))
		}
		cfg := createDefaultConfig().(*Config)
		require.Equal(t, 1000, cfg.MaxSeries)
		otel, prom := seriesOf(flushOnce(t, cfg, td))
		require.Len(t, otel, 16)
		for name, n := range otel {
			require.Equalf(t, 1001, n, "%s: max_series + the overflow series", name)
		}
		require.Equal(t, 8*1001*17+8*1001, total(prom))
	})
}
