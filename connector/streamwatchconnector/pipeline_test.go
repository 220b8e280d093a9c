package streamwatchconnector

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamwatch/streamwatch/internal/stagetest"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor"
	"github.com/streamwatch/streamwatch/semconv"
)

// rawProbeSpans strips everything the processor writes from the golden
// hedged input, leaving what hedgeprobe emits.
func rawProbeSpans(t *testing.T) ptrace.Traces {
	td := hedgedInput(t)
	stripDerived(td)
	return td
}

// stripDerived removes what the processor writes from every span of td.
func stripDerived(td ptrace.Traces) {
	derived := []string{
		string(semconv.TTFTMs), string(semconv.E2EMs), string(semconv.GenerationMs), string(semconv.StallMs),
		string(semconv.StallCount), string(semconv.ActiveGenerationMs), string(semconv.ITLMeanMs),
		string(semconv.StallThresholdMs), string(semconv.Derivation),
	}
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		for _, k := range derived {
			spans.At(i).Attributes().Remove(k)
		}
		spans.At(i).Events().RemoveIf(func(e ptrace.SpanEvent) bool { return e.Name() == semconv.EventStall })
	}
}

// TestContentlessIsNoStream: a timeline without a content chunk has stall
// figures of 0 (design.md §4), yet an attempt with one is no stream and a
// caller's view with one records no call stall — derived by the processor
// or here. The input: testdata/outcomes (two failed attempts with empty
// timelines beside three that streamed), underived, with an empty caller's
// view on the call whose attempt got nothing.
func TestContentlessIsNoStream(t *testing.T) {
	raw, err := golden.ReadTraces(filepath.Join("testdata", "outcomes", stagetest.Input))
	require.NoError(t, err)
	stripDerived(raw)
	spans := raw.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	viewSet := false
	for i := 0; i < spans.Len(); i++ {
		a := spans.At(i).Attributes()
		if o, ok := a.Get(string(semconv.Outcome)); ok && o.Str() == semconv.OutcomeTTFTTimeout {
			a.PutEmptySlice(string(semconv.CallerChunkOffsetsUs))
			viewSet = true
		}
	}
	require.True(t, viewSet, "the input has a ttft_timeout call")
	processed := ptrace.NewTraces()
	raw.CopyTo(processed)
	processed = runProcessor(t, processed, false)

	zeros := 0
	pspans := processed.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < pspans.Len(); i++ {
		a := pspans.At(i).Attributes()
		offs, ok := a.Get(string(semconv.ChunkOffsetsUs))
		if !ok {
			offs, ok = a.Get(string(semconv.CallerChunkOffsetsUs))
		}
		if !ok || offs.Slice().Len() > 0 {
			continue
		}
		stall, okStall := a.Get(string(semconv.StallMs))
		count, okCount := a.Get(string(semconv.StallCount))
		require.True(t, okStall && okCount, "span %d: stall figures written", i)
		assert.Zero(t, stall.Double())
		assert.Zero(t, count.Int())
		_, okTTFT := a.Get(string(semconv.TTFTMs))
		assert.False(t, okTTFT, "span %d: no ttft without a chunk", i)
		zeros++
	}
	assert.Equal(t, 3, zeros, "two empty attempt timelines and one empty caller's view")

	for name, td := range map[string]ptrace.Traces{"direct": raw, "via processor": processed} {
		md, _ := metricsAndTelemetry(t, td)
		assert.Equal(t, int64(3), sumOf(md, semconv.MetricStreams), "%s: streams are the attempts with content", name)
		assert.Equal(t, int64(0), sumOf(md, semconv.MetricCallStallDuration), "%s: no call stall without a chunk", name)
	}
}

// sumOf adds up the data points of the metric named name: a sum's values,
// a histogram's counts.
func sumOf(md pmetric.Metrics, name string) int64 {
	var n int64
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() != name {
					continue
				}
				switch m.Type() {
				case pmetric.MetricTypeSum:
					for _, dp := range m.Sum().DataPoints().All() {
						n += dp.IntValue()
					}
				case pmetric.MetricTypeHistogram:
					for _, dp := range m.Histogram().DataPoints().All() {
						n += int64(dp.Count())
					}
				}
			}
		}
	}
	return n
}

func connectorMetrics(t *testing.T, td ptrace.Traces) pmetric.Metrics {
	t.Helper()
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	snapshot(t, c)
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0]
}

