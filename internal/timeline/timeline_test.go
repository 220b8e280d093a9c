package timeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

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
	for _, tt := range []struct {
		set  func(pcommon.Map)
		want int64
		ok   bool
	}{
		{func(m pcommon.Map) { m.PutInt(string(semconv.AttemptLaunchOffsetMs), 4000) }, 4_000_000, true},
		{func(m pcommon.Map) { m.PutDouble(string(semconv.AttemptLaunchOffsetMs), 1.2345) }, 1_235, true},
		{func(m pcommon.Map) { m.PutInt(string(semconv.AttemptLaunchOffsetMs), -1) }, 0, false},
		{func(m pcommon.Map) { m.PutStr(string(semconv.AttemptLaunchOffsetMs), "5") }, 0, false},
		{func(m pcommon.Map) { m.PutInt(string(semconv.AttemptLaunchOffsetMs), 1<<62) }, 0, false},
	} {
		span := ptrace.NewSpan()
		span.SetStartTimestamp(start)
		span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs)).AppendEmpty().SetInt(1)
		tt.set(span.Attributes())
		in := Read(span, &Buffers{})
		assert.Equal(t, tt.ok, in.HasLaunchOffset)
		assert.Equal(t, tt.want, in.LaunchOffsetUs)
	}
}

func TestDrop(t *testing.T) {
	span := ptrace.NewSpan()
	span.Attributes().PutEmptySlice(string(semconv.ChunkOffsetsUs))
	span.Attributes().PutEmptySlice(string(semconv.KeepaliveOffsetsUs))
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
