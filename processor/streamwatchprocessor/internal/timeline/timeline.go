// Package timeline reads the chunk timeline of one span (docs/design.md §3) into
// caller-owned buffers, in either wire form, and checks it for malformed
// input before the derivation math sees it.
//
// The canonical use, once per span:
//
//	var b timeline.Buffers // pooled by the caller
//	in := timeline.Read(span, &b)
//	if in.Form == timeline.None { return } // pass through untouched
//	if in.Problem != "" { … flag an anomaly, derive nothing … }
//	r := breakdown.Derive(in.Timeline(thresholdUs), segs)
//
// Read never panics on any input and allocates only to grow the buffers and
// to word a problem.
package timeline

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
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
)

// Buffers are the reusable slices Read fills. They are not safe for
// concurrent use; pool one per goroutine.
type Buffers struct {
	Chunks     []int64
	Keepalives []int64
}

// Input is what Read found on a span.
type Input struct {
	// Form is where the timeline came from; None means no timeline.
	Form Form
	// Problem, when not empty, says why the input cannot be derived: the
	// span must be flagged as an anomaly and carry no figures.
	Problem string
	// Note, when not empty, flags something questionable that did not stop
	// the derivation (both forms on one span).
	Note string
	// Chunks and Keepalives alias the Buffers passed to Read.
	Chunks, Keepalives []int64
	// ExpectedChunks is streamwatch.chunk.count, or -1 when absent.
	ExpectedChunks int64
	// OutputTokens is gen_ai.usage.output_tokens, or 0 when absent.
	OutputTokens int64
	// EventsDropped is set for the event form when the span reports
	// dropped events.
	EventsDropped bool
	// LaunchOffsetUs is streamwatch.attempt.launch_offset_ms in µs, valid
	// when HasLaunchOffset.
	LaunchOffsetUs  int64
	HasLaunchOffset bool
}

// Timeline returns the breakdown input for threshold T (µs).
func (in *Input) Timeline(thresholdUs int64) breakdown.Timeline {
	return breakdown.Timeline{
		ChunkOffsetsUs:     in.Chunks,
		KeepaliveOffsetsUs: in.Keepalives,
		OutputTokens:       in.OutputTokens,
		ExpectedChunks:     in.ExpectedChunks,
		EventsDropped:      in.EventsDropped,
		ThresholdUs:        thresholdUs,
		LaunchOffsetUs:     in.LaunchOffsetUs,
		HasLaunchOffset:    in.HasLaunchOffset,
	}
}

func isTimelineEvent(name string) bool {
	return name == semconv.EventChunk || name == semconv.EventKeepalive
}

// Read finds and reads the timeline of span into b. The compact form wins
// when both are present: it is what hedgeprobe emits and it cannot lose its
// first chunks to an SDK's event limit; Input.Note then says so.
func Read(span ptrace.Span, b *Buffers) Input {
	in := Input{ExpectedChunks: -1}
	attrs := span.Attributes()
	offs, compact := attrs.Get(string(semconv.ChunkOffsetsUs))
	var chunkEvents, kaEvents int
	evs := span.Events()
	for i := range evs.Len() {
		switch evs.At(i).Name() {
		case semconv.EventChunk:
			chunkEvents++
		case semconv.EventKeepalive:
			kaEvents++
		}
	}
	switch {
	case compact:
		in.Form = Compact
		if chunkEvents > 0 {
			in.Note = fmt.Sprintf("both timeline forms present: used %s, ignored %d %s events",
				semconv.ChunkOffsetsUs, chunkEvents, semconv.EventChunk)
		}
	case chunkEvents > 0 || kaEvents > 0:
		in.Form = Events
	default:
		return in
	}
	readContext(attrs, &in)

	b.Chunks, b.Keepalives = b.Chunks[:0], b.Keepalives[:0]
	start := uint64(span.StartTimestamp())
	if start == 0 {
		in.Problem = "span has no start time"
		return in
	}
	if in.Form == Compact {
		var problem string
		b.Chunks, problem = readOffsets(offs, string(semconv.ChunkOffsetsUs), b.Chunks)
		if problem == "" {
			if ka, ok := attrs.Get(string(semconv.KeepaliveOffsetsUs)); ok {
				b.Keepalives, problem = readOffsets(ka, string(semconv.KeepaliveOffsetsUs), b.Keepalives)
			}
		}
		in.Problem = problem
	} else {
		in.EventsDropped = span.DroppedEventsCount() > 0
		b.Chunks = growTo(b.Chunks, chunkEvents)
		b.Keepalives = growTo(b.Keepalives, kaEvents)
		for i := range evs.Len() {
			ev := evs.At(i)
			name := ev.Name()
			if !isTimelineEvent(name) {
				continue
			}
			off, ok := eventOffsetUs(uint64(ev.Timestamp()), start)
			if !ok {
				in.Problem = fmt.Sprintf("%s event %d at %d ns is more than 7 days from span start %d ns",
					name, i, uint64(ev.Timestamp()), start)
				break
			}
			if name == semconv.EventChunk {
				b.Chunks = append(b.Chunks, off)
			} else {
				b.Keepalives = append(b.Keepalives, off)
			}
		}
	}
	in.Chunks, in.Keepalives = b.Chunks, b.Keepalives
	return in
}

