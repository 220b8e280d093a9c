// Package annotate writes a derivation onto its span (docs/design.md §4): the
// figures as attributes, one streamwatch.stall event per attributed silence,
// and, on request, one synthetic child span per silence.
//
// The canonical use, once per span after timeline.Derive:
//
//	annotate.Figures(span, &d.Result, thresholdUs, d.Problem(), d.GapCounts(&buffers))
//	annotate.StallEvents(span, d.Result.Segments)
//	annotate.StallSpans(span, d.Result.Segments, scopeSpans.Spans())
//
// Nothing here reads a clock or keeps state: the output depends only on the
// span and the result, so it is the same whatever the batch split.
package annotate

import (
	"encoding/binary"
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/semconv"
)

// ms turns microseconds into milliseconds as a double, exact to the µs.
func ms(us int64) float64 { return float64(us) / 1000 }

// Figures writes the derived attributes of r onto span. Figures that r
// reports absent are not written (on an anomaly that is every one), and
// any the span already carried are removed first, every copy, and counted
// in streamwatch.derivation.problem: a producer's or a stale figure that
// this derivation finds absent would otherwise stand beside
// streamwatch.derivation, where the connector takes it for the
// processor's own. problem,
// when not empty, is written as streamwatch.derivation.problem (see
// timeline.Derivation.Problem); gaps, when not nil, as
// streamwatch.gap.bucket_counts without its trailing empty buckets (see
// timeline.Derivation.GapCounts).
func Figures(span ptrace.Span, r *breakdown.Result, thresholdUs int64, problem string, gaps []uint64) {
	attrs := span.Attributes()
	removed := 0
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool {
		if isFigure(k) {
			removed++
			return true
		}
		return false
	})
	if removed > 0 {
		note := fmt.Sprintf("removed %d streamwatch figure attributes the producer wrote", removed)
		if removed == 1 {
			note = "removed 1 streamwatch figure attribute the producer wrote"
		}
		if problem != "" {
			note = problem + "; " + note
		}
		problem = note
	}
	// The attribute array grows once, to its exact size: it is the largest
	// allocation the processor makes per span (docs/scale.md), and a
	// headroom for figures that are absent is allocated, zeroed and scanned
	// by the garbage collector all the same.
	attrs.EnsureCapacity(attrs.Len() + figureCount(r, problem, gaps))
	if v, ok := r.TTFTUs(); ok {
		attrs.PutDouble(string(semconv.TTFTMs), ms(v))
	}
	if v, ok := r.E2EUs(); ok {
		attrs.PutDouble(string(semconv.E2EMs), ms(v))
	}
	if v, ok := r.GenerationUs(); ok {
		attrs.PutDouble(string(semconv.GenerationMs), ms(v))
	}
	if v, ok := r.StallUs(); ok {
		attrs.PutDouble(string(semconv.StallMs), ms(v))
	}
	if v, ok := r.StallSegments(); ok {
		attrs.PutInt(string(semconv.StallCount), int64(v))
	}
	if v, ok := r.ActiveGenerationUs(); ok {
		attrs.PutDouble(string(semconv.ActiveGenerationMs), ms(v))
	}
	if v, ok := r.ITLMeanUs(); ok {
		attrs.PutDouble(string(semconv.ITLMeanMs), v/1000)
	}
	if v, ok := r.TPOTUs(); ok {
		attrs.PutDouble(string(semconv.TPOTMs), v/1000)
	}
	if v, ok := r.ActiveTPS(); ok {
		attrs.PutDouble(string(semconv.ActiveTPS), v)
	}
	if v, ok := r.CallTTFTUs(); ok {
		attrs.PutDouble(string(semconv.CallTTFTMs), ms(v))
	}
	if gaps != nil {
		putCounts(attrs.PutEmptySlice(string(semconv.GapBucketCounts)), gaps)
	}
	if r.SegmentsDropped > 0 {
		attrs.PutInt(string(semconv.StallSegmentsDropped), int64(r.SegmentsDropped))
	}
	attrs.PutDouble(string(semconv.StallThresholdMs), ms(thresholdUs))
	attrs.PutStr(string(semconv.Derivation), r.Status.String())
	if problem != "" {
		attrs.PutStr(string(semconv.DerivationProblem), problem)
	}
}

// isFigure is whether key is one of the attributes Figures writes.
func isFigure(key string) bool {
	switch key {
	case string(semconv.TTFTMs), string(semconv.E2EMs), string(semconv.GenerationMs),
		string(semconv.StallMs), string(semconv.StallCount), string(semconv.ActiveGenerationMs),
		string(semconv.ITLMeanMs), string(semconv.TPOTMs), string(semconv.ActiveTPS),
		string(semconv.CallTTFTMs), string(semconv.GapBucketCounts), string(semconv.StallSegmentsDropped),
		string(semconv.StallThresholdMs), string(semconv.Derivation), string(semconv.DerivationProblem):
		return true
	}
	return false
}

