package streamwatchconnector

import (
	"context"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/measure"
	"github.com/streamwatch/streamwatch/internal/stagetest"
	"github.com/streamwatch/streamwatch/semconv"
)

// validAttempt writes a well-formed, processed winning attempt.
func validAttempt(sp ptrace.Span) {
	rawAttempt(sp, []int64{100_000, 200_000, 300_000})
	a := sp.Attributes()
	a.PutDouble(string(semconv.TTFTMs), 100)
	a.PutDouble(string(semconv.GenerationMs), 200)
	a.PutDouble(string(semconv.ActiveGenerationMs), 200)
	a.PutInt(string(semconv.StallCount), 0)
	a.PutStr(string(semconv.Derivation), semconv.DerivationComplete)
}

// rawAttempt writes a winning attempt with the timeline offsets, not
// derived.
func rawAttempt(sp ptrace.Span, offsets []int64) {
	sp.SetName("chat gpt-x")
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{2})
	sp.SetStartTimestamp(1_000_000_000)
	sp.SetEndTimestamp(2_000_000_000)
	a := sp.Attributes()
	a.PutStr(string(semconv.GenAIProviderName), "openai")
	a.PutStr(string(semconv.GenAIRequestModel), "gpt-x")
	a.PutStr(string(semconv.Route), "a")
	a.PutInt(string(semconv.AttemptIndex), 1)
	a.PutStr(string(semconv.AttemptTrigger), semconv.TriggerTTFT)
	a.PutStr(string(semconv.AttemptOutcome), semconv.AttemptOutcomeWinner)
	a.PutInt(string(semconv.ChunkCount), int64(len(offsets)))
	s := a.PutEmptySlice(string(semconv.ChunkOffsetsUs))
	for _, o := range offsets {
		s.AppendEmpty().SetInt(o)
	}
}

func validCall(sp ptrace.Span) {
	sp.SetName(semconv.CallSpanName)
	sp.SetStartTimestamp(1_000_000_000)
	sp.SetEndTimestamp(2_000_000_000)
	a := sp.Attributes()
	a.PutStr(string(semconv.Outcome), semconv.OutcomeOK)
	a.PutStr(string(semconv.GenAIRequestModel), "gpt-x")
	a.PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), 0.1)
}

// unprocessed removes what the processor writes: the connector derives
// the span itself.
func unprocessed(sp ptrace.Span) {
	for _, k := range []string{string(semconv.Derivation), string(semconv.TTFTMs), string(semconv.GenerationMs), string(semconv.ActiveGenerationMs), string(semconv.StallCount)} {
		sp.Attributes().Remove(k)
	}
}

