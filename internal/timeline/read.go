package timeline

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/semconv"
)

// Input is what Read found on a span.
type Input struct {
	// Form is where the timeline came from; None means no timeline.
	Form Form
	// Key is the wire name the timeline was read from (an attribute key or
	// the chunk event's name), for reports.
	Key string
	// Malformed, when not empty, says why the input cannot be derived: the
	// span must be flagged as an anomaly and carry no figures.
	Malformed string
	// Note, when not empty, flags something questionable that did not stop
	// the derivation (both forms on one span, keepalives ignored).
	Note string
	// KeepalivesIgnored is set when the keepalives could not be read (the
	// keepalive list is not an int array, or an entry or event lies out of
	// range) or may be incomplete (the span dropped events and they are
	// events, or dropped attributes and they are not): they are left out,
	// the content timeline is derived all the same, and each stall
	// segment's keepalive count is unknown (-1).
	// Keepalives only refine the segments; a bad list must not cost the
	// span its TTFT, generation and stall figures.
	KeepalivesIgnored bool
	// KeepalivesDropped is streamwatch.keepalive.dropped: keepalives the
	// producer left out of its list past a cap. The list holds the first
	// ones to arrive, so a stall segment ending after the last listed
	// keepalive has an unknown count (-1); the others stay exact.
	KeepalivesDropped int64
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

// Read finds and reads the timeline of span into b.
//
// A span carrying the caller's view (streamwatch.caller.chunk.offsets_us, a
// call span) is read from it alone: the call span's figures are what the
// caller lived through; a call span without it has no timeline, whatever
// attempt-form offsets or events another producer put on it (the connector
// measures such a span the same, with or without the processor). Otherwise
// the compact form wins when both attempt forms are present: it is what
// hedgeprobe emits and it cannot lose its first chunks to an SDK's event
// limit; Input.Note then says so.
func Read(span ptrace.Span, b *Buffers) Input {
	in := Input{ExpectedChunks: -1}
	attrs := span.Attributes()
	b.Chunks, b.Keepalives = b.Chunks[:0], b.Keepalives[:0]
	if v, ok := attrs.Get(string(semconv.CallerChunkOffsetsUs)); ok {
		return readCaller(span, v, b)
	}
	if span.Name() == semconv.CallSpanName {
		return in
	}
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
		in.Form, in.Key = Compact, string(semconv.ChunkOffsetsUs)
		if chunkEvents > 0 {
			in.note(fmt.Sprintf("both timeline forms present: used %s, ignored %d %s events",
				semconv.ChunkOffsetsUs, chunkEvents, semconv.EventChunk))
		}
	case chunkEvents > 0 || kaEvents > 0:
		in.Form, in.Key = Events, semconv.EventChunk
	default:
		return in
	}
	readContext(attrs, &in)

	// The keepalives come from the chunks' form when it has them, else
	// from the other: a producer may build the offsets list at the end
	// and record keepalives as events as they come, or the reverse.
	kaList, hasKAList := attrs.Get(string(semconv.KeepaliveOffsetsUs))
	kaFromEvents := kaEvents > 0 && (in.Form == Events || !hasKAList)
	switch {
	case kaFromEvents && hasKAList:
		in.note(fmt.Sprintf("keepalives in both forms: used the %s events, ignored %s",
			semconv.EventKeepalive, semconv.KeepaliveOffsetsUs))
	case !kaFromEvents && kaEvents > 0:
		in.note(fmt.Sprintf("keepalives in both forms: used %s, ignored %d %s events",
			semconv.KeepaliveOffsetsUs, kaEvents, semconv.EventKeepalive))
	}

	start := uint64(span.StartTimestamp())
	if start == 0 {
		in.Malformed = noStart
		return in
	}
	if in.Form == Compact {
		b.Chunks, in.Malformed = readOffsets(offs, string(semconv.ChunkOffsetsUs), b.Chunks)
	} else {
		in.EventsDropped = span.DroppedEventsCount() > 0
		b.Chunks = growTo(b.Chunks, chunkEvents)
	}
	if in.Form == Events || kaFromEvents {
		if kaFromEvents {
			b.Keepalives = growTo(b.Keepalives, kaEvents)
		}
		for i := range evs.Len() {
			ev := evs.At(i)
			name := ev.Name()
			isChunk := name == semconv.EventChunk && in.Form == Events
			if !isChunk && (name != semconv.EventKeepalive || !kaFromEvents) {
				continue
			}
			off, ok := eventOffsetUs(uint64(ev.Timestamp()), start)
			if !ok {
				problem := fmt.Sprintf("%s event %d at %d ns is more than 7 days from span start %d ns",
					name, i, uint64(ev.Timestamp()), start)
				if !isChunk {
					if !in.KeepalivesIgnored {
						in.ignoreKeepalives(problem)
					}
					continue
				}
				in.Malformed = problem
				break
			}
			if isChunk {
				b.Chunks = append(b.Chunks, off)
			} else {
				b.Keepalives = append(b.Keepalives, off)
			}
		}
		if kaFromEvents && span.DroppedEventsCount() > 0 && !in.KeepalivesIgnored {
			// Some of the keepalive events may be among them.
			in.ignoreKeepalives(fmt.Sprintf("%d events dropped by the producer", span.DroppedEventsCount()))
		}
	}
	if !kaFromEvents && in.Malformed == "" {
		readKeepaliveList(attrs, kaList, hasKAList, &in, b)
	}
	if in.Malformed == "" && !in.KeepalivesIgnored {
		if problem := keepalivesOrdered(b.Keepalives, kaFromEvents); problem != "" {
			in.ignoreKeepalives(problem)
		}
	}
	if n := span.DroppedAttributesCount(); n > 0 && in.Malformed == "" {
		if !kaFromEvents && !in.KeepalivesIgnored {
			// The keepalive list or its overflow count may be among
			// them: a stall's count taken from the rest could be too
			// low, where an unknown count is left out.
			in.ignoreKeepalives(droppedAttributes(n))
		} else {
			in.note(droppedAttributes(n))
		}
	}
	if in.KeepalivesIgnored {
		b.Keepalives = b.Keepalives[:0]
	}
	in.Chunks, in.Keepalives = b.Chunks, b.Keepalives
	return in
}

