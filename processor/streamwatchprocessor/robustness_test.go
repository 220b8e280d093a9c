package streamwatchprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

func newTestProcessor(t testing.TB, mutate func(*Config)) *streamwatch {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	p, err := newProcessor(cfg, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	return p
}

func str(t testing.TB, span ptrace.Span, key string) string {
	v, ok := span.Attributes().Get(key)
	require.True(t, ok, key)
	return v.AsString()
}

// TestMillionOffsets: a span with 1,000,000 offsets is derived in full and
// its buffers are not kept in the pool.
func TestMillionOffsets(t *testing.T) {
	td := ptrace.NewTraces()
	chunks, kas := syntheticStream(1_000_000, 7)
	span := appendAttempt(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1, chunks, kas)
	p := newTestProcessor(t, nil)
	out, err := p.processTraces(context.Background(), td)
	require.NoError(t, err)
	assert.Equal(t, 1, out.SpanCount())
	assert.Equal(t, semconv.DerivationComplete, str(t, span, string(semconv.Derivation)))
	n, _ := span.Attributes().Get(string(semconv.StallCount))
	assert.Equal(t, int64(1999), n.Int())
	d, _ := span.Attributes().Get(string(semconv.StallSegmentsDropped))
	assert.Equal(t, int64(1999-64), d.Int())
	assert.Equal(t, 64, countEvents(span, semconv.EventStall))

	sc := p.scratch.Get().(*timeline.Buffers)
	assert.LessOrEqual(t, cap(sc.Chunks), 1<<16, "a huge buffer went back to the pool")
}

func countEvents(span ptrace.Span, name string) int {
	n := 0
	for _, ev := range span.Events().All() {
		if ev.Name() == name {
			n++
		}
	}
	return n
}

// TestBatchSplit: the output is the same whether spans arrive in one batch
// or one per batch, stall span ids included.
func TestBatchSplit(t *testing.T) {
	const spans = 12
	p := newTestProcessor(t, func(c *Config) { c.StallSpans = true })

	whole := attemptBatch(spans, 1500)
	_, err := p.processTraces(context.Background(), whole)
	require.NoError(t, err)

	split := ptrace.NewTraces()
	dst := split.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	src := attemptBatch(spans, 1500).ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range src.Len() {
		one := ptrace.NewTraces()
		src.At(i).CopyTo(one.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
		_, err := p.processTraces(context.Background(), one)
		require.NoError(t, err)
		one.ResourceSpans().At(0).ScopeSpans().At(0).Spans().MoveAndAppendTo(dst)
	}
	require.Greater(t, whole.SpanCount(), spans, "the stream should produce stall spans")
	require.NoError(t, ptracetest.CompareTraces(whole, split, ptracetest.IgnoreSpansOrder()))
}

// TestConcurrentPipelines runs one processor from several goroutines; the
// race detector and a comparison with a serial run check the pooling.
func TestConcurrentPipelines(t *testing.T) {
	p := newTestProcessor(t, func(c *Config) { c.StallSpans = true; c.MaxSegments = 3 })
	want := attemptBatch(20, 1200)
	_, err := p.processTraces(context.Background(), want)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Go(func() {
			for range 5 {
				got, err := p.processTraces(context.Background(), attemptBatch(20, 1200))
				if err == nil {
					err = ptracetest.CompareTraces(want, got)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// TestAllocsIndependentOfChunks: deriving a span allocates the same whether
// it has 100 chunks or 20,000 — nothing is allocated per chunk.
func TestAllocsIndependentOfChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counting")
	}
	allocs := func(n int) float64 {
		p := newTestProcessor(t, nil)
		sc := new(timeline.Buffers)
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		// 40 ms gaps and exactly two silences, whatever n.
		chunks := make([]int64, n)
		for i := 1; i < n; i++ {
			chunks[i] = chunks[i-1] + 40_000
			if i == 10 || i == 20 {
				chunks[i] += 5_000_000
			}
		}
		span := appendAttempt(ss, 1, chunks, []int64{1_000_000, 2_000_000})
		input := span.Attributes().AsRaw()
		p.processSpan(span, ss, sc, &counts{}) // warm the buffers
		figures := map[string]bool{}
		for k := range span.Attributes().All() {
			if _, in := input[k]; !in {
				figures[k] = true
			}
		}
		return testing.AllocsPerRun(20, func() {
			// Undo the derivation so that the span is derived again: its
			// figures too, which would otherwise be removed as a
			// producer's, and noted.
			span.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return figures[k] })
			span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return ev.Name() == semconv.EventStall })
			p.processSpan(span, ss, sc, &counts{})
		})
	}
	small, large := allocs(100), allocs(20_000)
	t.Logf("allocations per span: %v with 100 chunks, %v with 20,000", small, large)
	assert.Equal(t, small, large)
}

// TestDerivedOnce: a span the processor has derived is left alone by a
// second pass (two collector tiers): no second stall event. A value of
// streamwatch.derivation that is not the processor's (outside review: a
// producer's number, or a word of its own) kept the span from being
// derived, silently, and drop_timeline left its offsets; it is now
// replaced by the derivation, which says so.
func TestDerivedOnce(t *testing.T) {
	chunks := []int64{100_000, 200_000, 5_200_000, 5_300_000} // one 5 s silence
	p := newTestProcessor(t, func(c *Config) { c.DropTimeline = true })

	td := ptrace.NewTraces()
	span := appendAttempt(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1, chunks, nil)
	for pass := range 2 {
		_, err := p.processTraces(context.Background(), td)
		require.NoError(t, err)
		assert.Equal(t, semconv.DerivationComplete, str(t, span, string(semconv.Derivation)), "pass %d", pass+1)
		assert.Equal(t, 1, countEvents(span, semconv.EventStall), "pass %d", pass+1)
	}

	for name, set := range map[string]func(pcommon.Map){
		"a number": func(m pcommon.Map) { m.PutInt(string(semconv.Derivation), 3) },
		"a word":   func(m pcommon.Map) { m.PutStr(string(semconv.Derivation), "done") },
		"a list":   func(m pcommon.Map) { m.PutEmptySlice(string(semconv.Derivation)).AppendEmpty().SetStr("complete") },
	} {
		td := ptrace.NewTraces()
		span := appendAttempt(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1, chunks, nil)
		set(span.Attributes())
		_, err := p.processTraces(context.Background(), td)
		require.NoError(t, err)
		assert.Equal(t, semconv.DerivationComplete, str(t, span, string(semconv.Derivation)), name)
		assert.Contains(t, str(t, span, string(semconv.DerivationProblem)), "replaced a streamwatch.derivation value", name)
		_, ok := span.Attributes().Get(string(semconv.StallMs))
		assert.True(t, ok, "%s: no stall_ms", name)
		_, ok = span.Attributes().Get(string(semconv.ChunkOffsetsUs))
		assert.False(t, ok, "%s: drop_timeline kept the offsets", name)
	}
}

// TestProducerStallEventNoted: stall events a producer wrote are replaced
// by the processor's, and the problem note counts them in words that read
// right for one as for several.
func TestProducerStallEventNoted(t *testing.T) {
	p := newTestProcessor(t, nil)
	for n, want := range map[int]string{
		1: "removed 1 streamwatch.stall event the producer wrote",
		3: "removed 3 streamwatch.stall events the producer wrote",
	} {
		td := ptrace.NewTraces()
		span := appendAttempt(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1,
			[]int64{100_000, 200_000, 300_000}, nil) // no silence: any stall event is the producer's
		for range n {
			span.Events().AppendEmpty().SetName(semconv.EventStall)
		}
		_, err := p.processTraces(context.Background(), td)
		require.NoError(t, err)
		assert.Equal(t, want, str(t, span, string(semconv.DerivationProblem)), "%d events", n)
		assert.Zero(t, countEvents(span, semconv.EventStall), "%d events", n)
	}
}