// TestBadInput: a value that cannot be used is skipped and counted by
// attribute and reason; the rest of the span still counts; nothing panics.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name   string
		call   bool
		mutate func(sp ptrace.Span)
		// want is the telemetry key "attribute=…,reason=…" expected once;
		// "": no invalid value at all.
		want string
		// missing is a metric that must not be recorded; kept one that must.
		missing, kept string
	}{
		{"ttft as string", false, func(sp ptrace.Span) { sp.Attributes().PutStr(string(semconv.TTFTMs), "100") },
			"attribute=streamwatch.ttft_ms,reason=wrong_type", semconv.MetricAttemptTimeToFirstChunk, semconv.MetricGenerationDuration},
		{"negative generation", false, func(sp ptrace.Span) { sp.Attributes().PutDouble(string(semconv.GenerationMs), -5) },
			"attribute=streamwatch.generation_ms,reason=negative", semconv.MetricGenerationDuration, semconv.MetricAttemptTimeToFirstChunk},
		{"NaN active", false, func(sp ptrace.Span) { sp.Attributes().PutDouble(string(semconv.ActiveGenerationMs), math.NaN()) },
			"attribute=streamwatch.active_generation_ms,reason=not_finite", semconv.MetricActiveGenerationDuration, semconv.MetricGenerationDuration},
		{"infinite ttft", false, func(sp ptrace.Span) { sp.Attributes().PutDouble(string(semconv.TTFTMs), math.Inf(1)) },
			"attribute=streamwatch.ttft_ms,reason=not_finite", semconv.MetricAttemptTimeToFirstChunk, semconv.MetricStreams},
		{"stall count as bool", false, func(sp ptrace.Span) { sp.Attributes().PutBool(string(semconv.StallCount), true) },
			"attribute=streamwatch.stall_count,reason=wrong_type", semconv.MetricStreams, semconv.MetricAttemptTimeToFirstChunk},
		{"fractional stall count", false, func(sp ptrace.Span) { sp.Attributes().PutDouble(string(semconv.StallCount), 1.5) },
			"attribute=streamwatch.stall_count,reason=wrong_type", semconv.MetricStalls, semconv.MetricGenerationDuration},
		{"negative chunk count", false, func(sp ptrace.Span) {
			sp.Attributes().PutStr(string(semconv.AttemptOutcome), semconv.AttemptOutcomeCanceled)
			sp.Attributes().PutInt(string(semconv.ChunkCount), -3)
		}, "attribute=streamwatch.chunk.count,reason=negative", semconv.MetricWastedChunks, semconv.MetricHedges},
		// A count no stream can hold is a broken producer: summed over a
		// few spans it wrapped the cumulative counter negative.
		{"stall count past the bound", false, func(sp ptrace.Span) { sp.Attributes().PutInt(string(semconv.StallCount), 1<<62) },
			"attribute=streamwatch.stall_count,reason=out_of_range", semconv.MetricStalls, semconv.MetricGenerationDuration},
		{"chunk count past the bound", false, func(sp ptrace.Span) {
			sp.Attributes().PutStr(string(semconv.AttemptOutcome), semconv.AttemptOutcomeCanceled)
			sp.Attributes().PutInt(string(semconv.ChunkCount), math.MaxInt64)
		}, "attribute=streamwatch.chunk.count,reason=out_of_range", semconv.MetricWastedChunks, semconv.MetricHedges},
		// More delivered than received (outside review: it was skipped
		// uncounted): reported, and left out.
		{"delivered above chunk count", false, func(sp ptrace.Span) { sp.Attributes().PutInt(string(semconv.ChunksDelivered), 5) },
			"attribute=streamwatch.chunk.delivered,reason=out_of_range", "", semconv.MetricGenerationDuration},
		{"index as string", false, func(sp ptrace.Span) { sp.Attributes().PutStr(string(semconv.AttemptIndex), "1") },
			"attribute=streamwatch.attempt.index,reason=wrong_type", semconv.MetricHedges, semconv.MetricGenerationDuration},
		{"route as int", false, func(sp ptrace.Span) { sp.Attributes().PutInt(string(semconv.Route), 7) },
			"attribute=streamwatch.route,reason=wrong_type", "", semconv.MetricHedges},
		{"offsets as string", false, func(sp ptrace.Span) { sp.Attributes().PutStr(string(semconv.ChunkOffsetsUs), "1,2,3") },
			"attribute=streamwatch.chunk.offsets_us,reason=anomaly", semconv.MetricTimePerOutputChunk, semconv.MetricGenerationDuration},
		{"offsets with a string element", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(1), "x"})
		}, "attribute=streamwatch.chunk.offsets_us,reason=anomaly", semconv.MetricTimePerOutputChunk, semconv.MetricGenerationDuration},
		{"offsets going back", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(300), int64(100), int64(200)})
		}, "attribute=streamwatch.chunk.offsets_us,reason=anomaly", semconv.MetricTimePerOutputChunk, semconv.MetricGenerationDuration},
		{"offsets before start", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(-100), int64(100)})
		}, "attribute=streamwatch.chunk.offsets_us,reason=anomaly", semconv.MetricTimePerOutputChunk, semconv.MetricGenerationDuration},
		{"unprocessed offsets going back", false, func(sp ptrace.Span) {
			unprocessed(sp)
			sp.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(300), int64(100), int64(200)})
		}, "attribute=streamwatch.derivation,reason=anomaly", semconv.MetricGenerationDuration, semconv.MetricHedges},
		// Keepalives only refine the stall segments: an unreadable list is
		// left out, and the chunks are measured all the same.
		{"unprocessed, keepalives as string", false, func(sp ptrace.Span) {
			unprocessed(sp)
			sp.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(100_000), int64(200_000), int64(5_200_000)})
			sp.Attributes().PutStr(string(semconv.KeepaliveOffsetsUs), "not a list")
		}, "", "", semconv.MetricStallDuration},
		// A bad streamwatch.gap.bucket_counts is reported, and the gaps are
		// taken from the timeline instead.
		{"gap counts as string", false, func(sp ptrace.Span) { sp.Attributes().PutStr(string(semconv.GapBucketCounts), "0,2") },
			"attribute=streamwatch.gap.bucket_counts,reason=wrong_type", "", semconv.MetricTimePerOutputChunk},
		{"gap counts with a double", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.GapBucketCounts)).FromRaw([]any{int64(0), 2.0})
		}, "attribute=streamwatch.gap.bucket_counts,reason=wrong_type", "", semconv.MetricTimePerOutputChunk},
		{"gap counts negative", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.GapBucketCounts)).FromRaw([]any{int64(0), int64(-2)})
		}, "attribute=streamwatch.gap.bucket_counts,reason=negative", "", semconv.MetricTimePerOutputChunk},
		{"gap counts past the last bucket", false, func(sp ptrace.Span) {
			raw := make([]any, len(semconv.GenAIDurationBuckets)+2)
			for i := range raw {
				raw[i] = int64(1)
			}
			sp.Attributes().PutEmptySlice(string(semconv.GapBucketCounts)).FromRaw(raw)
		}, "attribute=streamwatch.gap.bucket_counts,reason=out_of_range", "", semconv.MetricTimePerOutputChunk},
		// Counts no stream can hold wrapped the histogram's count; counts
		// of no gap at all (the processor writes them for n ≥ 2) lost the
		// winner's gaps unseen.
		{"gap counts past the bound", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.GapBucketCounts)).FromRaw([]any{int64(math.MaxInt64), int64(math.MaxInt64), int64(3)})
		}, "attribute=streamwatch.gap.bucket_counts,reason=out_of_range", "", semconv.MetricTimePerOutputChunk},
		{"gap counts of no gap", false, func(sp ptrace.Span) {
			sp.Attributes().PutEmptySlice(string(semconv.GapBucketCounts)).FromRaw([]any{int64(0), int64(0)})
		}, "attribute=streamwatch.gap.bucket_counts,reason=out_of_range", "", semconv.MetricTimePerOutputChunk},
		{"gap counts empty", false, func(sp ptrace.Span) { sp.Attributes().PutEmptySlice(string(semconv.GapBucketCounts)) },
			"attribute=streamwatch.gap.bucket_counts,reason=out_of_range", "", semconv.MetricTimePerOutputChunk},
		// A derivation that is not the processor's is a producer's: it kept
		// the span's timeline from being derived (outside review).
		{"unprocessed, derivation as int", false, func(sp ptrace.Span) {
			unprocessed(sp)
			sp.Attributes().PutInt(string(semconv.Derivation), 3)
		}, "attribute=streamwatch.derivation,reason=wrong_type", "", semconv.MetricGenerationDuration},
		{"unprocessed, derivation a word of its own", false, func(sp ptrace.Span) {
			unprocessed(sp)
			sp.Attributes().PutStr(string(semconv.Derivation), "done")
		}, "attribute=streamwatch.derivation,reason=unknown_value", "", semconv.MetricGenerationDuration},
		{"processor anomaly", false, func(sp ptrace.Span) { sp.Attributes().PutStr(string(semconv.Derivation), semconv.DerivationAnomaly) },
			"attribute=streamwatch.derivation,reason=anomaly", semconv.MetricGenerationDuration, semconv.MetricHedges},
		{"stall event with NaN", false, func(sp ptrace.Span) {
			e := sp.Events().AppendEmpty()
			e.SetName(semconv.EventStall)
			e.Attributes().PutDouble(string(semconv.StallDurationMs), math.NaN())
		}, "attribute=streamwatch.stall.duration_ms,reason=not_finite", semconv.MetricStallDuration, semconv.MetricGenerationDuration},
		{"stall event without duration", false, func(sp ptrace.Span) { sp.Events().AppendEmpty().SetName(semconv.EventStall) },
			"attribute=streamwatch.stall.duration_ms,reason=missing", semconv.MetricStallDuration, semconv.MetricGenerationDuration},
		{"a century of generation", false, func(sp ptrace.Span) { sp.Attributes().PutDouble(string(semconv.GenerationMs), 3.2e12) },
			"attribute=streamwatch.generation.duration,reason=out_of_range", semconv.MetricGenerationDuration, semconv.MetricAttemptTimeToFirstChunk},
		{"call without outcome", true, func(sp ptrace.Span) { sp.Attributes().Remove(string(semconv.Outcome)) },
			"attribute=streamwatch.outcome,reason=missing", semconv.MetricCalls, ""},
		{"call outcome as int", true, func(sp ptrace.Span) { sp.Attributes().PutInt(string(semconv.Outcome), 0) },
			"attribute=streamwatch.outcome,reason=wrong_type", semconv.MetricCalls, ""},
		{"call ending before it starts", true, func(sp ptrace.Span) { sp.SetEndTimestamp(10) },
			"attribute=span.duration,reason=negative", semconv.MetricOperationDuration, semconv.MetricCalls},
		{"call ttft negative", true, func(sp ptrace.Span) { sp.Attributes().PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), -0.1) },
			"attribute=gen_ai.response.time_to_first_chunk,reason=negative", semconv.MetricTimeToFirstChunk, semconv.MetricCalls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := ptrace.NewTraces()
			sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			if tt.call {
				validCall(sp)
			} else {
				validAttempt(sp)
			}
			tt.mutate(sp)

			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			set := connectortest.NewNopSettings(NewFactory().Type())
			set.TelemetrySettings = tel.NewTelemetrySettings()
			sink := &consumertest.MetricsSink{}
			c, err := newConnector(set, createDefaultConfig().(*Config), sink)
			require.NoError(t, err)
			require.NotPanics(t, func() { require.NoError(t, c.ConsumeTraces(context.Background(), td)) })
			snapshot(t, c)

			got := stagetest.Counters(t, tel)
			if tt.want == "" {
				for k := range got {
					assert.NotContains(t, k, "invalid_values", "telemetry: %v", got)
				}
			} else {
				assert.Equal(t, int64(1), got["otelcol_connector_streamwatch_invalid_values{"+tt.want+"}"], "telemetry: %v", got)
			}
			names := map[string]bool{}
			for _, md := range sink.AllMetrics() {
				assertSane(t, md)
				ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
				for i := 0; i < ms.Len(); i++ {
					names[ms.At(i).Name()] = true
				}
			}
			if tt.missing != "" {
				assert.False(t, names[tt.missing], "%s recorded", tt.missing)
			}
			if tt.kept != "" {
				assert.True(t, names[tt.kept], "%s not recorded", tt.kept)
			}
		})
	}
}