// ignoreKeepalives leaves the keepalives out for problem, and says so.
func (in *Input) ignoreKeepalives(problem string) {
	in.KeepalivesIgnored = true
	in.note(problem + ": keepalives ignored")
}

// note adds s to the input's note.
func (in *Input) note(s string) {
	if in.Note != "" {
		s = in.Note + "; " + s
	}
	in.Note = s
}

// readKeepaliveList reads the compact keepalive list kaList (present when
// ok) and its overflow count into in and b.
func readKeepaliveList(attrs pcommon.Map, kaList pcommon.Value, ok bool, in *Input, b *Buffers) {
	if ok {
		var problem string
		if b.Keepalives, problem = readOffsets(kaList, string(semconv.KeepaliveOffsetsUs), b.Keepalives); problem != "" {
			in.ignoreKeepalives(problem)
			return
		}
	}
	if v, ok := attrs.Get(string(semconv.KeepalivesDropped)); ok {
		// Without the count no segment's keepalives are known.
		switch {
		case v.Type() != pcommon.ValueTypeInt:
			in.ignoreKeepalives(fmt.Sprintf("%s is not an int (type %s)", semconv.KeepalivesDropped, v.Type()))
		case v.Int() < 0:
			in.ignoreKeepalives(fmt.Sprintf("%s = %d is negative", semconv.KeepalivesDropped, v.Int()))
		default:
			in.KeepalivesDropped = v.Int()
		}
	}
}

