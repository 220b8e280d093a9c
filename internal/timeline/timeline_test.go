package timeline

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/semconv"
)

const start = 1_767_225_600_000_000_000

func TestEventOffsetUs(t *testing.T) {
	tests := []struct {
		ts   uint64
		want int64
		ok   bool
	}{
		{start, 0, true},
		{start + 1_999, 1, true},  // truncated toward zero after the start
		{start - 1, -1, true},     // rounded away from zero before it: stays an anomaly
		{start - 1_001, -2, true}, //
		{start + MaxOffsetUs*1000, MaxOffsetUs, true},
		{start + MaxOffsetUs*1000 + 1, 0, false},
		{0, 0, false},
		{^uint64(0), 0, false},
	}
	for _, tt := range tests {
		got, ok := eventOffsetUs(tt.ts, start)
		assert.Equal(t, tt.ok, ok, "ts %d", tt.ts)
		assert.Equal(t, tt.want, got, "ts %d", tt.ts)
	}
}

func TestReadForms(t *testing.T) {
	span := ptrace.NewSpan()
	span.SetStartTimestamp(start)
	var b Buffers

	in := Read(span, &b)
	assert.Equal(t, None, in.Form)

	for _, ms := range []uint64{100, 150} {
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.Timestamp(start + ms*1_000_000))
	}
	span.SetDroppedEventsCount(2)
	in = Read(span, &b)
	assert.Equal(t, Events, in.Form)
	assert.Equal(t, []int64{100_000, 150_000}, in.Chunks)
	assert.True(t, in.EventsDropped)
	assert.Empty(t, in.Note)

	s := span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs))
	s.AppendEmpty().SetInt(7)
	span.Attributes().PutInt(string(semconv.ChunkCount), 1)
	in = Read(span, &b)
	assert.Equal(t, Compact, in.Form)
	assert.Equal(t, []int64{7}, in.Chunks)
	assert.Equal(t, int64(1), in.ExpectedChunks)
	assert.False(t, in.EventsDropped, "dropped events only matter to the event form")
	assert.Contains(t, in.Note, "both timeline forms present")
	require.Empty(t, in.Malformed)
}

func TestReadLaunchOffset(t *testing.T) {
	const ignored = "streamwatch.attempt.launch_offset_ms"
	for _, tt := range []struct {
		set  func(pcommon.Map)
		want int64
		ok   bool
		note string // what the input's note says of an unreadable offset
	}{
		{func(m pcommon.Map) { m.PutInt(string(semconv.AttemptLaunchOffsetMs), 4000) }, 4_000_000, true, ""},
		{func(m pcommon.Map) { m.PutDouble(string(semconv.AttemptLaunchOffsetMs), 1.2345) }, 1_235, true, ""},
		{func(m pcommon.Map) { m.PutInt(string(semconv.AttemptLaunchOffsetMs), -1) }, 0, false,
			ignored + " = -1 is not a duration of 0 to 7 days: ignored"},
		{func(m pcommon.Map) { m.PutStr(string(semconv.AttemptLaunchOffsetMs), "5") }, 0, false,
			ignored + " is not a duration of 0 to 7 days (type Str): ignored"},
		{func(m pcommon.Map) { m.PutInt(string(semconv.AttemptLaunchOffsetMs), 1<<62) }, 0, false,
			ignored + " = 4611686018427387904 is not a duration of 0 to 7 days: ignored"},
		{func(m pcommon.Map) { m.PutDouble(string(semconv.AttemptLaunchOffsetMs), math.NaN()) }, 0, false,
			ignored + " = NaN is not a duration of 0 to 7 days: ignored"},
	} {
		span := ptrace.NewSpan()
		span.SetStartTimestamp(start)
		span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
		tt.set(span.Attributes())
		in := Read(span, &Buffers{})
		assert.Equal(t, tt.ok, in.HasLaunchOffset)
		assert.Equal(t, tt.want, in.LaunchOffsetUs)
		assert.Equal(t, tt.note, in.Note)
	}
}

