package timeline

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
)

// Derivation is a span's timeline, read and derived: what both components
// act on.
type Derivation struct {
	// Input is what Read found; Form None means the span has no timeline
	// and nothing else is set.
	Input
	// Result holds the figures. Its Status is Anomaly, with every figure
	// absent, when Input.Malformed is set.
	Result breakdown.Result
}

// GapCounts counts the attempt's gaps per bucket of GapBuckets into
// b.Gaps and returns them (GapBuckets.Len() entries): what
// streamwatch.gap.bucket_counts holds. It returns nil where the rates are
// absent (n < 2, a burst, an anomaly) and on the caller's view. b must be
// the Buffers d was derived into.
func (d *Derivation) GapCounts(b *Buffers) []uint64 {
	if _, rates := d.Result.ITLMeanUs(); !rates || d.Form == Caller {
		return nil
	}
	counts := b.ZeroGaps()
	GapBuckets.CountGaps(d.Chunks, counts)
	return counts
}

// Derive reads the timeline of span into b and derives it at threshold T
// (µs), keeping at most maxSegments stall segments in b.Segments (the rest
// are counted in Result.SegmentsDropped).
func Derive(span ptrace.Span, b *Buffers, thresholdUs int64, maxSegments int) Derivation {
	d := Derivation{Input: Read(span, b)}
	switch {
	case d.Form == None:
	case d.Malformed != "":
		d.Result = breakdown.Result{Status: breakdown.Anomaly}
	default:
		d.checkFit(span)
		// A timeline of n chunks has fewer than n segments, so the buffer
		// is bounded by the input, not only by maxSegments.
		want := min(maxSegments, len(d.Chunks))
		if cap(b.Segments) < want {
			b.Segments = make([]breakdown.Segment, 0, want)
		}
		d.Result = breakdown.Derive(d.Timeline(thresholdUs), b.Segments[:0:want])
		// Unknown, not none: the caller's view has no keepalives to count
		// (keepalives are the upstream's), ignored ones were unread, and
		// those dropped past the producer's cap came after the last listed.
		switch {
		case d.KeepalivesIgnored || d.Form == Caller:
			unknownKeepalives(d.Result.Segments, -1)
		case d.KeepalivesDropped > 0:
			unknownKeepalives(d.Result.Segments, lastOffset(d.Keepalives))
		}
	}
	return d
}

// unknownKeepalives marks the keepalive count of every segment ending
// after listedUntil unknown: keepalives after that offset went unlisted.
// A segment ending at or before it has all its keepalives listed, since
// they count only strictly inside the silence. This assumes the list is
// in arrival order, as the wire contract has it; on a list out of order
// no count past a cap can be exact.
func unknownKeepalives(segs []breakdown.Segment, listedUntil int64) {
	for i := range segs {
		if segs[i].StartUs+segs[i].DurationUs > listedUntil {
			segs[i].Keepalives = -1
		}
	}
}

// lastOffset is the latest of offs (valid offsets are not negative), or
// -1 when there is none.
func lastOffset(offs []int64) int64 {
	last := int64(-1)
	for _, o := range offs {
		last = max(last, o)
	}
	return last
}

// Problem is the text of streamwatch.derivation.problem: why the timeline
// could not be read, else why the derivation is not complete and a note
// on the input, either or both; empty when there is nothing to say.
func (d *Derivation) Problem() string {
	switch {
	case d.Malformed != "":
		return d.Malformed
	case d.Result.Problem != breakdown.NoProblem && d.Note != "":
		return d.Result.Problem.String() + "; " + d.Note
	case d.Result.Problem != breakdown.NoProblem:
		return d.Result.Problem.String()
	default:
		return d.Note
	}
}
