package aggregate

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamwatch/streamwatch/semconv"
)

// TestUsBoundsAgree: for every bound, a whole number of µs falls at or
// below the µs bound exactly when its value in seconds falls at or below
// the bound in seconds, at the bound and around it.
func TestUsBoundsAgree(t *testing.T) {
	bounds := append(append([]float64{0, 1e-7, 0.3, 0.7, 1.1}, semconv.GenAIDurationBuckets...), semconv.StallDurationBuckets...)
	us := usBounds(bounds)
	for i, b := range bounds {
		for _, g := range []int64{us[i] - 2, us[i] - 1, us[i], us[i] + 1, us[i] + 2, int64(b * 1e6)} {
			assert.Equal(t, float64(g)/1e6 <= b, g <= us[i], "bound %v, gap %d µs", b, g)
		}
	}
}

// gapsPoint records offs into a fresh series of h, by ObserveGaps or by one
// Observe per gap, and returns the emitted data point.
func gapsPoint(t *testing.T, offs []int64, start pcommon.Timestamp, perGap bool) pmetric.HistogramDataPoint {
	t.Helper()
	d := []Desc{{Name: "h", Unit: "s", Kind: Histogram, Bounds: semconv.GenAIDurationBuckets}}
	st := New(d, Options{MaxSeries: 1, MaxExemplars: 3})
	s := st.Series(0, attrs("svc"), 1)
	ex := Exemplar{TraceID: pcommon.TraceID{1}, SpanID: pcommon.SpanID{2}}
	if perGap {
		for i := 1; i < len(offs); i++ {
			ex.Time = start + pcommon.Timestamp(offs[i]*1000)
			s.Observe(st.Bounds(0), float64(offs[i]-offs[i-1])/1e6, ex)
		}
	} else {
		s.ObserveGaps(st.BoundsUs(0), offs, start, ex)
	}
	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v", 2)
	return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
}

// TestObserveGapsAsObserve: one ObserveGaps call gives the buckets, count
// and exemplars of one Observe per gap, on gaps at, just below and just
// above every bound and on random streams; the sum agrees up to the
// rounding of the per-gap additions.
func TestObserveGapsAsObserve(t *testing.T) {
	var edges []int64
	for _, b := range semconv.GenAIDurationBuckets {
		g := int64(b * 1e6)
		edges = append(edges, g-1, g, g+1)
	}
	edges = append(edges, 0, 0, 20_000, 20_000, 30_000_000, 90_000_000)
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
	start := pcommon.Timestamp(1_700_000_000_000_000_000)
	for _, offs := range cases {
		want, got := gapsPoint(t, offs, start, true), gapsPoint(t, offs, start, false)
		require.Equal(t, want.BucketCounts().AsRaw(), got.BucketCounts().AsRaw(), "%v", offs)
		require.Equal(t, want.Count(), got.Count())
		require.InDelta(t, want.Sum(), got.Sum(), 1e-9*float64(len(offs)))
		if len(offs) >= 2 {
			assert.Equal(t, float64(offs[len(offs)-1]-offs[0])/1e6, got.Sum(), "the exact total, rounded once")
		}
		require.Equal(t, want.Exemplars().Len(), got.Exemplars().Len())
		for i := range want.Exemplars().Len() {
			w, g := want.Exemplars().At(i), got.Exemplars().At(i)
			assert.Equal(t, w.DoubleValue(), g.DoubleValue())
			assert.Equal(t, w.Timestamp(), g.Timestamp())
			assert.Equal(t, w.TraceID(), g.TraceID())
		}
	}
}

// TestObserveGapsNoAlloc: recording a timeline into a series whose
// exemplars are full allocates nothing.
func TestObserveGapsNoAlloc(t *testing.T) {
	d := []Desc{{Name: "h", Unit: "s", Kind: Histogram, Bounds: semconv.GenAIDurationBuckets}}
	st := New(d, Options{MaxSeries: 1, MaxExemplars: 2})
	offs := streamOffsets(300)
	st.Series(0, attrs("svc"), 1).ObserveGaps(st.BoundsUs(0), offs, 0, Exemplar{})
	allocs := testing.AllocsPerRun(100, func() {
		st.Series(0, attrs("svc"), 1).ObserveGaps(st.BoundsUs(0), offs, 0, Exemplar{})
	})
	assert.Zero(t, allocs)
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

// BenchmarkGaps: one timeline of 300 chunks into time_per_output_chunk, per
// gap; ObserveGaps against its baseline, one Observe per gap.
//
//	go test -run '^$' -bench Gaps ./connector/streamwatchconnector/internal/aggregate/
func BenchmarkGaps(b *testing.B) {
	d := []Desc{{Name: "h", Unit: "s", Kind: Histogram, Bounds: semconv.GenAIDurationBuckets}}
	offs := streamOffsets(300)
	perGap := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(offs)-1), "ns/gap")
	}
	b.Run("observe_per_gap", func(b *testing.B) {
		st := New(d, Options{MaxSeries: 1, MaxExemplars: 5})
		s := st.Series(0, attrs("svc"), 1)
		bounds := st.Bounds(0)
		b.ReportAllocs()
		for b.Loop() {
			ex := Exemplar{}
			for i := 1; i < len(offs); i++ {
				ex.Time = pcommon.Timestamp(offs[i] * 1000)
				s.Observe(bounds, float64(offs[i]-offs[i-1])/1e6, ex)
			}
		}
		perGap(b)
	})
	b.Run("observe_gaps", func(b *testing.B) {
		st := New(d, Options{MaxSeries: 1, MaxExemplars: 5})
		s := st.Series(0, attrs("svc"), 1)
		bounds := st.BoundsUs(0)
		b.ReportAllocs()
		for b.Loop() {
			s.ObserveGaps(bounds, offs, 0, Exemplar{})
		}
		perGap(b)
	})
}