// Regression: a count sent as a double (a producer whose numbers are all
// doubles) was absent for the processor while the connector read it, so a
// span's TPOT and its metrics disagreed. Integral doubles count, as in the
// connector; anything else is absent.
//
// An unreadable count is named in the input's note (it ends up in
// streamwatch.derivation.problem), once per attribute.
func TestReadCountDouble(t *testing.T) {
	for _, tt := range []struct {
		v          any
		want, toks int64
		note       string // the note on streamwatch.chunk.count; the same for output tokens
	}{
		{int64(40), 40, 40, ""},
		{40.0, 40, 40, ""},
		{0.0, 0, 0, ""},
		{40.5, -1, 0, " = 40.5 is not a count: ignored"},
		{-2.0, -1, 0, " = -2 is not a count: ignored"},
		{int64(-3), -1, 0, " = -3 is not a count: ignored"},
		{math.NaN(), -1, 0, " = NaN is not a count: ignored"},
		{math.Inf(1), -1, 0, " = Infinity is not a count: ignored"},
		{float64(1 << 54), -1, 0, " = 18014398509481984 is not a count: ignored"},
		{"40", -1, 0, " is not a count (type Str): ignored"},
		{true, -1, 0, " is not a count (type Bool): ignored"},
	} {
		span := ptrace.NewSpan()
		span.SetStartTimestamp(start)
		a := span.Attributes()
		a.PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
		require.NoError(t, a.PutEmpty(string(semconv.ChunkCount)).FromRaw(tt.v))
		require.NoError(t, a.PutEmpty(string(semconv.GenAIUsageOutputTokens)).FromRaw(tt.v))
		in := Read(span, &Buffers{})
		assert.Equal(t, tt.want, in.ExpectedChunks, "chunk count %v", tt.v)
		assert.Equal(t, tt.toks, in.OutputTokens, "output tokens %v", tt.v)
		want := ""
		if tt.note != "" {
			want = string(semconv.ChunkCount) + tt.note + "; " + string(semconv.GenAIUsageOutputTokens) + tt.note
		}
		assert.Equal(t, want, in.Note, "%v", tt.v)

		// A call span's caller view reads the token count alike.
		call := ptrace.NewSpan()
		call.SetStartTimestamp(start)
		a = call.Attributes()
		a.PutEmptySlice(string(semconv.CallerChunkOffsetsUs)).AppendEmpty().SetInt(1)
		require.NoError(t, a.PutEmpty(string(semconv.GenAIUsageOutputTokens)).FromRaw(tt.v))
		in = Read(call, &Buffers{})
		require.Equal(t, Caller, in.Form)
		assert.Equal(t, tt.toks, in.OutputTokens, "caller view: output tokens %v", tt.v)
		want = ""
		if tt.note != "" {
			want = string(semconv.GenAIUsageOutputTokens) + tt.note
		}
		assert.Equal(t, want, in.Note, "caller view: %v", tt.v)
	}
}

func TestDrop(t *testing.T) {
	span := ptrace.NewSpan()
	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs))
	span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs))
	span.Attributes().PutInt(string(semconv.KeepalivesDropped), 3)
	span.Attributes().PutEmptySlice(string(semconv.CallerChunkOffsetsUs))
	span.Attributes().PutInt(string(semconv.ChunkCount), 0)
	for _, name := range []string{semconv.EventChunk, "exception", semconv.EventKeepalive, semconv.EventStall} {
		span.Events().AppendEmpty().SetName(name)
	}
	Drop(span)
	assert.Equal(t, map[string]any{string(semconv.ChunkCount): int64(0)}, span.Attributes().AsRaw())
	require.Equal(t, 2, span.Events().Len())
	assert.Equal(t, "exception", span.Events().At(0).Name())
	assert.Equal(t, semconv.EventStall, span.Events().At(1).Name())
}