// readContext reads the attributes that refine the derivation. A value of
// an unexpected type is treated as absent: these are optional inputs, and
// their absence only removes the figures that need them.
func readContext(attrs pcommon.Map, in *Input) {
	if v, ok := attrs.Get(string(semconv.ChunkCount)); ok && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0 {
		in.ExpectedChunks = v.Int()
	}
	if v, ok := attrs.Get(string(semconv.GenAIUsageOutputTokens)); ok && v.Type() == pcommon.ValueTypeInt && v.Int() > 0 {
		in.OutputTokens = v.Int()
	}
	if v, ok := attrs.Get(string(semconv.AttemptLaunchOffsetMs)); ok {
		const maxMs = MaxOffsetUs / 1000
		switch v.Type() {
		case pcommon.ValueTypeInt:
			if ms := v.Int(); ms >= 0 && ms <= maxMs {
				in.LaunchOffsetUs, in.HasLaunchOffset = ms*1000, true
			}
		case pcommon.ValueTypeDouble:
			// The negated test also rejects NaN.
			if ms := v.Double(); ms >= 0 && ms <= maxMs {
				in.LaunchOffsetUs, in.HasLaunchOffset = int64(ms*1000+0.5), true
			}
		}
	}
}

// readOffsets copies an int-array attribute into dst, checking every
// element. It reads the pdata slice in place: one pass, no allocation
// beyond growing dst.
func readOffsets(v pcommon.Value, key string, dst []int64) ([]int64, string) {
	if v.Type() != pcommon.ValueTypeSlice {
		return dst, fmt.Sprintf("%s is not an int array (type %s)", key, v.Type())
	}
	s := v.Slice()
	n := s.Len()
	dst = growTo(dst, n)
	for i := range n {
		e := s.At(i)
		if e.Type() != pcommon.ValueTypeInt {
			return dst[:0], fmt.Sprintf("%s[%d] is not an int (type %s)", key, i, e.Type())
		}
		x := e.Int()
		if x > MaxOffsetUs || x < -MaxOffsetUs {
			return dst[:0], fmt.Sprintf("%s[%d] = %d is out of range (more than 7 days from span start)", key, i, x)
		}
		dst = append(dst, x)
	}
	return dst, ""
}

// eventOffsetUs is ts − start in µs. A time before the start rounds away
// from zero so that it stays negative and is caught as an anomaly.
func eventOffsetUs(ts, start uint64) (int64, bool) {
	const maxNs = MaxOffsetUs * 1000
	if ts >= start {
		d := ts - start
		if d > maxNs {
			return 0, false
		}
		return int64(d / 1000), true
	}
	d := start - ts
	if d > maxNs {
		return 0, false
	}
	return -int64((d + 999) / 1000), true
}

// growTo returns dst[:0] with room for n elements.
func growTo(dst []int64, n int) []int64 {
	if cap(dst) < n {
		return make([]int64, 0, n)
	}
	return dst[:0]
}

// Drop removes the raw timeline from span, in both forms: the offsets
// attributes and the chunk and keepalive events.
func Drop(span ptrace.Span) {
	attrs := span.Attributes()
	attrs.Remove(string(semconv.ChunkOffsetsUs))
	attrs.Remove(string(semconv.KeepaliveOffsetsUs))
	span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return isTimelineEvent(ev.Name()) })
}
