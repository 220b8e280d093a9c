package breakdown

import "math"

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

// CountGaps adds every gap offs[i] − offs[i−1] of an ordered timeline (µs)
// to counts, which has len(boundsUs)+1 buckets: bucket i holds the gaps in
// (boundsUs[i−1], boundsUs[i]], the last one everything above, as in OTLP.
//
// It tries the previous gap's bucket first: a stream's gaps mostly share
// one, so most gaps cost two comparisons and no search.
func CountGaps(offs, boundsUs []int64, counts []uint64) {
	if len(offs) < 2 {
		return
	}
	counts = counts[:len(boundsUs)+1]
	// (lo, hi] is bucket b, the previous gap's. A gap outside it walks to
	// its own bucket, usually a neighbour.
	b, lo, hi := 0, int64(math.MinInt64), int64(math.MaxInt64)
	if len(boundsUs) > 0 {
		hi = boundsUs[0]
	}
	// run counts the gaps in b since the last change of bucket, in a
	// register rather than through memory.
	var run uint64
	prev := offs[0]
	for _, o := range offs[1:] {
		g := o - prev
		prev = o
		if g > hi || g <= lo {
			counts[b] += run
			run = 0
			for b < len(boundsUs) && g > boundsUs[b] {
				b++
			}
			for b > 0 && g <= boundsUs[b-1] {
				b--
			}
			lo, hi = math.MinInt64, math.MaxInt64
			if b > 0 {
				lo = boundsUs[b-1]
			}
			if b < len(boundsUs) {
				hi = boundsUs[b]
			}
		}
		run++
	}
	counts[b] += run
}