// TestDropEveryCopy: a span decoded from OTLP that holds a timeline key
// twice loses both copies (pcommon.Map.Remove takes only the first).
func TestDropEveryCopy(t *testing.T) {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	a := span.Attributes()
	a.PutInt(string(semconv.ChunkCount), 3)
	keys := []string{
		string(semconv.ChunkOffsetsUs), string(semconv.KeepaliveOffsetsUs),
		string(semconv.KeepalivesDropped), string(semconv.CallerChunkOffsetsUs),
	}
	// Each key twice on the wire: a twin under a placeholder of the same
	// length, renamed in the encoded bytes.
	twin := func(k string) string { return "\x01" + k[1:] }
	for _, k := range keys {
		a.PutEmptySlice(k).AppendEmpty().SetInt(1)
		a.PutEmptySlice(twin(k)).AppendEmpty().SetInt(2)
	}
	raw, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	for _, k := range keys {
		raw = bytes.ReplaceAll(raw, []byte(twin(k)), []byte(k))
	}
	td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(raw)
	require.NoError(t, err)
	span = td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	require.Equal(t, 1+2*len(keys), span.Attributes().Len())

	Drop(span)
	assert.Equal(t, map[string]any{string(semconv.ChunkCount): int64(3)}, span.Attributes().AsRaw())
	assert.Equal(t, 1, span.Attributes().Len())
}

// TestReadCaller: a call span's caller view is read from its own key, wins
// over any attempt form, carries k when the span has it and no launch
// offset (its TTFT already is what the caller waited).
func TestReadCaller(t *testing.T) {
	span := ptrace.NewSpan()
	span.SetStartTimestamp(start)
	a := span.Attributes()
	a.PutEmptySlice(string(semconv.CallerChunkOffsetsUs)).FromRaw([]any{int64(1_600_000), int64(4_650_000)})
	a.PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(1)})
	a.PutInt(string(semconv.GenAIUsageOutputTokens), 40)
	a.PutInt(string(semconv.AttemptLaunchOffsetMs), 5)
	in := Read(span, &Buffers{})
	assert.Equal(t, Caller, in.Form)
	assert.Equal(t, string(semconv.CallerChunkOffsetsUs), in.Key)
	assert.Equal(t, []int64{1_600_000, 4_650_000}, in.Chunks)
	assert.Equal(t, int64(40), in.OutputTokens)
	assert.Equal(t, int64(-1), in.ExpectedChunks)
	assert.False(t, in.HasLaunchOffset)
	assert.Empty(t, in.Malformed)

	a.PutEmptySlice(string(semconv.CallerChunkOffsetsUs)).FromRaw([]any{"x"})
	in = Read(span, &Buffers{})
	assert.Equal(t, "streamwatch.caller.chunk.offsets_us[0] is not an int (type Str)", in.Malformed)

	Drop(span)
	_, ok := span.Attributes().Get(string(semconv.CallerChunkOffsetsUs))
	assert.False(t, ok, "Drop removes the caller's view too")
}

// Regression: a call span without the caller's view was read from the
// attempt forms another producer put on it, and derived as an attempt
// (gap counts and stall events on a call span, and caller-view metrics
// only when the processor ran). It has no timeline: it passes untouched.
func TestReadCallSpanWithoutCallerView(t *testing.T) {
	span := ptrace.NewSpan()
	span.SetName(semconv.CallSpanName)
	span.SetStartTimestamp(start)
	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(100_000), int64(5_000_000)})
	ev := span.Events().AppendEmpty()
	ev.SetName(semconv.EventChunk)
	ev.SetTimestamp(pcommon.Timestamp(start + 100_000_000))
	in := Read(span, &Buffers{})
	assert.Equal(t, None, in.Form)
	assert.Empty(t, in.Chunks)
}