// keepalivesOrdered returns the problem of keepalives ks that go back in
// time or start before the span, as chunks that do are an anomaly: the
// producer's clock or order is at fault, and no count taken from them can
// be trusted. fromEvents says where they were read.
func keepalivesOrdered(ks []int64, fromEvents bool) string {
	for i, k := range ks {
		var fault string
		switch {
		case k < 0:
			fault = "is before the span start"
		case i > 0 && k < ks[i-1]:
			fault = "is earlier than the one before it"
		default:
			continue
		}
		if fromEvents {
			return fmt.Sprintf("%s events: #%d at %d µs %s", semconv.EventKeepalive, i, k, fault)
		}
		return fmt.Sprintf("%s[%d] = %d %s", semconv.KeepaliveOffsetsUs, i, k, fault)
	}
	return ""
}

// noStart is the problem of a span without a start time: no offset can be
// placed.
const noStart = "span has no start time"

// readCaller reads the caller's view of a call span. The caller sees no
// keepalives and no chunk count; the call's own figures need neither. A
// call span carries no launch offset, so call_ttft_ms stays absent: its
// ttft_ms already is what the caller waited.
func readCaller(span ptrace.Span, v pcommon.Value, b *Buffers) Input {
	in := Input{Form: Caller, Key: string(semconv.CallerChunkOffsetsUs), ExpectedChunks: -1}
	if n := span.DroppedAttributesCount(); n > 0 {
		in.note(droppedAttributes(n))
	}
	readOutputTokens(span.Attributes(), &in)
	if span.StartTimestamp() == 0 {
		in.Malformed = noStart
		return in
	}
	b.Chunks, in.Malformed = readOffsets(v, in.Key, b.Chunks)
	in.Chunks, in.Keepalives = b.Chunks, b.Keepalives
	return in
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
	dst = growTo(dst, n)[:n]
	// This loop is most of the cost of reading a span (docs/scale.md), so
	// each element's type is tested once: Int() is 0 for any other type,
	// and only a 0 needs a second look. One unsigned comparison checks
	// both bounds.
	for i := range dst {
		e := s.At(i)
		x := e.Int()
		if x == 0 && e.Type() != pcommon.ValueTypeInt {
			return dst[:0], fmt.Sprintf("%s[%d] is not an int (type %s)", key, i, e.Type())
		}
		if uint64(x+MaxOffsetUs) > 2*MaxOffsetUs {
			return dst[:0], fmt.Sprintf("%s[%d] = %d is out of range (more than 7 days from span start)", key, i, x)
		}
		dst[i] = x
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

// checkFit notes a timeline that does not fit its span: a span that ends
// before it starts, a last chunk after the span's end by more than clock
// drift explains (1 ms, plus 1 % of the span: the offsets come from a
// monotonic clock, the span's times from the wall clock, which NTP
// slews), or more chunks than streamwatch.chunk.count. Each says the
// producer measured with another unit (ns for µs) or clock, or counted
// wrong; the wire contract allows none of them, but none makes the
// figures unreadable, so they are derived all the same and the span says
// what is off.
func (in *Input) checkFit(span ptrace.Span) {
	start, end := uint64(span.StartTimestamp()), uint64(span.EndTimestamp())
	n := len(in.Chunks)
	switch {
	case end == 0:
		// Not ended: nothing to compare with.
	case end < start:
		in.note("the span ends before it starts")
	case n > 0:
		durUs := int64(min((end-start)/1000, uint64(MaxOffsetUs)))
		if last := in.Chunks[n-1]; last > durUs+1000+durUs/100 {
			in.note(fmt.Sprintf("%s: the last chunk, at %d µs, came after the span's end (%d µs): offsets in another unit, or from another clock",
				in.Key, last, durUs))
		}
	}
	if in.ExpectedChunks >= 0 && int64(n) > in.ExpectedChunks {
		in.note(fmt.Sprintf("%d chunks in the timeline, %s = %d", n, semconv.ChunkCount, in.ExpectedChunks))
	}
}