// assertSane checks what no input may break: finite non-negative sums,
// bucket counts that add up, non-negative counters, labels that are UTF-8.
func assertSane(t testing.TB, md pmetric.Metrics) {
	t.Helper()
	rms := md.ResourceMetrics()
	utf8Labels := func(where string, a pcommon.Map) {
		t.Helper()
		for k, v := range a.All() {
			if !utf8.ValidString(k) || !utf8.ValidString(v.AsString()) {
				t.Fatalf("%s: label %q = %q is not UTF-8", where, k, v.AsString())
			}
			if len(v.AsString()) > measure.MaxLabelBytes {
				t.Fatalf("%s: label %q is %d bytes long", where, k, len(v.AsString()))
			}
		}
	}
	for i := 0; i < rms.Len(); i++ {
		utf8Labels("resource", rms.At(i).Resource().Attributes())
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeHistogram:
					dps := m.Histogram().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						dp := dps.At(d)
						utf8Labels(m.Name(), dp.Attributes())
						if math.IsNaN(dp.Sum()) || math.IsInf(dp.Sum(), 0) || dp.Sum() < 0 {
							t.Fatalf("%s: sum %v", m.Name(), dp.Sum())
						}
						var n uint64
						for _, c := range dp.BucketCounts().AsRaw() {
							n += c
						}
						if n != dp.Count() || dp.BucketCounts().Len() != dp.ExplicitBounds().Len()+1 {
							t.Fatalf("%s: buckets %v, count %d", m.Name(), dp.BucketCounts().AsRaw(), dp.Count())
						}
					}
				case pmetric.MetricTypeSum:
					dps := m.Sum().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						utf8Labels(m.Name(), dps.At(d).Attributes())
						if dps.At(d).IntValue() < 0 {
							t.Fatalf("%s: negative counter %d", m.Name(), dps.At(d).IntValue())
						}
					}
				}
			}
		}
	}
}