// TestDerive: the one path both components take, from a span to its
// figures; a malformed timeline is an anomaly whose problem is the reader's.
func TestDerive(t *testing.T) {
	span := ptrace.NewSpan()
	span.SetStartTimestamp(start)
	var b Buffers
	d := Derive(span, &b, 2_000_000, 64)
	assert.Equal(t, None, d.Form)

	// Gaps 3 s, 0.1 s, 3 s, 0.1 s, 3 s: three segments, one kept.
	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{
		int64(0), int64(3_000_000), int64(3_100_000), int64(6_100_000), int64(6_200_000), int64(9_200_000)})
	d = Derive(span, &b, 2_000_000, 1)
	assert.Equal(t, breakdown.Complete, d.Result.Status)
	assert.Equal(t, 3, d.Result.StallCount)
	assert.Len(t, d.Result.Segments, 1)
	assert.Equal(t, 2, d.Result.SegmentsDropped)
	assert.Empty(t, d.Problem())

	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(5), "6"})
	d = Derive(span, &b, 2_000_000, 64)
	assert.Equal(t, breakdown.Anomaly, d.Result.Status)
	_, ok := d.Result.TTFTUs()
	assert.False(t, ok, "no figure on a malformed timeline")
	assert.Equal(t, "streamwatch.chunk.offsets_us[1] is not an int (type Str)", d.Problem())

	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(5), int64(4)})
	d = Derive(span, &b, 2_000_000, 64)
	assert.Equal(t, breakdown.ProblemNegativeGap.String(), d.Problem())
}

// TestDeriveNotesMisfit: a timeline that does not fit its span — a last
// chunk past the span's end by more than clock drift (offsets in ns, say),
// a span that ends before it starts, more chunks than chunk.count — is
// derived all the same, and the span says what is off. Drift within 1 ms
// plus 1 % of the span, and an unended span, say nothing.
func TestDeriveNotesMisfit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		endUs int64 // span end after its start; -1: before it; 0: not ended
		offs  []any
		count int64 // chunk.count; -1: absent
		note  string
	}{
		{"fits", 2_000_000, []any{int64(500_000), int64(2_000_000)}, 2, ""},
		{"within drift", 2_000_000, []any{int64(500_000), int64(2_021_000)}, -1, ""},
		{"not ended", 0, []any{int64(500_000), int64(2_000_000)}, -1, ""},
		{"past the end", 2_000_000, []any{int64(500_000), int64(2_022_000)}, -1,
			"streamwatch.chunk.offsets_us: the last chunk, at 2022000 µs, came after the span's end (2000000 µs): offsets in another unit, or from another clock"},
		{"offsets in ns", 2_000_000, []any{int64(500_000_000), int64(1_900_000_000)}, -1,
			"streamwatch.chunk.offsets_us: the last chunk, at 1900000000 µs, came after the span's end (2000000 µs): offsets in another unit, or from another clock"},
		{"ends before it starts", -1, []any{int64(500_000)}, -1, "the span ends before it starts"},
		{"more chunks than counted", 2_000_000, []any{int64(500_000), int64(600_000), int64(700_000)}, 2,
			"3 chunks in the timeline, streamwatch.chunk.count = 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetStartTimestamp(start)
			switch {
			case tc.endUs < 0:
				span.SetEndTimestamp(start - 1)
			case tc.endUs > 0:
				span.SetEndTimestamp(pcommon.Timestamp(start + tc.endUs*1000))
			}
			span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw(tc.offs)
			if tc.count >= 0 {
				span.Attributes().PutInt(string(semconv.ChunkCount), tc.count)
			}
			var b Buffers
			d := Derive(span, &b, 2_000_000, 64)
			assert.Equal(t, breakdown.Complete, d.Result.Status)
			_, ok := d.Result.TTFTUs()
			assert.True(t, ok, "the figures are derived")
			assert.Equal(t, tc.note, d.Problem())
		})
	}
}

