package annotate

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/semconv"
)

func TestStallSpanID(t *testing.T) {
	parent := pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	seen := map[pcommon.SpanID]bool{parent: true}
	for i := range 1000 {
		id := StallSpanID(parent, i)
		assert.False(t, id.IsEmpty())
		assert.False(t, seen[id], "segment %d collides", i)
		seen[id] = true
		assert.Equal(t, id, StallSpanID(parent, i), "not deterministic")
	}
	assert.NotEqual(t, StallSpanID(parent, 0), StallSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 9}, 0))
	assert.False(t, StallSpanID(pcommon.SpanID{}, 0).IsEmpty())
}

func TestFiguresOnAnomalyWritesNoFigure(t *testing.T) {
	span := ptrace.NewSpan()
	r := breakdown.Derive(breakdown.Timeline{ChunkOffsetsUs: []int64{5, 3}, ExpectedChunks: -1, ThresholdUs: 1000}, nil)
	Figures(span, &r, 1000, r.Problem.String(), nil)
	assert.Equal(t, map[string]any{
		string(semconv.StallThresholdMs):  1.0,
		string(semconv.Derivation):        semconv.DerivationAnomaly,
		string(semconv.DerivationProblem): breakdown.ProblemNegativeGap.String(),
	}, span.Attributes().AsRaw())
}

// TestGapCountsTrimmed: the bucket counts are written up to the last
// non-empty bucket, and not at all when there are none.
func TestGapCountsTrimmed(t *testing.T) {
	r := breakdown.Derive(breakdown.Timeline{ChunkOffsetsUs: []int64{0, 20_000, 40_000}, ExpectedChunks: -1, ThresholdUs: 1000}, nil)
	span := ptrace.NewSpan()
	Figures(span, &r, 1000, "", []uint64{0, 2, 0, 0, 0})
	v, ok := span.Attributes().Get(string(semconv.GapBucketCounts))
	require.True(t, ok)
	assert.Equal(t, []any{int64(0), int64(2)}, v.Slice().AsRaw())

	span = ptrace.NewSpan()
	Figures(span, &r, 1000, "", nil)
	_, ok = span.Attributes().Get(string(semconv.GapBucketCounts))
	assert.False(t, ok)
}

func TestStallSpans(t *testing.T) {
	spans := ptrace.NewSpanSlice()
	parent := spans.AppendEmpty()
	parent.SetTraceID(pcommon.TraceID{9})
	parent.SetSpanID(pcommon.SpanID{7})
	parent.SetStartTimestamp(1_000_000_000)
	StallSpans(parent, []breakdown.Segment{{StartUs: 2000, DurationUs: 5000, AfterChunk: 4, Keepalives: 1}}, spans)
	require.Equal(t, 2, spans.Len())
	s := spans.At(1)
	assert.Equal(t, semconv.StallSpanName, s.Name())
	assert.Equal(t, parent.TraceID(), s.TraceID())
	assert.Equal(t, parent.SpanID(), s.ParentSpanID())
	assert.Equal(t, pcommon.Timestamp(1_002_000_000), s.StartTimestamp())
	assert.Equal(t, pcommon.Timestamp(1_007_000_000), s.EndTimestamp())
	assert.Equal(t, map[string]any{
		string(semconv.StallDurationMs): 5.0,
		string(semconv.StallAfterChunk): int64(4),
		string(semconv.StallKeepalives): int64(1),
	}, s.Attributes().AsRaw())
}

// A parent that starts near the last time a Timestamp holds (a broken
// clock) wrapped its stall's time to 1970 (outside review): the stall span
// ended before it started. The times stop at the last one.
func TestStallTimesDoNotWrap(t *testing.T) {
	spans := ptrace.NewSpanSlice()
	parent := spans.AppendEmpty()
	parent.SetTraceID(pcommon.TraceID{9})
	parent.SetSpanID(pcommon.SpanID{7})
	parent.SetStartTimestamp(pcommon.Timestamp(math.MaxUint64 - 1_000_000_000))
	segs := []breakdown.Segment{{StartUs: 500_000, DurationUs: 3_000_000, AfterChunk: 1}}
	StallSpans(parent, segs, spans)
	StallEvents(parent, segs)
	require.Equal(t, 2, spans.Len())
	s := spans.At(1)
	assert.Equal(t, pcommon.Timestamp(math.MaxUint64-500_000_000), s.StartTimestamp())
	assert.Equal(t, pcommon.Timestamp(math.MaxUint64), s.EndTimestamp())
	assert.Equal(t, pcommon.Timestamp(math.MaxUint64-500_000_000), parent.Events().At(0).Timestamp())
	// An offset whose ns overflow alone (a review: the check saw the
	// wrapped product) stops at the last time too.
	assert.Equal(t, pcommon.Timestamp(math.MaxUint64), at(parent, math.MaxInt64))
}