// TestAfterProcessor runs raw probe spans through the real streamwatch
// processor (with stall spans on) and then the connector, and checks the
// metrics equal those the connector derives itself from the same raw spans:
// processor and connector share internal/breakdown, so a figure on a span
// and the metric built from it cannot disagree.
func TestAfterProcessor(t *testing.T) {
	pf := streamwatchprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig()
	pcfg.(*streamwatchprocessor.Config).StallSpans = true
	require.NoError(t, componenttest.CheckConfigStruct(pcfg))
	traceSink := &consumertest.TracesSink{}
	p, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pcfg, traceSink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), rawProbeSpans(t)))
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, traceSink.AllTraces(), 1)
	processed := traceSink.AllTraces()[0]
	spans := processed.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	require.Equal(t, 4, spans.Len(), "call, two attempts, one synthetic stall span")
	winner := spans.At(2)
	d, ok := winner.Attributes().Get(string(semconv.Derivation))
	require.True(t, ok, "the processor derived the winner")
	require.Equal(t, semconv.DerivationComplete, d.Str())

	viaProcessor := connectorMetrics(t, processed)
	direct := connectorMetrics(t, rawProbeSpans(t))
	require.NoError(t, pmetrictest.CompareMetrics(direct, viaProcessor,
		pmetrictest.IgnoreTimestamp(),
		pmetrictest.IgnoreStartTimestamp(),
		pmetrictest.IgnoreMetricDataPointsOrder(),
	))
}

// TestSameWithOrWithoutProcessor: for the processor's raw stage inputs of a
// resumed call, bursts and malformed timelines, the connector gives the
// same metrics and reports the same problems whether the processor derived
// the spans or the connector derives them itself on the shared path
// (internal/timeline). Only derived_spans, which says who derived, differs.
// With drop_timeline the processor's streamwatch.gap.bucket_counts stand in
// for the dropped timeline: time_per_output_chunk is the same and no gaps
// go missing.
func TestSameWithOrWithoutProcessor(t *testing.T) {
	for _, stage := range []string{"resumed_call", "burst", "malformed_timeline", "hedged", "compact"} {
		for _, drop := range []bool{false, true} {
			name := stage
			if drop {
				name += "/drop_timeline"
			}
			t.Run(name, func(t *testing.T) { sameWithOrWithoutProcessor(t, stage, drop) })
		}
	}
}

func sameWithOrWithoutProcessor(t *testing.T, stage string, dropTimeline bool) {
	directTel, viaTel := withAndWithoutProcessor(t, stageInput(t, stage), dropTimeline)
	const derived = "otelcol_connector_streamwatch_derived_spans{}"
	assert.Positive(t, directTel[derived], "the connector derived the raw spans")
	assert.Zero(t, viaTel[derived], "the processor had derived them")
	delete(directTel, derived)
	assert.Equal(t, directTel, viaTel)
}

// TestSameWithStaleFigures: figures a producer already put on a span
// that this derivation finds absent (no TTFT without a chunk, no gaps with
// one chunk) are not left beside the processor's streamwatch.derivation,
// where the connector would take them for the processor's own: the
// metrics are the same with or without the processor. The stage hedged's
// spans go along, so that a snapshot is never empty.
func TestSameWithStaleFigures(t *testing.T) {
	for name, tc := range map[string]struct {
		offsets []int64
		stale   func(pcommon.Map)
	}{
		"ttft_ms on an attempt without chunks": {nil, func(a pcommon.Map) { a.PutDouble(string(semconv.TTFTMs), 500) }},
		"ttft_ms as a string":                  {nil, func(a pcommon.Map) { a.PutStr(string(semconv.TTFTMs), "n/a") }},
		"gap counts on a one-chunk winner": {[]int64{100_000}, func(a pcommon.Map) {
			a.PutEmptySlice(string(semconv.GapBucketCounts)).FromRaw([]any{int64(0), int64(7)})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			raw := stageInput(t, "hedged")
			sp := raw.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
			rawAttempt(sp, tc.offsets)
			tc.stale(sp.Attributes())
			_, viaTel := withAndWithoutProcessor(t, raw, false)
			for k, n := range viaTel {
				if strings.HasPrefix(k, "otelcol_connector_streamwatch_invalid_values") {
					assert.Zero(t, n, k)
				}
			}
		})
	}
}

// stageInput reads the input of one of the processor's golden stages.
func stageInput(t *testing.T, stage string) ptrace.Traces {
	t.Helper()
	td, err := golden.ReadTraces(filepath.Join("..", "..", "processor", "streamwatchprocessor", "testdata", stage, stagetest.Input))
	require.NoError(t, err)
	return td
}

// withAndWithoutProcessor requires the same metrics of raw through the
// connector alone and through the processor (with drop_timeline or not)
// then the connector, and returns the connector's own counters of each.
func withAndWithoutProcessor(t *testing.T, raw ptrace.Traces, dropTimeline bool) (direct, via map[string]int64) {
	t.Helper()
	processed := ptrace.NewTraces()
	raw.CopyTo(processed)
	processed = runProcessor(t, processed, dropTimeline)
	directMd, direct := metricsAndTelemetry(t, raw)
	viaMd, via := metricsAndTelemetry(t, processed)
	require.NoError(t, pmetrictest.CompareMetrics(directMd, viaMd,
		pmetrictest.IgnoreTimestamp(),
		pmetrictest.IgnoreStartTimestamp(),
		pmetrictest.IgnoreMetricDataPointsOrder(),
	))
	return direct, via
}