// TestKeepalivesIgnored: keepalives that cannot be read are left out, and
// the span says so; the content timeline is derived all the same, and
// each stall segment's keepalive count is unknown (-1), not 0. Before,
// a bad keepalive list made the whole span an anomaly, without a figure.
func TestKeepalivesIgnored(t *testing.T) {
	chunks := []any{int64(100_000), int64(200_000), int64(5_200_000)} // one 5 s stall
	for _, c := range []struct {
		name string
		put  func(span ptrace.Span) // the keepalives, on a span with a compact timeline unless it puts events
		note string
	}{
		{"not an array", func(span ptrace.Span) {
			span.Attributes().PutDouble(string(semconv.KeepaliveOffsetsUs), 1.5)
		}, "streamwatch.keepalive.offsets_us is not an int array (type Double): keepalives ignored"},
		{"a non-int entry", func(span ptrace.Span) {
			span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw([]any{int64(1_000_000), "x"})
		}, "streamwatch.keepalive.offsets_us[1] is not an int (type Str): keepalives ignored"},
		{"an entry out of range", func(span ptrace.Span) {
			span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw([]any{int64(1_000_000), int64(MaxOffsetUs + 1)})
		}, "streamwatch.keepalive.offsets_us[1] = 604800000001 is out of range (more than 7 days from span start): keepalives ignored"},
		{"an event out of range", func(span ptrace.Span) {
			span.Attributes().Remove(string(semconv.ChunkOffsetsUs))
			for _, ev := range []struct {
				name string
				at   uint64
			}{{semconv.EventChunk, start + 100_000_000}, {semconv.EventKeepalive, start + 1_000_000_000},
				{semconv.EventChunk, start + 200_000_000}, {semconv.EventKeepalive, start + (MaxOffsetUs+1)*1000},
				{semconv.EventChunk, start + 5_200_000_000}} {
				e := span.Events().AppendEmpty()
				e.SetName(ev.name)
				e.SetTimestamp(pcommon.Timestamp(ev.at))
			}
		}, "streamwatch.keepalive event 3 at 1767830400000001000 ns is more than 7 days from span start 1767225600000000000 ns: keepalives ignored"},
		// A producer's clock or order fault, as it is in chunks.
		{"an entry before the span start", func(span ptrace.Span) {
			span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw([]any{int64(-10_000), int64(1_000_000)})
		}, "streamwatch.keepalive.offsets_us[0] = -10000 is before the span start: keepalives ignored"},
		{"entries going back", func(span ptrace.Span) {
			span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw([]any{int64(3_000_000), int64(2_000_000)})
		}, "streamwatch.keepalive.offsets_us[1] = 2000000 is earlier than the one before it: keepalives ignored"},
		{"an event before the span start", func(span ptrace.Span) {
			e := span.Events().AppendEmpty()
			e.SetName(semconv.EventKeepalive)
			e.SetTimestamp(pcommon.Timestamp(start - 10_000_000))
		}, "streamwatch.keepalive events: #0 at -10000 µs is before the span start: keepalives ignored"},
		// Keepalive events beside a compact timeline, some of the span's
		// events dropped: some keepalives may be among them.
		{"keepalive events, events dropped", func(span ptrace.Span) {
			e := span.Events().AppendEmpty()
			e.SetName(semconv.EventKeepalive)
			e.SetTimestamp(pcommon.Timestamp(start + 1_000_000_000))
			span.SetDroppedEventsCount(2)
		}, "2 events dropped by the producer: keepalives ignored"},
		{"a dropped count not an int", func(span ptrace.Span) {
			span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw([]any{int64(1_000_000)})
			span.Attributes().PutStr(string(semconv.KeepalivesDropped), "3")
		}, "streamwatch.keepalive.dropped is not an int (type Str): keepalives ignored"},
		{"a negative dropped count", func(span ptrace.Span) {
			span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw([]any{int64(1_000_000)})
			span.Attributes().PutInt(string(semconv.KeepalivesDropped), -1)
		}, "streamwatch.keepalive.dropped = -1 is negative: keepalives ignored"},
	} {
		t.Run(c.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetStartTimestamp(start)
			span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw(chunks)
			c.put(span)
			var b Buffers
			d := Derive(span, &b, 2_000_000, 64)
			require.Empty(t, d.Malformed)
			assert.True(t, d.KeepalivesIgnored)
			assert.Empty(t, d.Keepalives)
			assert.Equal(t, []int64{100_000, 200_000, 5_200_000}, d.Chunks)
			assert.Equal(t, breakdown.Complete, d.Result.Status)
			ttft, _ := d.Result.TTFTUs()
			assert.Equal(t, int64(100_000), ttft)
			stall, _ := d.Result.StallUs()
			assert.Equal(t, int64(5_000_000), stall)
			require.Len(t, d.Result.Segments, 1)
			assert.Equal(t, -1, d.Result.Segments[0].Keepalives, "unknown, not 0")
			assert.Equal(t, c.note, d.Problem())
		})
	}
	// A derivation problem and the note are both said.
	span := ptrace.NewSpan()
	span.SetStartTimestamp(start)
	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{int64(100), int64(200)})
	span.Attributes().PutStr(string(semconv.KeepaliveOffsetsUs), "x")
	var b Buffers
	d := Derive(span, &b, 2_000_000, 64)
	assert.Equal(t, breakdown.ProblemBurst.String()+"; streamwatch.keepalive.offsets_us is not an int array (type Str): keepalives ignored", d.Problem())

	// The caller's view has no keepalives: its segments' counts are
	// unknown too, not 0.
	call := ptrace.NewSpan()
	call.SetName(semconv.CallSpanName)
	call.SetStartTimestamp(start)
	call.Attributes().PutEmptySlice(string(semconv.CallerChunkOffsetsUs)).FromRaw(chunks)
	d = Derive(call, &b, 2_000_000, 64)
	require.Len(t, d.Result.Segments, 1)
	assert.Equal(t, -1, d.Result.Segments[0].Keepalives)
	assert.Empty(t, d.Problem())
}

