package breakdown

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamwatch/streamwatch/semconv"
)

// TestBoundsUsAgree: for every bound, a whole number of µs falls at or
// below the µs bound exactly when its value in seconds falls at or below
// the bound in seconds, at the bound and around it.
func TestBoundsUsAgree(t *testing.T) {
	bounds := append(append([]float64{0, 1e-7, 0.3, 0.7, 1.1}, semconv.GenAIDurationBuckets...), semconv.StallDurationBuckets...)
	us := BoundsUs(bounds)
	for i, b := range bounds {
		for _, g := range []int64{us[i] - 2, us[i] - 1, us[i], us[i] + 1, us[i] + 2, int64(b * 1e6)} {
			assert.Equal(t, float64(g)/1e6 <= b, g <= us[i], "bound %v, gap %d µs", b, g)
		}
	}
}

// perGap buckets every gap of offs by its value in seconds, as a histogram
// observation would: the reference CountGaps must agree with.
func perGap(offs []int64, bounds []float64) []uint64 {
	counts := make([]uint64, len(bounds)+1)
	for i := 1; i < len(offs); i++ {
		counts[sort.SearchFloat64s(bounds, float64(offs[i]-offs[i-1])/1e6)]++
	}
	return counts
}

// TestCountGapsAsObserve: CountGaps puts every gap in the bucket its value
// in seconds falls in, on gaps at, just below and just above every bound
// and on random streams, and adds to the counts it is given — for the
// GenAI bounds (the one-step table) and for bounds closer than doubling
// (the walk).
func TestCountGapsAsObserve(t *testing.T) {
	for _, bounds := range [][]float64{
		semconv.GenAIDurationBuckets,
		semconv.StallDurationBuckets,
		{0.001, 0.002, 0.5, 0.7, 300},
		{},
	} {
		countGapsAsObserve(t, bounds)
	}
}

func countGapsAsObserve(t *testing.T, bounds []float64) {
	buckets := MustBuckets(bounds)
	boundsUs := buckets.BoundsUs()
	var edges []int64
	for _, g := range boundsUs {
		edges = append(edges, g-1, g, g+1)
	}
	edges = append(edges, 0, 0, 1, 20_000, 20_000, 30_000_000, 90_000_000, 1<<40)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]int64{nil, {5}, {5, 5}}
	for n := range 50 {
		offs := []int64{int64(n) * 1000}
		for range 1 + rng.IntN(400) {
			g := edges[rng.IntN(len(edges))]
			if rng.IntN(3) == 0 {
				g = rng.Int64N(3_000_000)
			}
			offs = append(offs, offs[len(offs)-1]+g)
		}
		cases = append(cases, offs)
	}
	for _, offs := range cases {
		got := make([]uint64, buckets.Len())
		buckets.CountGaps(offs, got)
		require.Equal(t, perGap(offs, bounds), got, "bounds %v, %v", bounds, offs)
		buckets.CountGaps(offs, got)
		want := perGap(offs, bounds)
		for i := range want {
			want[i] *= 2
		}
		require.Equal(t, want, got, "counts add up across calls")
	}
}

// TestCountGapsNoAlloc: counting a timeline allocates nothing.
func TestCountGapsNoAlloc(t *testing.T) {
	buckets := MustBuckets(semconv.GenAIDurationBuckets)
	counts := make([]uint64, buckets.Len())
	offs := streamOffsets(300)
	assert.Zero(t, testing.AllocsPerRun(100, func() { buckets.CountGaps(offs, counts) }))
}

// TestOneStep: the GenAI bounds double, so a gap's bit length leaves one
// comparison; the stall bounds do not (30, 45, 60 s), and walk.
func TestOneStep(t *testing.T) {
	assert.True(t, MustBuckets(semconv.GenAIDurationBuckets).oneStep)
	assert.False(t, MustBuckets(semconv.StallDurationBuckets).oneStep)
}

// TestNewBucketsRefuses: too many bounds, or bounds out of order.
func TestNewBucketsRefuses(t *testing.T) {
	_, err := NewBuckets(make([]float64, MaxBuckets))
	assert.Error(t, err)
	_, err = NewBuckets([]float64{1, 0.5})
	assert.Error(t, err)
	b, err := NewBuckets(make([]float64, MaxBuckets-1))
	require.NoError(t, err)
	assert.Equal(t, MaxBuckets, b.Len())
}

// streamOffsets is the load test's winner: n chunks 20 ms apart (jittered
// by up to 6 ms) with one 30 s silence.
func streamOffsets(n int) []int64 {
	offs := make([]int64, n)
	t := int64(300_000)
	for i := range offs {
		t += 20_000 + int64(i%7)*1_000
		if i == n/2 {
			t += 30_000_000
		}
		offs[i] = t
	}
	return offs
}

// randomOffsets are n chunks whose gaps spread over the buckets: lognormal
// around 40 ms, as real streams' gaps do, and one long silence.
func randomOffsets(n int) []int64 {
	rng := rand.New(rand.NewPCG(3, 4))
	offs := make([]int64, n)
	t := int64(300_000)
	for i := range offs {
		t += int64(40_000 * math.Exp(rng.NormFloat64()))
		if i == n/2 {
			t += 30_000_000
		}
		offs[i] = t
	}
	return offs
}

// BenchmarkCountGaps: one timeline of 300 chunks bucketed over the GenAI
// bounds, per gap — the load test's (gaps 20–26 ms, across the 20 ms
// bound) and one with lognormal gaps; against its baseline, a binary
// search per gap.
//
//	go test -run '^$' -bench CountGaps ./internal/breakdown/
func BenchmarkCountGaps(b *testing.B) {
	bounds := semconv.GenAIDurationBuckets
	buckets := MustBuckets(bounds)
	counts := make([]uint64, buckets.Len())
	for _, data := range []struct {
		name string
		offs []int64
	}{{"loadtest", streamOffsets(300)}, {"lognormal", randomOffsets(300)}} {
		offs := data.offs
		report := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(offs)-1), "ns/gap")
		}
		b.Run(data.name+"/search_per_gap", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := 1; i < len(offs); i++ {
					counts[sort.SearchFloat64s(bounds, float64(offs[i]-offs[i-1])/1e6)]++
				}
			}
			report(b)
		})
		b.Run(data.name+"/count_gaps", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buckets.CountGaps(offs, counts)
			}
			report(b)
		})
	}
}

// FuzzCountGaps: for any ordered timeline and any ascending bounds, the
// table (or the walk) puts every gap where a binary search over the bounds
// in seconds does.
func FuzzCountGaps(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 200, 255}, []byte{10, 20, 40})
	f.Add([]byte{0, 0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, deltas, rawBounds []byte) {
		offs := []int64{0}
		for i, d := range deltas {
			// Gaps from 0 up to ~2^40 µs: every bit length a timeline has.
			g := int64(d) << (uint(i*7) % 33)
			offs = append(offs, offs[len(offs)-1]+g)
		}
		var bounds []float64
		b := 0.0
		for _, r := range rawBounds[:min(len(rawBounds), MaxBuckets-1)] {
			b += float64(r) * math.Pow(2, float64(r%20)) / 1e6
			bounds = append(bounds, b)
		}
		buckets, err := NewBuckets(bounds)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uint64, buckets.Len())
		buckets.CountGaps(offs, got)
		if want := perGap(offs, bounds); !slices.Equal(want, got) {
			t.Fatalf("bounds %v, offsets %v: got %v, want %v", bounds, offs, got, want)
		}
	})
}
