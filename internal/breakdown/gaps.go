package breakdown

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// Gap histograms (docs/design.md §4, streamwatch.gap.bucket_counts): the
// gaps g_i of a timeline counted per bucket of a histogram's bounds, so
// that the connector's time_per_output_chunk needs the counts, not the
// timeline.

// BoundsUs converts histogram bounds in seconds into integer microseconds
// such that, for every integer g, g <= BoundsUs(b)[i] exactly when
// float64(g)/1e6 <= b[i]: a gap counted in µs falls into the very bucket a
// histogram of its value in seconds would put it in. The float division is
// monotonic in g, so the set of such g is a prefix and its last element is
// found next to b[i]·1e6.
func BoundsUs(bounds []float64) []int64 {
	// Far beyond any duration recorded, far from overflow.
	const limit = 1 << 60
	out := make([]int64, len(bounds))
	for i, b := range bounds {
		switch {
		case math.IsNaN(b) || b*1e6 >= limit:
			out[i] = limit
			continue
		case b*1e6 <= -limit:
			out[i] = -limit
			continue
		}
		g := int64(math.Floor(b * 1e6))
		for float64(g)/1e6 > b {
			g--
		}
		for float64(g+1)/1e6 <= b {
			g++
		}
		out[i] = g
	}
	return out
}

// MaxBuckets is the most buckets a Buckets holds: NewBuckets takes at most
// MaxBuckets−1 bounds.
const MaxBuckets = 32

// Buckets are histogram bounds in whole microseconds, prepared for
// counting gaps. The zero value is not usable; build one with NewBuckets
// and share it: a Buckets is immutable and safe for concurrent use.
type Buckets struct {
	// bounds are the upper-inclusive bounds in µs, then a MaxInt64
	// sentinel, so that a bucket's bound can be read without a range test.
	bounds []int64
	// first[k] is the bucket of the least gap of bit length k (0 for k = 0,
	// 2^(k−1) otherwise). A gap of bit length k lies in first[k] or above;
	// with bounds that double, as the GenAI ones do, one step above at most.
	first [65]uint8
	// oneStep says every gap lies in first[k] or the bucket after it.
	oneStep bool
}

// NewBuckets prepares bounds in seconds, ascending (see BoundsUs). It
// fails on more than MaxBuckets−1 bounds or bounds out of order.
func NewBuckets(bounds []float64) (*Buckets, error) {
	if len(bounds) >= MaxBuckets {
		return nil, fmt.Errorf("breakdown: %d bounds, at most %d", len(bounds), MaxBuckets-1)
	}
	us := BoundsUs(bounds)
	for i := 1; i < len(us); i++ {
		if us[i] < us[i-1] {
			return nil, fmt.Errorf("breakdown: bounds out of order at %d: %v", i, bounds)
		}
	}
	b := &Buckets{bounds: append(us, math.MaxInt64)}
	for k := range b.first {
		var least int64
		switch {
		case k == 64:
			// No gap has bit length 64 (gaps are non-negative int64s); the
			// entry only keeps the table total, at the last bucket.
			least = math.MaxInt64
		case k > 0:
			least = int64(1) << (k - 1)
		}
		b.first[k] = uint8(sort.Search(len(us), func(i int) bool { return us[i] >= least }))
	}
	// The greatest gap of bit length k, 2^k − 1, must lie at most one
	// bucket above first[k].
	b.oneStep = true
	for k := range 63 {
		greatest := int64(uint64(1)<<k) - 1
		if k == 0 {
			greatest = 0
		}
		if sort.Search(len(us), func(i int) bool { return us[i] >= greatest }) > int(b.first[k])+1 {
			b.oneStep = false
		}
	}
	return b, nil
}

// MustBuckets is NewBuckets for bounds known to be valid; it panics
// otherwise.
func MustBuckets(bounds []float64) *Buckets {
	b, err := NewBuckets(bounds)
	if err != nil {
		panic(err)
	}
	return b
}

// Len is the number of buckets: one more than the bounds.
func (b *Buckets) Len() int { return len(b.bounds) }

// BoundsUs returns the bounds in µs (without the sentinel).
func (b *Buckets) BoundsUs() []int64 { return b.bounds[:len(b.bounds)-1] }

// CountGaps adds every gap offs[i] − offs[i−1] of an ordered timeline (µs)
// to counts, which has b.Len() buckets: bucket i holds the gaps in
// (bound[i−1], bound[i]], the last one everything above, as in OTLP.
//
// A gap's bit length picks its bucket from a table, and one comparison
// without a branch corrects it, so gaps that alternate between two buckets
// (a stream's usually do, around a bound) cost no mispredicted jump.
// Two sets of counters take alternate gaps, so that a run of gaps in one
// bucket is not one chain of increments to the same memory.
func (b *Buckets) CountGaps(offs []int64, counts []uint64) {
	if len(offs) < 2 {
		return
	}
	if !b.oneStep {
		b.countWalking(offs, counts)
		return
	}
	var c0, c1 [MaxBuckets]uint64
	bounds := b.bounds
	bucket := func(g int64) int {
		g &^= g >> 63 // a negative gap (never in an ordered timeline) as 0
		i := int(b.first[bits.Len64(uint64(g))])
		return i + int(uint64(bounds[i]-g)>>63) // +1 when g > bounds[i]
	}
	i := 1
	for ; i+1 < len(offs); i += 2 {
		c0[bucket(offs[i]-offs[i-1])&(MaxBuckets-1)]++
		c1[bucket(offs[i+1]-offs[i])&(MaxBuckets-1)]++
	}
	if i < len(offs) {
		c0[bucket(offs[i]-offs[i-1])&(MaxBuckets-1)]++
	}
	for j := range counts[:len(bounds)] {
		counts[j] += c0[j] + c1[j]
	}
}

// countWalking is CountGaps for bounds closer than a doubling: from the
// table's first bucket, it walks up to the gap's.
func (b *Buckets) countWalking(offs []int64, counts []uint64) {
	for i := 1; i < len(offs); i++ {
		g := max(offs[i]-offs[i-1], 0)
		j := int(b.first[bits.Len64(uint64(g))])
		for g > b.bounds[j] {
			j++
		}
		counts[j]++
	}
}