// Keepalives are read from the other form when the chunks' form has
// none: a producer may build the offsets list at the end and record
// keepalives as events as they come, or the reverse. With keepalives in
// both forms, the chunks' form wins and the note says so.
func TestKeepalivesOtherForm(t *testing.T) {
	chunkUs := []int64{1_000_000, 1_050_000, 5_050_000} // one 4 s stall
	kaUs := []int64{2_000_000, 3_000_000, 4_000_000}    // inside it
	compactChunks := func(span ptrace.Span) {
		s := span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs))
		for _, us := range chunkUs {
			s.AppendEmpty().SetInt(us)
		}
	}
	chunkEvents := func(span ptrace.Span) { events(span, semconv.EventChunk, chunkUs) }
	kaList := func(us ...int64) func(ptrace.Span) {
		return func(span ptrace.Span) {
			s := span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs))
			for _, u := range us {
				s.AppendEmpty().SetInt(u)
			}
		}
	}
	kaEvents := func(us ...int64) func(ptrace.Span) {
		return func(span ptrace.Span) { events(span, semconv.EventKeepalive, us) }
	}
	for _, c := range []struct {
		name string
		put  []func(ptrace.Span)
		form Form
		want int // keepalives in the stall
		note string
	}{
		{"compact chunks, keepalive events", []func(ptrace.Span){compactChunks, kaEvents(kaUs...)}, Compact, 3, ""},
		{"chunk events, a keepalive list", []func(ptrace.Span){chunkEvents, kaList(kaUs...)}, Events, 3, ""},
		{"compact chunks, keepalives in both forms", []func(ptrace.Span){compactChunks, kaList(kaUs...), kaEvents(kaUs[0])}, Compact, 3,
			"keepalives in both forms: used streamwatch.keepalive.offsets_us, ignored 1 streamwatch.keepalive events"},
		{"chunk events, keepalives in both forms", []func(ptrace.Span){chunkEvents, kaList(kaUs[0]), kaEvents(kaUs...)}, Events, 3,
			"keepalives in both forms: used the streamwatch.keepalive events, ignored streamwatch.keepalive.offsets_us"},
	} {
		t.Run(c.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetStartTimestamp(start)
			for _, put := range c.put {
				put(span)
			}
			var b Buffers
			d := Derive(span, &b, 2_000_000, 64)
			require.Empty(t, d.Malformed)
			assert.Equal(t, c.form, d.Form)
			assert.False(t, d.KeepalivesIgnored)
			require.Len(t, d.Result.Segments, 1)
			assert.Equal(t, c.want, d.Result.Segments[0].Keepalives)
			assert.Equal(t, c.note, d.Problem())
		})
	}
}