// A parent without a span id or a trace id gets no stall span: the span
// would be a root span, or in no trace.
func TestStallSpansOfInvalidParent(t *testing.T) {
	for name, ids := range map[string]struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
	}{
		"no span id":  {trace: pcommon.TraceID{9}},
		"no trace id": {span: pcommon.SpanID{7}},
	} {
		t.Run(name, func(t *testing.T) {
			spans := ptrace.NewSpanSlice()
			parent := spans.AppendEmpty()
			parent.SetTraceID(ids.trace)
			parent.SetSpanID(ids.span)
			StallSpans(parent, []breakdown.Segment{{StartUs: 2000, DurationUs: 5000, AfterChunk: 4}}, spans)
			assert.Equal(t, 1, spans.Len())
		})
	}
}

// TestFigureCountIsWhatFiguresWrites: the attribute array is sized by
// figureCount, so it must count exactly the attributes Figures adds, for
// every combination of present and absent figures.
func TestFigureCountIsWhatFiguresWrites(t *testing.T) {
	const T = 1000
	cases := map[string]breakdown.Timeline{
		"empty":            {ExpectedChunks: -1, ThresholdUs: T},
		"one chunk":        {ChunkOffsetsUs: []int64{7}, ExpectedChunks: -1, ThresholdUs: T},
		"complete":         {ChunkOffsetsUs: []int64{10, 20_000, 40_000}, ExpectedChunks: -1, ThresholdUs: T},
		"tokens and stall": {ChunkOffsetsUs: []int64{10, 20_000, 90_000}, OutputTokens: 9, ExpectedChunks: -1, ThresholdUs: T},
		"launch offset":    {ChunkOffsetsUs: []int64{10, 20_000}, LaunchOffsetUs: 300, HasLaunchOffset: true, ExpectedChunks: -1, ThresholdUs: T},
		"partial":          {ChunkOffsetsUs: []int64{10, 20_000}, ExpectedChunks: 5, ThresholdUs: T},
		"burst":            {ChunkOffsetsUs: []int64{10, 11, 12}, OutputTokens: 3, ExpectedChunks: -1, ThresholdUs: T},
		"anomaly":          {ChunkOffsetsUs: []int64{5, 3}, ExpectedChunks: -1, ThresholdUs: T},
		"segments dropped": {ChunkOffsetsUs: []int64{0, 5_000, 5_500, 10_500, 11_000}, ExpectedChunks: -1, ThresholdUs: T},
	}
	for name, tl := range cases {
		for gname, gaps := range map[string][]uint64{"no gap counts": nil, "gap counts": {0, 2}} {
			t.Run(name+", "+gname, func(t *testing.T) {
				r := breakdown.Derive(tl, make([]breakdown.Segment, 0, 1))
				if name == "segments dropped" {
					require.Positive(t, r.SegmentsDropped)
				}
				span := ptrace.NewSpan()
				span.Attributes().PutStr("gen_ai.request.model", "m")
				Figures(span, &r, T, r.Problem.String(), gaps)
				assert.Equal(t, 1+figureCount(&r, r.Problem.String(), gaps), span.Attributes().Len())
			})
		}
	}
}