// figureCount is the number of attributes Figures writes for r: what it
// tests, in the same order.
func figureCount(r *breakdown.Result, problem string, gaps []uint64) int {
	n := 2 // streamwatch.stall_threshold_ms and streamwatch.derivation
	for _, has := range [...]bool{
		present(r.TTFTUs()), present(r.E2EUs()), present(r.GenerationUs()), present(r.StallUs()),
		present(r.StallSegments()), present(r.ActiveGenerationUs()), present(r.ITLMeanUs()),
		present(r.TPOTUs()), present(r.ActiveTPS()), present(r.CallTTFTUs()),
		gaps != nil, r.SegmentsDropped > 0, problem != "",
	} {
		if has {
			n++
		}
	}
	return n
}

// present is whether a figure is present, its value dropped.
func present[T any](_ T, ok bool) bool { return ok }

// putCounts fills dst with counts up to the last non-zero one.
func putCounts(dst pcommon.Slice, counts []uint64) {
	n := len(counts)
	for n > 0 && counts[n-1] == 0 {
		n--
	}
	dst.EnsureCapacity(n)
	for _, c := range counts[:n] {
		dst.AppendEmpty().SetInt(int64(c))
	}
}

// at is the time of offset us after the span's start, at most the last
// time a Timestamp holds: a producer's start near it (a broken clock)
// would wrap a stall's time to the 1970s, and a stall span would end
// before it starts.
func at(span ptrace.Span, us int64) pcommon.Timestamp {
	start := uint64(span.StartTimestamp())
	switch {
	case us < 0: // not reached: the derivation refuses negative offsets
		return pcommon.Timestamp(start)
	case uint64(us) > (math.MaxUint64-start)/1000:
		return pcommon.Timestamp(math.MaxUint64)
	}
	return pcommon.Timestamp(start + uint64(us)*1000)
}

// StallEvents appends one streamwatch.stall event per segment, timestamped
// at the silence's start.
func StallEvents(span ptrace.Span, segs []breakdown.Segment) {
	if len(segs) == 0 {
		return
	}
	evs := span.Events()
	evs.EnsureCapacity(evs.Len() + len(segs))
	for i := range segs {
		ev := evs.AppendEmpty()
		ev.SetName(semconv.EventStall)
		ev.SetTimestamp(at(span, segs[i].StartUs))
		putSegment(ev.Attributes(), &segs[i])
	}
}

// RemoveStallEvents removes the streamwatch.stall events already on span
// and returns how many it removed. Only the processor writes them: a
// producer's own (or a copy of them) beside the processor's would be
// counted twice in the connector's stall histogram.
func RemoveStallEvents(span ptrace.Span) int {
	evs := span.Events()
	n := 0
	for i := range evs.Len() {
		if evs.At(i).Name() == semconv.EventStall {
			n++
		}
	}
	if n > 0 {
		evs.RemoveIf(func(ev ptrace.SpanEvent) bool { return ev.Name() == semconv.EventStall })
	}
	return n
}

func putSegment(attrs pcommon.Map, s *breakdown.Segment) {
	attrs.EnsureCapacity(3)
	attrs.PutDouble(string(semconv.StallDurationMs), ms(s.DurationUs))
	attrs.PutInt(string(semconv.StallAfterChunk), int64(s.AfterChunk))
	if s.Keepalives >= 0 { // -1: unknown (unreadable, dropped past a cap, the caller's view)
		attrs.PutInt(string(semconv.StallKeepalives), int64(s.Keepalives))
	}
}

// StallSpans appends to dst one child span of parent per segment, named
// semconv.StallSpanName, covering the silence. parent must stay valid while
// dst grows: pdata spans are held by pointer, so it does. A parent without
// a span id or trace id (invalid OTLP) gets none: its children would be
// root spans, or belong to no trace; its stall events still carry the
// segments.
func StallSpans(parent ptrace.Span, segs []breakdown.Segment, dst ptrace.SpanSlice) {
	if len(segs) == 0 || parent.SpanID().IsEmpty() || parent.TraceID().IsEmpty() {
		return
	}
	dst.EnsureCapacity(dst.Len() + len(segs))
	for i := range segs {
		s := dst.AppendEmpty()
		s.SetTraceID(parent.TraceID())
		s.SetSpanID(StallSpanID(parent.SpanID(), i))
		s.SetParentSpanID(parent.SpanID())
		s.SetFlags(parent.Flags())
		s.SetName(semconv.StallSpanName)
		s.SetKind(ptrace.SpanKindInternal)
		s.SetStartTimestamp(at(parent, segs[i].StartUs))
		s.SetEndTimestamp(at(parent, segs[i].StartUs+segs[i].DurationUs))
		putSegment(s.Attributes(), &segs[i])
	}
}

// StallSpanID derives the span id of the stall span of segment index under
// parent: a splitmix64 finalizer over the parent id and the index. It
// depends on nothing else, so replicas and batch splits agree; it is never
// the zero (invalid) id.
func StallSpanID(parent pcommon.SpanID, index int) pcommon.SpanID {
	x := binary.BigEndian.Uint64(parent[:]) ^ (uint64(index+1) * 0x9e3779b97f4a7c15)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	if x == 0 {
		x = 1
	}
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], x)
	return id
}