// events appends an event named name at each offset of us (µs since the
// span start).
func events(span ptrace.Span, name string, us []int64) {
	for _, u := range us {
		e := span.Events().AppendEmpty()
		e.SetName(name)
		e.SetTimestamp(pcommon.Timestamp(start + u*1000))
	}
}

// Keepalives dropped past the producer's cap came after the last listed
// one: a segment ending after it has an unknown count, one ending at or
// before it an exact one (the count is of keepalives strictly inside).
func TestKeepalivesDropped(t *testing.T) {
	// Two 5 s stalls: 0.2–5.2 s and 5.3–10.3 s.
	chunks := []any{int64(100_000), int64(200_000), int64(5_200_000), int64(5_300_000), int64(10_300_000)}
	for _, c := range []struct {
		name    string
		listed  []any
		dropped int64 // 0: no streamwatch.keepalive.dropped
		want    [2]int
	}{
		{"none dropped", []any{int64(1_000_000), int64(2_000_000), int64(6_000_000)}, 0, [2]int{2, 1}},
		{"dropped after the first stall", []any{int64(1_000_000), int64(2_000_000), int64(6_000_000)}, 4, [2]int{2, -1}},
		{"the last listed at the first stall's end", []any{int64(1_000_000), int64(5_200_000)}, 1, [2]int{1, -1}},
		{"the last listed inside the first stall", []any{int64(1_000_000), int64(2_000_000)}, 1, [2]int{-1, -1}},
		{"none listed", nil, 3, [2]int{-1, -1}},
		{"dropped 0", []any{int64(1_000_000)}, -1, [2]int{1, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetStartTimestamp(start)
			span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw(chunks)
			if c.listed != nil {
				span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).FromRaw(c.listed)
			}
			switch {
			case c.dropped > 0:
				span.Attributes().PutInt(string(semconv.KeepalivesDropped), c.dropped)
			case c.dropped < 0:
				span.Attributes().PutInt(string(semconv.KeepalivesDropped), 0)
			}
			var b Buffers
			d := Derive(span, &b, 2_000_000, 64)
			require.Empty(t, d.Malformed)
			assert.False(t, d.KeepalivesIgnored)
			require.Len(t, d.Result.Segments, 2)
			assert.Equal(t, c.want, [2]int{d.Result.Segments[0].Keepalives, d.Result.Segments[1].Keepalives})
			stall, _ := d.Result.StallUs()
			assert.Equal(t, int64(10_000_000), stall, "the figures do not depend on keepalives")
			assert.Empty(t, d.Problem(), "a cap is no problem of the input")
		})
	}
}

func TestShrink(t *testing.T) {
	b := Buffers{Chunks: make([]int64, 0, maxKeptOffsets+1), Keepalives: make([]int64, 0, 8), Segments: make([]breakdown.Segment, 0, maxKeptSegments+1)}
	b.Shrink()
	assert.Nil(t, b.Chunks)
	assert.Equal(t, 8, cap(b.Keepalives))
	assert.Nil(t, b.Segments)
}

