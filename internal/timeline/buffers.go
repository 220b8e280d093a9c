package timeline

import (
	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/semconv"
)

// Buffers are the reusable slices Read and Derive fill. They are not safe
// for concurrent use; pool one per goroutine.
type Buffers struct {
	Chunks     []int64
	Keepalives []int64
	Segments   []breakdown.Segment
	// Gaps holds what Derivation.GapCounts and ZeroGaps return.
	Gaps []uint64
}

// ZeroGaps returns b.Gaps as one zero count per bucket of GapBuckets, the
// scratch that GapBuckets.CountGaps adds to.
func (b *Buffers) ZeroGaps() []uint64 {
	n := GapBuckets.Len()
	if cap(b.Gaps) < n {
		b.Gaps = make([]uint64, n)
	}
	b.Gaps = b.Gaps[:n]
	clear(b.Gaps)
	return b.Gaps
}

// GapBuckets are the buckets of Derivation.GapCounts and of
// streamwatch.gap.bucket_counts: semconv.GenAIDurationBuckets in whole
// microseconds, bucketing exactly as the bounds in seconds do.
var GapBuckets = breakdown.MustBuckets(semconv.GenAIDurationBuckets)

// Buffers past these sizes are released by Shrink, so one enormous span
// cannot pin megabytes for the life of the process.
const (
	maxKeptOffsets  = 1 << 16
	maxKeptSegments = 1 << 12
)

// Shrink drops any buffer grown past what a common span needs.
func (b *Buffers) Shrink() {
	if cap(b.Chunks) > maxKeptOffsets {
		b.Chunks = nil
	}
	if cap(b.Keepalives) > maxKeptOffsets {
		b.Keepalives = nil
	}
	if cap(b.Segments) > maxKeptSegments {
		b.Segments = nil
	}
}
