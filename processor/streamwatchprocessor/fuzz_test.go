package streamwatchprocessor

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/semconv"
)

// FuzzProcessor builds spans from arbitrary timelines, context attributes
// and config, and checks that the processor never panics, never drops a
// span, and adds only stall spans.
//
//	go test ./processor/streamwatchprocessor -run '^$' -fuzz FuzzProcessor -fuzztime 30s
func FuzzProcessor(f *testing.F) {
	le := func(v ...int64) []byte {
		b := make([]byte, 0, 8*len(v))
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	f.Add(uint64(testStart), le(1_600_000, 1_650_000, 9_000_000), le(3_000_000), uint8(0), int64(3), int64(10), 0.0, uint32(0), int64(2000), int64(64), true)
	f.Add(uint64(testStart), le(500_000, 400_000), []byte{}, uint8(1), int64(5), int64(0), 12.5, uint32(3), int64(1), int64(0), false)
	f.Add(uint64(0), le(math.MaxInt64, math.MinInt64), le(-1), uint8(2), int64(-1), int64(-7), math.NaN(), uint32(0), int64(1), int64(1), true)
	f.Add(uint64(math.MaxUint64), le(1, 2, 3), []byte{1, 2, 3}, uint8(3), int64(1<<40), int64(2), math.Inf(1), uint32(1), int64(math.MaxInt64/1000), int64(2), true)
	f.Add(uint64(testStart), []byte{}, []byte{}, uint8(4), int64(0), int64(0), -1.0, uint32(0), int64(2000), int64(64), false)

	f.Fuzz(func(t *testing.T, start uint64, chunkBytes, kaBytes []byte, mode uint8,
		chunkCount, tokens int64, launch float64, dropped uint32, thresholdMs, maxSegs int64, stallSpans bool,
	) {
		if thresholdMs < 1 || thresholdMs > math.MaxInt64/1_000_000 {
			thresholdMs = 2000
		}
		maxSegs = max(0, maxSegs%512)
		p := newTestProcessor(t, func(c *Config) {
			c.StallThreshold = msDuration(thresholdMs)
			c.MaxSegments = int(maxSegs)
			c.StallSpans = stallSpans
			c.DropTimeline = mode&8 != 0
		})

		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		s := spans.AppendEmpty()
		s.SetName("chat")
		s.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
		s.SetStartTimestamp(pcommon.Timestamp(start))
		s.SetDroppedEventsCount(dropped)
		s.SetDroppedAttributesCount(dropped >> 1)
		attrs := s.Attributes()
		attrs.PutInt(string(semconv.ChunkCount), chunkCount)
		attrs.PutInt(string(semconv.GenAIUsageOutputTokens), tokens)
		attrs.PutDouble(string(semconv.AttemptLaunchOffsetMs), launch)
		chunks, kas := decode(chunkBytes), decode(kaBytes)
		switch mode % 8 {
		case 0: // compact, with a keepalive cap's overflow count (any int) on odd dropped
			putInts(attrs.PutEmptySlice(string(semconv.ChunkOffsetsUs)), chunks)
			putInts(attrs.PutEmptySlice(string(semconv.KeepaliveOffsetsUs)), kas)
			if dropped&1 != 0 {
				attrs.PutInt(string(semconv.KeepalivesDropped), chunkCount)
			}
		case 1: // events
			putEvents(s, semconv.EventChunk, start, chunks)
			putEvents(s, semconv.EventKeepalive, start, kas)
		case 2: // both forms
			putInts(attrs.PutEmptySlice(string(semconv.ChunkOffsetsUs)), chunks)
			putEvents(s, semconv.EventChunk, start, kas)
		case 3: // strings among the offsets
			sl := attrs.PutEmptySlice(string(semconv.ChunkOffsetsUs))
			putInts(sl, chunks)
			sl.AppendEmpty().SetStr(string(chunkBytes))
		case 4: // offsets of the wrong type
			attrs.PutStr(string(semconv.ChunkOffsetsUs), string(chunkBytes))
		case 5: // keepalives of the wrong type
			putInts(attrs.PutEmptySlice(string(semconv.ChunkOffsetsUs)), chunks)
			attrs.PutDouble(string(semconv.KeepaliveOffsetsUs), launch)
		}

		in := td.SpanCount()
		out, err := p.processTraces(context.Background(), td)
		if err != nil {
			t.Fatal(err)
		}
		added := 0
		for i, sp := range out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().All() {
			if i >= in {
				if sp.Name() != semconv.StallSpanName || sp.ParentSpanID() != s.SpanID() {
					t.Fatalf("span %d is %q, not a stall span", i, sp.Name())
				}
				added++
			}
		}
		if out.SpanCount() != in+added || (!stallSpans && added != 0) {
			t.Fatalf("%d spans in, %d out, %d stall spans", in, out.SpanCount(), added)
		}
		// Mode 1 with no offsets puts no event at all: no timeline.
		if m := mode % 8; m <= 5 && (m != 1 || len(chunks)+len(kas) > 0) {
			if _, ok := s.Attributes().Get(string(semconv.Derivation)); !ok {
				t.Fatal("a span with a timeline was not flagged with a derivation")
			}
		}
	})
}

func decode(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

func putEvents(s ptrace.Span, name string, start uint64, offsets []int64) {
	for _, o := range offsets {
		ev := s.Events().AppendEmpty()
		ev.SetName(name)
		ev.SetTimestamp(pcommon.Timestamp(start + uint64(o)*1000))
	}
}