// A span whose producer dropped attributes past its limit says so: the
// attributes that refine the timeline may be among them, and the figures
// that need one would otherwise be missing without a word. The keepalive
// list may be among them too: unless the keepalives come from events,
// they are ignored, so that no stall gets a count that may be too low
// (unknown counts are left out). Both attempt forms and the caller's
// view; a span without a timeline is not read.
func TestReadDroppedAttributes(t *testing.T) {
	const note = "the span dropped 3 attributes, figures that need one are absent"
	for _, tt := range []struct {
		name      string
		set       func(ptrace.Span)
		want      string
		ignoredKA bool
	}{
		{"compact", func(s ptrace.Span) {
			s.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
			s.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs)).AppendEmpty().SetInt(2)
		}, note + ": keepalives ignored", true},
		{"events", func(s ptrace.Span) {
			e := s.Events().AppendEmpty()
			e.SetName(semconv.EventChunk)
			e.SetTimestamp(start + 1000)
		}, note + ": keepalives ignored", true},
		{"keepalive events", func(s ptrace.Span) {
			s.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
			e := s.Events().AppendEmpty()
			e.SetName(semconv.EventKeepalive)
			e.SetTimestamp(start + 2000)
		}, note, false},
		{"caller", func(s ptrace.Span) {
			s.Attributes().PutEmptySlice(string(semconv.CallerChunkOffsetsUs)).AppendEmpty().SetInt(1)
		}, note, false},
		{"with another note", func(s ptrace.Span) {
			s.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
			s.Attributes().PutStr(string(semconv.ChunkCount), "1")
		}, "streamwatch.chunk.count is not a count (type Str): ignored; " + note + ": keepalives ignored", true},
		{"no timeline", func(ptrace.Span) {}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetStartTimestamp(start)
			tt.set(span)
			span.SetDroppedAttributesCount(3)
			in := Read(span, &Buffers{})
			assert.Equal(t, tt.want, in.Note)
			assert.Equal(t, tt.ignoredKA, in.KeepalivesIgnored)
			assert.Empty(t, in.Malformed)

			// Nothing dropped, nothing said.
			span.SetDroppedAttributesCount(0)
			in = Read(span, &Buffers{})
			assert.NotContains(t, in.Note, "dropped")
			assert.False(t, in.KeepalivesIgnored)
		})
	}
	span := ptrace.NewSpan()
	span.SetStartTimestamp(start)
	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
	span.SetDroppedAttributesCount(1)
	assert.Equal(t, "the span dropped 1 attribute, figures that need it are absent: keepalives ignored", Read(span, &Buffers{}).Note)
}

// Regression: a span of the event form that dropped events took its
// keepalive counts from the keepalive events left, which may be too few;
// only the compact form ignored them. Either form now does.
func TestReadEventsDroppedKeepalives(t *testing.T) {
	for _, compact := range []bool{false, true} {
		span := ptrace.NewSpan()
		span.SetStartTimestamp(start)
		if compact {
			span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).FromRaw([]any{1000, 9000})
		} else {
			for _, at := range []uint64{1000, 9000} {
				e := span.Events().AppendEmpty()
				e.SetName(semconv.EventChunk)
				e.SetTimestamp(pcommon.Timestamp(start + at*1000))
			}
		}
		e := span.Events().AppendEmpty()
		e.SetName(semconv.EventKeepalive)
		e.SetTimestamp(pcommon.Timestamp(start + 5000*1000))
		span.SetDroppedEventsCount(5)
		in := Read(span, &Buffers{})
		assert.True(t, in.KeepalivesIgnored, "compact %v", compact)
		assert.Empty(t, in.Keepalives, "compact %v", compact)
		assert.Contains(t, in.Note, "5 events dropped by the producer: keepalives ignored", "compact %v", compact)
	}
}
