package streamwatchprocessor

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/semconv"
)

// testStart is the start of every synthetic attempt span: 2026-01-01T00:00:00Z.
const testStart = pcommon.Timestamp(1767225600000000000)

// syntheticStream returns n content-chunk offsets (µs since span start)
// with deterministic gaps: a TTFT of about 1.6 s, gaps of 20–59 ms, and a
// 3–62 s silence every 500th gap with a keepalive every 15 s inside it.
func syntheticStream(n int, seed uint64) (chunks, keepalives []int64) {
	x := seed | 1
	next := func() uint64 { // xorshift64: stable across Go releases
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	t := int64(1_600_000 + next()%100_000)
	chunks = make([]int64, 0, n)
	for i := range n {
		if i > 0 {
			gap := int64(20_000 + next()%40_000)
			if i%500 == 0 {
				gap = int64(3_000_000 + next()%59_000_000)
				for k := t + 15_000_000; k < t+gap; k += 15_000_000 {
					keepalives = append(keepalives, k)
				}
			}
			t += gap
		}
		chunks = append(chunks, t)
	}
	return chunks, keepalives
}

// appendAttempt appends an attempt span carrying the compact timeline.
func appendAttempt(spans ptrace.SpanSlice, id uint64, chunks, keepalives []int64) ptrace.Span {
	s := spans.AppendEmpty()
	s.SetTraceID(pcommon.TraceID{0xee, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	s.SetSpanID(spanID(id))
	s.SetParentSpanID(spanID(0xffff))
	s.SetName("chat gpt-x")
	s.SetKind(ptrace.SpanKindClient)
	s.SetStartTimestamp(testStart)
	end := int64(0)
	if len(chunks) > 0 {
		end = chunks[len(chunks)-1]
	}
	s.SetEndTimestamp(testStart + pcommon.Timestamp(end*1000+50_000_000))
	attrs := s.Attributes()
	attrs.PutStr(string(semconv.GenAIRequestModel), "gpt-x")
	attrs.PutInt(string(semconv.GenAIUsageOutputTokens), int64(len(chunks))*3)
	attrs.PutInt(string(semconv.AttemptLaunchOffsetMs), 0)
	attrs.PutInt(string(semconv.ChunkCount), int64(len(chunks)))
	putInts(attrs.PutEmptySlice(string(semconv.ChunkOffsetsUs)), chunks)
	if keepalives != nil {
		putInts(attrs.PutEmptySlice(string(semconv.KeepaliveOffsetsUs)), keepalives)
	}
	return s
}

func putInts(s pcommon.Slice, v []int64) {
	s.EnsureCapacity(len(v))
	for _, x := range v {
		s.AppendEmpty().SetInt(x)
	}
}

func spanID(id uint64) pcommon.SpanID {
	var b pcommon.SpanID
	for i := range 8 {
		b[7-i] = byte(id >> (8 * i))
	}
	return b
}

// attemptBatch returns one resource and scope holding spans attempt spans
// of chunks chunks each.
func attemptBatch(spans, chunks int) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := range spans {
		c, k := syntheticStream(chunks, uint64(i+1))
		appendAttempt(ss, uint64(i+1), c, k)
	}
	return td
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
