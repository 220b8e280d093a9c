package streamwatchconnector

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

// benchBatch builds calls hedged calls as the processor hands them on: a
// call span and two attempt spans (a primary that stalls and is cancelled,
// a stall-triggered hedge that wins) with chunks-offset timelines, the
// docs/design.md §4 attributes and stall events.
func benchBatch(calls, chunks int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "bench")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	base := pcommon.Timestamp(1_700_000_000_000_000_000)
	segs := make([]breakdown.Segment, 0, 64)
	for i := range calls {
		var tid pcommon.TraceID
		tid[0], tid[1], tid[15] = byte(i>>8), byte(i), 1
		start := base + pcommon.Timestamp(i)*1e9
		callSpan := spans.AppendEmpty()
		callSpan.SetName(semconv.CallSpanName)
		callSpan.SetTraceID(tid)
		callSpan.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, byte(i), 1})
		callSpan.SetStartTimestamp(start)
		a := callSpan.Attributes()
		a.PutStr(string(semconv.GenAIRequestModel), "gpt-x")
		a.PutStr(string(semconv.Outcome), semconv.OutcomeOK)
		a.PutInt(string(semconv.Attempts), 2)
		a.PutStr(string(semconv.WinnerRoute), "b")
		a.PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), 3.9)

		var end pcommon.Timestamp
		for k, spec := range []struct {
			route, provider, trigger, outcome string
			launchUs, stallAt                 int64
		}{
			{"a", "openai", semconv.TriggerPrimary, semconv.AttemptOutcomeCanceled, 0, int64(chunks) / 10},
			{"b", "anthropic", semconv.TriggerStall, semconv.AttemptOutcomeWinner, 3_400_000, int64(chunks) / 2},
		} {
			sp := spans.AppendEmpty()
			sp.SetName("chat gpt-x")
			sp.SetTraceID(tid)
			sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, byte(i), byte(2 + k)})
			sp.SetParentSpanID(callSpan.SpanID())
			spStart := start + pcommon.Timestamp(spec.launchUs*1000)
			sp.SetStartTimestamp(spStart)
			a := sp.Attributes()
			a.PutStr(string(semconv.GenAIProviderName), spec.provider)
			a.PutStr(string(semconv.GenAIRequestModel), "gpt-x")
			a.PutStr(string(semconv.Route), spec.route)
			a.PutInt(string(semconv.AttemptIndex), int64(k))
			a.PutStr(string(semconv.AttemptTrigger), spec.trigger)
			a.PutStr(string(semconv.AttemptOutcome), spec.outcome)
			a.PutInt(string(semconv.ChunkCount), int64(chunks))
			offs := make([]int64, chunks)
			t := int64(300_000)
			for j := range offs {
				t += 20_000 + int64(j%7)*1_000
				if int64(j) == spec.stallAt {
					t += 30_000_000 // one 30 s silence
				}
				offs[j] = t
			}
			sl := a.PutEmptySlice(string(semconv.ChunkOffsetsUs))
			sl.EnsureCapacity(chunks)
			for _, o := range offs {
				sl.AppendEmpty().SetInt(o)
			}
			r := breakdown.Derive(breakdown.Timeline{ChunkOffsetsUs: offs, ExpectedChunks: int64(chunks), ThresholdUs: 2_000_000}, segs)
			ms := func(us int64, _ bool) float64 { return float64(us) / 1000 }
			a.PutDouble(string(semconv.TTFTMs), ms(r.TTFTUs()))
			a.PutDouble(string(semconv.E2EMs), ms(r.E2EUs()))
			a.PutDouble(string(semconv.GenerationMs), ms(r.GenerationUs()))
			a.PutDouble(string(semconv.StallMs), ms(r.StallUs()))
			a.PutDouble(string(semconv.ActiveGenerationMs), ms(r.ActiveGenerationUs()))
			a.PutInt(string(semconv.StallCount), int64(r.StallCount))
			itl, _ := r.ITLMeanUs()
			a.PutDouble(string(semconv.ITLMeanMs), itl/1000)
			a.PutStr(string(semconv.Derivation), r.Status.String())
			counts := make([]uint64, timeline.GapBuckets.Len())
			timeline.GapBuckets.CountGaps(offs, counts)
			for len(counts) > 0 && counts[len(counts)-1] == 0 {
				counts = counts[:len(counts)-1]
			}
			cs := a.PutEmptySlice(string(semconv.GapBucketCounts))
			for _, c := range counts {
				cs.AppendEmpty().SetInt(int64(c))
			}
			for _, s := range r.Segments {
				e := sp.Events().AppendEmpty()
				e.SetName(semconv.EventStall)
				e.SetTimestamp(spStart + pcommon.Timestamp(s.StartUs*1000))
				e.Attributes().PutDouble(string(semconv.StallDurationMs), float64(s.DurationUs)/1000)
				e.Attributes().PutInt(string(semconv.StallAfterChunk), int64(s.AfterChunk))
			}
			spEnd := spStart + pcommon.Timestamp(offs[len(offs)-1]*1000)
			sp.SetEndTimestamp(spEnd)
			end = max(end, spEnd)
		}
		callSpan.SetEndTimestamp(end)
	}
	return td
}

const (
	benchCalls  = 100
	benchChunks = 2000
	benchSpans  = benchCalls * 3
	benchOffs   = benchCalls * 2 * benchChunks
)

func report(b *testing.B) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns/benchSpans, "ns/span")
	b.ReportMetric(ns/benchOffs, "ns/chunk")
}

// BenchmarkConsume: the connector on a batch of 100 hedged calls (300
// spans, 400,000 chunk offsets), series already present.
func BenchmarkConsume(b *testing.B) {
	c := create(b, createDefaultConfig().(*Config), consumertest.NewNop())
	td := benchBatch(benchCalls, benchChunks)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.ConsumeTraces(ctx, td)
	}
	report(b)
}

// BenchmarkConsumeUnprocessed: the same batch without the processor's
// attributes, so the connector derives every attempt itself.
func BenchmarkConsumeUnprocessed(b *testing.B) {
	c := create(b, createDefaultConfig().(*Config), consumertest.NewNop())
	td := benchBatch(benchCalls, benchChunks)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			spans.At(j).Attributes().Remove(string(semconv.Derivation))
			spans.At(j).Attributes().Remove(string(semconv.GapBucketCounts))
			spans.At(j).Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.ConsumeTraces(ctx, td)
	}
	report(b)
}

// BenchmarkUnmarshalOTLP is the baseline: decoding the same batch from OTLP
// protobuf, which every collector pays before the connector sees a span.
func BenchmarkUnmarshalOTLP(b *testing.B) {
	buf, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchBatch(benchCalls, benchChunks))
	if err != nil {
		b.Fatal(err)
	}
	u := &ptrace.ProtoUnmarshaler{}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.UnmarshalTraces(buf); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}