// runProcessor runs td through the real streamwatch processor with its
// defaults, or with drop_timeline, and returns its output.
func runProcessor(t *testing.T, td ptrace.Traces, dropTimeline bool) ptrace.Traces {
	t.Helper()
	pf := streamwatchprocessor.NewFactory()
	cfg := pf.CreateDefaultConfig()
	cfg.(*streamwatchprocessor.Config).DropTimeline = dropTimeline
	sink := &consumertest.TracesSink{}
	p, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, sink.AllTraces(), 1)
	return sink.AllTraces()[0]
}

// metricsAndTelemetry runs td through a connector with its defaults and
// returns one flush and the connector's own counters.
func metricsAndTelemetry(t *testing.T, td ptrace.Traces) (pmetric.Metrics, map[string]int64) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := connectortest.NewNopSettings(NewFactory().Type())
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := &consumertest.MetricsSink{}
	c, err := newConnector(set, createDefaultConfig().(*Config), sink)
	require.NoError(t, err)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	snapshot(t, c)
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0], stagetest.Counters(t, tel)
}

// TestCallTTFTFromCallerView: the caller's time to first chunk comes from
// the call span's gen_ai.response.time_to_first_chunk; a call span without
// it (a producer that writes only the caller's view) gives the first
// chunk of its view instead — derived by the processor or here. The
// input: the ok call of testdata/outcomes alone, its view 1.2 s and 1.3 s.
func TestCallTTFTFromCallerView(t *testing.T) {
	for _, withAttr := range []bool{true, false} {
		raw, err := golden.ReadTraces(filepath.Join("testdata", "outcomes", stagetest.Input))
		require.NoError(t, err)
		stripDerived(raw)
		spans := raw.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		spans.RemoveIf(func(sp ptrace.Span) bool {
			o, ok := sp.Attributes().Get(string(semconv.Outcome))
			return !ok || o.Str() != semconv.OutcomeOK
		})
		require.Equal(t, 1, spans.Len())
		a := spans.At(0).Attributes()
		view := a.PutEmptySlice(string(semconv.CallerChunkOffsetsUs))
		view.AppendEmpty().SetInt(1_200_000)
		view.AppendEmpty().SetInt(1_300_000)
		want := 0.2 // the attribute's
		if !withAttr {
			a.Remove(string(semconv.GenAIResponseTimeToFirstChunk))
			want = 1.2
		}
		processed := ptrace.NewTraces()
		raw.CopyTo(processed)
		processed = runProcessor(t, processed, false)
		for name, td := range map[string]ptrace.Traces{"direct": raw, "via processor": processed} {
			md, _ := metricsAndTelemetry(t, td)
			assert.Equal(t, int64(1), sumOf(md, semconv.MetricTimeToFirstChunk), "%s, attribute %v", name, withAttr)
			assert.InDelta(t, want, histogramSum(md, semconv.MetricTimeToFirstChunk), 1e-9, "%s, attribute %v", name, withAttr)
		}
	}
}

// histogramSum is the sum of the first data point of histogram name.
func histogramSum(md pmetric.Metrics, name string) float64 {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() == name && m.Type() == pmetric.MetricTypeHistogram {
					return m.Histogram().DataPoints().At(0).Sum()
				}
			}
		}
	}
	return -1
}

// TestSegmentsPastTheCap: an attempt with 100 silences, each a 3 s gap
// between 100 ms ones. streamwatch.stalls counts all 100 whoever derives
// it; streamwatch.stall.duration records the first 64, as the processor's
// default max_segments writes them. Derived here, the other 36 are
// counted in segments_dropped; after the processor, it is the processor
// that counts them (its own segments_dropped), and the connector none.
func TestSegmentsPastTheCap(t *testing.T) {
	offsets := []int64{100_000}
	for range 100 {
		last := offsets[len(offsets)-1]
		offsets = append(offsets, last+3_000_000, last+3_100_000)
	}
	raw := ptrace.NewTraces()
	sp := raw.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	rawAttempt(sp, offsets)
	sp.SetEndTimestamp(sp.StartTimestamp() + pcommon.Timestamp(offsets[len(offsets)-1]*1000))
	processed := ptrace.NewTraces()
	raw.CopyTo(processed)
	processed = runProcessor(t, processed, false)

	const dropped = "otelcol_connector_streamwatch_segments_dropped{}"
	for name, c := range map[string]struct {
		td      ptrace.Traces
		dropped int64
	}{"direct": {raw, 36}, "via processor": {processed, 0}} {
		md, tel := metricsAndTelemetry(t, c.td)
		assert.Equal(t, int64(100), sumOf(md, semconv.MetricStalls), name)
		assert.Equal(t, int64(64), sumOf(md, semconv.MetricStallDuration), name)
		assert.InDelta(t, 64*3.0, histogramSum(md, semconv.MetricStallDuration), 1e-6, name)
		assert.Equal(t, c.dropped, tel[dropped], name)
	}
}