// TestLabelsTooLong (outside review): max_series bounded the series, not
// what each held — a megabyte model name was kept by every series it
// made, and sent at every flush. A label value is cut at
// measure.MaxLabelBytes, at a character's start, and counted too_long; a
// short value that its UTF-8 repair lengthens past the bound is cut too,
// counted not_utf8 alone.
func TestLabelsTooLong(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", strings.Repeat("s", 1<<20))
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	validCall(spans.AppendEmpty())
	validAttempt(spans.AppendEmpty())
	call, attempt := spans.At(0).Attributes(), spans.At(1).Attributes()
	model := strings.Repeat("é", 1000) // 2 bytes each: 256 is a character's start
	call.PutStr(string(semconv.GenAIRequestModel), model)
	call.PutStr("tenant", "x"+strings.Repeat("é", 200)) // 401 bytes: 256 is not
	attempt.PutStr(string(semconv.GenAIRequestModel), model)
	attempt.PutStr(string(semconv.Route), strings.Repeat("r", 300))
	attempt.PutStr(string(semconv.GenAIProviderName), strings.Repeat("\xffa", 100)) // 200 bytes; 400 repaired

	cfg := createDefaultConfig().(*Config)
	cfg.Dimensions = []string{"tenant"}
	sink, got := consumeCounted(t, cfg, td)
	for _, k := range []string{"service.name", string(semconv.GenAIRequestModel), "tenant", string(semconv.Route)} {
		assert.Positive(t, got["otelcol_connector_streamwatch_invalid_values{attribute="+k+",reason=too_long}"], "%s: telemetry %v", k, got)
	}
	provider := string(semconv.GenAIProviderName)
	assert.Positive(t, got["otelcol_connector_streamwatch_invalid_values{attribute="+provider+",reason=not_utf8}"], "telemetry %v", got)
	assert.Zero(t, got["otelcol_connector_streamwatch_invalid_values{attribute="+provider+",reason=too_long}"], "a 200-byte value counted too_long: %v", got)
	calls := callsBy(t, sink)
	want := strings.Repeat("s", 256) + "|" + strings.Repeat("é", 128) + "|x" + strings.Repeat("é", 127)
	assert.Equal(t, map[string]int64{want: 1}, calls)
}