// TestFiguresReplaceStaleFigures: a span that already carries figures —
// a producer's, of another type, twice — leaves Figures with exactly the
// attributes a clean span gets, for every combination of present and
// absent figures; and isFigure knows every attribute Figures writes.
func TestFiguresReplaceStaleFigures(t *testing.T) {
	const T = 1000
	owned := []attribute.Key{
		semconv.TTFTMs, semconv.E2EMs, semconv.GenerationMs, semconv.StallMs, semconv.StallCount,
		semconv.ActiveGenerationMs, semconv.ITLMeanMs, semconv.TPOTMs, semconv.ActiveTPS,
		semconv.CallTTFTMs, semconv.GapBucketCounts, semconv.StallSegmentsDropped,
		semconv.StallThresholdMs, semconv.Derivation, semconv.DerivationProblem,
	}
	written := map[string]bool{}
	for name, tl := range map[string]breakdown.Timeline{
		"empty":            {ExpectedChunks: -1, ThresholdUs: T},
		"one chunk":        {ChunkOffsetsUs: []int64{7}, ExpectedChunks: -1, ThresholdUs: T},
		"tokens and stall": {ChunkOffsetsUs: []int64{10, 500, 90_000}, OutputTokens: 9, ExpectedChunks: -1, ThresholdUs: T},
		"launch offset":    {ChunkOffsetsUs: []int64{10, 20_000}, LaunchOffsetUs: 300, HasLaunchOffset: true, ExpectedChunks: -1, ThresholdUs: T},
		"anomaly":          {ChunkOffsetsUs: []int64{5, 3}, ExpectedChunks: -1, ThresholdUs: T},
		"segments dropped": {ChunkOffsetsUs: []int64{0, 5_000, 5_500, 10_500, 11_000}, ExpectedChunks: -1, ThresholdUs: T},
	} {
		for gname, gaps := range map[string][]uint64{"no gap counts": nil, "gap counts": {0, 2}} {
			t.Run(name+", "+gname, func(t *testing.T) {
				r := breakdown.Derive(tl, make([]breakdown.Segment, 0, 1))
				clean := ptrace.NewSpan()
				clean.Attributes().PutStr("gen_ai.request.model", "m")
				Figures(clean, &r, T, r.Problem.String(), gaps)

				stale := ptrace.NewSpan()
				kvs := stale.Attributes()
				kvs.PutStr("gen_ai.request.model", "m")
				for _, k := range owned {
					kvs.PutStr(string(k), "stale")
				}
				// Map.Put* would overwrite: a second copy of each key only
				// comes from a decoder, which keeps what the wire holds.
				td := ptrace.NewTraces()
				stale.CopyTo(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
				stale = withKeysTwice(t, td, owned)
				require.Equal(t, 1+2*len(owned), stale.Attributes().Len())

				Figures(stale, &r, T, r.Problem.String(), gaps)
				// The same attributes, and the problem says what went.
				want := clean.Attributes().AsRaw()
				note := fmt.Sprintf("removed %d streamwatch figure attributes the producer wrote", 2*len(owned))
				if p, ok := want[string(semconv.DerivationProblem)]; ok {
					note = p.(string) + "; " + note
				}
				want[string(semconv.DerivationProblem)] = note
				assert.Equal(t, want, stale.Attributes().AsRaw())
				assert.Equal(t, len(want), stale.Attributes().Len(), "a copy was left")
				for k := range clean.Attributes().All() {
					if k != "gen_ai.request.model" {
						assert.True(t, isFigure(k), "%s is written but not removed first", k)
						written[k] = true
					}
				}
			})
		}
	}
	for _, k := range owned {
		assert.True(t, written[string(k)], "no case writes %s", k)
	}
}

// withKeysTwice returns td's one span with each of keys repeated, as an
// OTLP decoder gives a span whose wire form holds those keys twice.
func withKeysTwice(t *testing.T, td ptrace.Traces, keys []attribute.Key) ptrace.Span {
	t.Helper()
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	// Give each attribute a twin under a placeholder key of the same
	// length, then rename the placeholders in the wire bytes.
	attrs := span.Attributes()
	twin := func(k attribute.Key) string { return "\x01" + string(k)[1:] }
	for _, k := range keys {
		v, ok := attrs.Get(string(k))
		require.True(t, ok, k)
		v.CopyTo(attrs.PutEmpty(twin(k)))
	}
	raw, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	for _, k := range keys {
		raw = bytes.ReplaceAll(raw, []byte(twin(k)), []byte(string(k)))
	}
	out, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(raw)
	require.NoError(t, err)
	return out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
}

// TestFiguresNoteOneRemoved: a single figure removed is named in the
// singular, after the derivation's own problem.
func TestFiguresNoteOneRemoved(t *testing.T) {
	r := breakdown.Derive(breakdown.Timeline{ChunkOffsetsUs: []int64{5, 3}, ExpectedChunks: -1, ThresholdUs: 1000}, nil)
	span := ptrace.NewSpan()
	span.Attributes().PutDouble(string(semconv.TTFTMs), 1)
	Figures(span, &r, 1000, r.Problem.String(), nil)
	v, _ := span.Attributes().Get(string(semconv.DerivationProblem))
	assert.Equal(t, r.Problem.String()+"; removed 1 streamwatch figure attribute the producer wrote", v.Str())
	_, ok := span.Attributes().Get(string(semconv.TTFTMs))
	assert.False(t, ok)
}
