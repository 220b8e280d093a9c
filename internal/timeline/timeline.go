// Package timeline is the one reader of the chunk timeline (docs/design.md
// §3) and the one path from a span to its breakdown (docs/design.md §4),
// shared by the streamwatch processor and connector so that a figure on a
// span and the metric built from it can never disagree.
//
// It reads a span's timeline into caller-owned buffers — an attempt's, in
// either wire form, or the caller's view on a call span — checks it for
// malformed input, and derives it with internal/breakdown.
//
// The canonical use, once per span:
//
//	var b timeline.Buffers // pooled by the caller
//	d := timeline.Derive(span, &b, thresholdUs, maxSegments)
//	if d.Form == timeline.None { return } // pass through untouched
//	… d.Result holds the figures (Status Anomaly when the input is malformed),
//	d.Problem() the words for streamwatch.derivation.problem …
//
// Nothing here panics on any input; it allocates only to grow the buffers
// and to word a problem.
package timeline

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/semconv"
)

// MaxOffsetUs bounds every offset, in either direction: seven days in
// microseconds. No stream lasts that long, and the bound keeps every sum,
// difference and µs→ns conversion far from int64 and uint64 overflow.
const MaxOffsetUs = 7 * 24 * 3600 * 1_000_000

// Form says where a span's timeline was found.
type Form uint8

const (
	// None: the span carries no timeline and passes through untouched.
	None Form = iota
	// Compact: the streamwatch.chunk.offsets_us attribute (what hedgeprobe
	// emits), with streamwatch.keepalive.offsets_us for keepalives.
	Compact
	// Events: streamwatch.chunk and streamwatch.keepalive span events.
	Events
	// Caller: the caller's view on a call span,
	// streamwatch.caller.chunk.offsets_us (compact, no keepalives).
	Caller
)

// Drop removes the raw timeline from span, in every form: the offsets
// attributes (the caller's view included), the keepalive list's overflow
// count and the chunk and keepalive events. Every copy of a key goes: OTLP
// forbids a key twice on a span but its decoders keep both, and Map.Remove
// takes only the first.
func Drop(span ptrace.Span) {
	span.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool {
		switch k {
		case string(semconv.CallerChunkOffsetsUs), string(semconv.ChunkOffsetsUs),
			string(semconv.KeepaliveOffsetsUs), string(semconv.KeepalivesDropped):
			return true
		}
		return false
	})
	span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return isTimelineEvent(ev.Name()) })
}