// Strings that become labels and are not UTF-8 (pdata does not check what
// it unmarshals) are repaired and reported, and their spans still count.
// A series made from them was dropped by the Prometheus exporter on every
// scrape, and made every later flush to an OTLP receiver that checks
// strings fail whole, valid series included.
func TestLabelsNotUTF8(t *testing.T) {
	td := ptrace.NewTraces()
	for _, service := range []string{"svc", "svc-\xff"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		validCall(spans.AppendEmpty())
		validAttempt(spans.AppendEmpty())
	}
	bad := td.ResourceSpans().At(1).ScopeSpans().At(0).Spans()
	call, attempt := bad.At(0).Attributes(), bad.At(1).Attributes()
	call.PutStr(string(semconv.GenAIRequestModel), "gpt-\xc3")
	call.PutStr("tenant", "t\xfe\xfe1")
	attempt.PutStr(string(semconv.GenAIRequestModel), "gpt-\xc3")
	attempt.PutStr(string(semconv.GenAIProviderName), "open\xffai")
	attempt.PutStr(string(semconv.Route), "a\xff")

	cfg := createDefaultConfig().(*Config)
	cfg.Dimensions = []string{"tenant"}
	sink, got := consumeCounted(t, cfg, td)
	for _, k := range []string{"service.name", string(semconv.GenAIRequestModel), "tenant", string(semconv.GenAIProviderName), string(semconv.Route)} {
		assert.Positive(t, got["otelcol_connector_streamwatch_invalid_values{attribute="+k+",reason=not_utf8}"], "%s: telemetry %v", k, got)
	}
	calls := callsBy(t, sink)
	assert.Equal(t, map[string]int64{"svc|gpt-x|": 1, "svc-\uFFFD|gpt-\uFFFD|t\uFFFD1": 1}, calls)
}

// An error.type that is text, not a code, is recorded as "_OTHER": an
// instrumentation that put an upstream's words there (which can quote the
// prompt or the answer) made them a label of the duration.
func TestErrorTypeThatIsText(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	// The last is text past the label bound too: counted once, as text.
	for _, et := range []string{"SECRET-ANSWER begins", "429", "*net.OpError", `{"input":"x"}`, strings.Repeat("x ", 150)} {
		sp := spans.AppendEmpty()
		validCall(sp)
		sp.Attributes().PutStr(string(semconv.Outcome), semconv.OutcomeError)
		sp.Attributes().PutStr(string(semconv.ErrorType), et)
	}

	sink, got := consumeCounted(t, createDefaultConfig().(*Config), td)
	assert.Equal(t, int64(3), got["otelcol_connector_streamwatch_invalid_values{attribute=error.type,reason=not_a_code}"], "telemetry %v", got)
	assert.Zero(t, got["otelcol_connector_streamwatch_invalid_values{attribute=error.type,reason=too_long}"], "telemetry %v", got)
	types := map[string]uint64{}
	for _, md := range sink.AllMetrics() {
		assertSane(t, md)
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				if ms.At(j).Name() != semconv.MetricOperationDuration {
					continue
				}
				dps := ms.At(j).Histogram().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					et, _ := dps.At(d).Attributes().Get(string(semconv.ErrorType))
					types[et.Str()] += dps.At(d).Count()
				}
			}
		}
	}
	assert.Equal(t, map[string]uint64{"_OTHER": 3, "429": 1, "*net.OpError": 1}, types)
}

// consumeCounted runs td through a connector of cfg and flushes it; it
// returns what the connector sent and its own telemetry's counters.
func consumeCounted(t *testing.T, cfg *Config, td ptrace.Traces) (*consumertest.MetricsSink, map[string]int64) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := connectortest.NewNopSettings(NewFactory().Type())
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := &consumertest.MetricsSink{}
	c, err := newConnector(set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	snapshot(t, c)
	return sink, stagetest.Counters(t, tel)
}

// callsBy adds up the calls of every snapshot in sink by
// "service.name|model|tenant", each snapshot checked by assertSane.
func callsBy(t *testing.T, sink *consumertest.MetricsSink) map[string]int64 {
	t.Helper()
	calls := map[string]int64{}
	for _, md := range sink.AllMetrics() {
		assertSane(t, md)
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			svc, _ := rms.At(i).Resource().Attributes().Get("service.name")
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				if ms.At(j).Name() != semconv.MetricCalls {
					continue
				}
				dps := ms.At(j).Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					model, _ := dps.At(d).Attributes().Get(string(semconv.GenAIRequestModel))
					tenant, _ := dps.At(d).Attributes().Get("tenant")
					calls[svc.Str()+"|"+model.Str()+"|"+tenant.Str()] += dps.At(d).IntValue()
				}
			}
		}
	}
	return calls
}

// A long value with bad bytes past the cut is counted as both (a review:
// the cut hid them), and a long run of bad bytes — no character starts
// in it — is cut at the bound and repaired, not cut to nothing, which
// Prometheus would read as no label.
func TestLabelsLongAndNotUTF8(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	validCall(sp)
	sp.Attributes().PutStr("team", strings.Repeat("a", 255)+strings.Repeat("\x80", 10))
	sp.Attributes().PutStr("zone", strings.Repeat("\x80", 300))
	cfg := createDefaultConfig().(*Config)
	cfg.Dimensions = []string{"team", "zone"}
	sink, got := consumeCounted(t, cfg, td)
	for _, k := range []string{"team", "zone"} {
		for _, reason := range []string{"too_long", "not_utf8"} {
			assert.Positive(t, got["otelcol_connector_streamwatch_invalid_values{attribute="+k+",reason="+reason+"}"], "%s %s: telemetry %v", k, reason, got)
		}
	}
	var zones []string
	for _, md := range sink.AllMetrics() {
		assertSane(t, md)
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == semconv.MetricCalls {
				z, _ := ms.At(j).Sum().DataPoints().At(0).Attributes().Get("zone")
				zones = append(zones, z.Str())
			}
		}
	}
	require.NotEmpty(t, zones)
	for _, z := range zones {
		assert.NotEmpty(t, z, "the zone label was cut to nothing")
	}
}
