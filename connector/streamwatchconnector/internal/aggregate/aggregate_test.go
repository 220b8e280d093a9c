package aggregate

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var descs = []Desc{
	{Name: "h", Unit: "s", Kind: Histogram, Bounds: []float64{1, 2, 5}},
	{Name: "c", Unit: "{count}", Kind: Sum},
}

func key(kv ...string) *Key {
	var k Key
	for i := 0; i+1 < len(kv); i += 2 {
		k.Add(kv[i], kv[i+1])
	}
	return &k
}

// TestBucketsUpperInclusive: a value equal to a bound falls in that
// bound's bucket, (b[i-1], b[i]], as OTLP and Prometheus "le" define it.
func TestBucketsUpperInclusive(t *testing.T) {
	st := New(descs, Options{MaxSeries: 10})
	s := st.Series(0, "svc", key("k", "v"), 1)
	for _, v := range []float64{0, 1, 1.5, 2, 5, 5.0001, 100} {
		s.Observe(descs[0].Bounds, v, Exemplar{})
	}
	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v", 2, false)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, []uint64{2, 2, 1, 2}, dp.BucketCounts().AsRaw())
	assert.Equal(t, uint64(7), dp.Count())
	assert.InDelta(t, 114.5001, dp.Sum(), 1e-9)
}

// TestKeysDistinguishAbsentAndEmpty: {k: ""} and {} are different series,
// and values cannot collide across keys.
func TestKeysDistinguishAbsentAndEmpty(t *testing.T) {
	st := New(descs, Options{MaxSeries: 10})
	a := st.Series(1, "svc", key("k", ""), 1)
	b := st.Series(1, "svc", key(), 1)
	c := st.Series(1, "svc", key("k", "ab"), 1)
	d := st.Series(1, "svc", key("k", "a", "b", ""), 1)
	e := st.Series(1, "other", key("k", ""), 1)
	for _, x := range []*Series{b, c, d, e} {
		assert.NotSame(t, a, x)
	}
	assert.NotSame(t, c, d)
	assert.Same(t, a, st.Series(1, "svc", key("k", ""), 1))
	assert.Equal(t, 5, st.Len(1))

	// No value can pose as a separator: one attribute whose value holds
	// what would be the next key is still one attribute.
	f := st.Series(1, "svc", key("k", "v\x00k2\x01w"), 1)
	g := st.Series(1, "svc", key("k", "v", "k2", "w"), 1)
	assert.NotSame(t, f, g)
}

// TestKeyAttributes: a new series carries exactly the attributes of its
// key, in order, whatever their bytes and lengths (a length of 128 and
// more takes two bytes of prefix).
func TestKeyAttributes(t *testing.T) {
	long := strings.Repeat("é", 200)
	kv := []string{"k", "", "gen_ai.request.model", long, "\x00\x01", "v\x80"}
	st := New(descs, Options{MaxSeries: 10})
	st.Series(1, "svc", key(kv...), 1).Add(1)
	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v", 2, false)
	got := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Attributes()
	require.Equal(t, 3, got.Len())
	i := 0
	for k, v := range got.All() {
		assert.Equal(t, kv[2*i], k)
		assert.Equal(t, kv[2*i+1], v.Str())
		i++
	}
}

// TestOverflow: past MaxSeries, one overflow series per metric takes every
// new attribute set; existing series keep counting; overflow is counted.
func TestOverflow(t *testing.T) {
	st := New(descs, Options{MaxSeries: 2})
	st.Series(1, "s", key("k", "1"), 1).Add(1)
	st.Series(1, "s", key("k", "2"), 1).Add(1)
	st.Series(1, "s", key("k", "3"), 1).Add(1)
	st.Series(1, "s", key("k", "4"), 1).Add(1)
	st.Series(1, "s", key("k", "1"), 1).Add(1)
	st.Series(0, "s", key("k", "1"), 1).Observe(descs[0].Bounds, 1, Exemplar{})
	got := map[string]int64{}
	st.TakeOverflowed(func(name string, n int64) { got[name] = n })
	assert.Equal(t, map[string]int64{"c": 2}, got)
	st.TakeOverflowed(func(name string, n int64) { t.Fatalf("not reset: %s %d", name, n) })

	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v", 2, false)
	// The overflow series spans every service, so it sits in a resource
	// of its own, without service.name.
	require.Equal(t, 2, md.ResourceMetrics().Len())
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1).Sum().DataPoints()
	require.Equal(t, 2, dps.Len())
	assert.Equal(t, int64(2), dps.At(0).IntValue())
	assert.Equal(t, int64(1), dps.At(1).IntValue())
	rest := md.ResourceMetrics().At(1)
	assert.Equal(t, 0, rest.Resource().Attributes().Len())
	over := rest.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	assert.Equal(t, int64(2), over.IntValue())
	assert.Equal(t, map[string]any{OverflowKey: true}, over.Attributes().AsRaw())
}

// TestOverflowCountsMeasurements: the overflow count is of measurements,
// not of series lookups — a stream's gaps recorded in one ObserveCounts
// count one each, and a lookup that records nothing counts nothing.
func TestOverflowCountsMeasurements(t *testing.T) {
	st := New(descs, Options{MaxSeries: 1})
	st.Series(0, "s", key("k", "1"), 1).ObserveCounts([]uint64{2, 1}, 3, Exemplar{})
	st.Series(0, "s", key("k", "2"), 1).ObserveCounts([]uint64{4, 0, 6}, 20, Exemplar{})
	st.Series(0, "s", key("k", "3"), 1).Observe(descs[0].Bounds, 1, Exemplar{})
	st.Series(0, "s", key("k", "4"), 1).ObserveCounts([]uint64{0, 0}, 0, Exemplar{})
	st.Series(1, "s", key("k", "1"), 1).Add(5)
	st.Series(1, "s", key("k", "2"), 1).Add(5)
	st.Series(1, "s", key("k", "3"), 1)
	got := map[string]int64{}
	st.TakeOverflowed(func(name string, n int64) { got[name] = n })
	assert.Equal(t, map[string]int64{"h": 11, "c": 1}, got)
}

// TestExistingSeriesNoAlloc: finding a known series and recording into it
// allocates nothing.
func TestExistingSeriesNoAlloc(t *testing.T) {
	st := New(descs, Options{MaxSeries: 10, MaxExemplars: 2})
	a := key("gen_ai.provider.name", "openai", "streamwatch.route", "a")
	st.Series(0, "svc", a, 1)
	st.Series(1, "svc", a, 1)
	// Fill the exemplar buffer so that steady state is measured.
	s := st.Series(0, "svc", a, 1)
	s.Observe(descs[0].Bounds, 1, linked)
	s.Observe(descs[0].Bounds, 1, linked)
	allocs := testing.AllocsPerRun(1000, func() {
		st.Series(0, "svc", a, 1).Observe(descs[0].Bounds, 0.5, linked)
		st.Series(1, "svc", a, 1).Add(1)
	})
	assert.Zero(t, allocs)
}

// linked is an exemplar that names a span.
var linked = Exemplar{Time: 1, TraceID: pcommon.TraceID{1}, SpanID: pcommon.SpanID{2}}

// TestExemplarNamesASpan: an observation from a span without a trace or
// span id is counted but kept as no exemplar — it would lead nowhere and
// take the slot of one that leads to its trace.
func TestExemplarNamesASpan(t *testing.T) {
	st := New(descs, Options{MaxSeries: 1, MaxExemplars: 1})
	s := st.Series(0, "svc", key(), 1)
	s.Observe(descs[0].Bounds, 1, Exemplar{Time: 1})
	s.Observe(descs[0].Bounds, 2, Exemplar{Time: 1, TraceID: pcommon.TraceID{1}})
	s.ObserveCounts([]uint64{1}, 0.001, Exemplar{Time: 1, SpanID: pcommon.SpanID{1}})
	s.Observe(descs[0].Bounds, 4, linked)
	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v", 2, false)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(4), dp.Count())
	require.Equal(t, 1, dp.Exemplars().Len())
	assert.Equal(t, 4.0, dp.Exemplars().At(0).DoubleValue(), "the one exemplar that names a span")
}

// TestEmitPerService: one ResourceMetrics per service, cumulative start
// times kept, exemplars emitted once.
func TestEmitPerService(t *testing.T) {
	st := New(descs, Options{MaxSeries: 10, MaxExemplars: 1})
	tid := pcommon.TraceID{1}
	st.Series(0, "a", key(), 10).Observe(descs[0].Bounds, 1, Exemplar{Time: 11, TraceID: tid, SpanID: pcommon.SpanID{2}})
	st.Series(0, "a", key(), 10).Observe(descs[0].Bounds, 3, Exemplar{Time: 12, TraceID: tid})
	st.Series(1, "b", key(), 20).Add(4)

	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v1", 30, false)
	require.Equal(t, 2, md.ResourceMetrics().Len())
	ra := md.ResourceMetrics().At(0)
	assert.Equal(t, map[string]any{"service.name": "a"}, ra.Resource().Attributes().AsRaw())
	assert.Equal(t, "scope", ra.ScopeMetrics().At(0).Scope().Name())
	h := ra.ScopeMetrics().At(0).Metrics().At(0)
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, h.Histogram().AggregationTemporality())
	dp := h.Histogram().DataPoints().At(0)
	assert.Equal(t, pcommon.Timestamp(10), dp.StartTimestamp())
	assert.Equal(t, pcommon.Timestamp(30), dp.Timestamp())
	require.Equal(t, 1, dp.Exemplars().Len(), "capped at MaxExemplars")
	assert.Equal(t, 1.0, dp.Exemplars().At(0).DoubleValue())
	assert.Equal(t, tid, dp.Exemplars().At(0).TraceID())

	rb := md.ResourceMetrics().At(1)
	sum := rb.ScopeMetrics().At(0).Metrics().At(0).Sum()
	assert.True(t, sum.IsMonotonic())
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, sum.AggregationTemporality())

	md2 := pmetric.NewMetrics()
	st.Emit(md2, "scope", "v1", 40, false)
	dp2 := md2.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(2), dp2.Count(), "cumulative")
	assert.Equal(t, 0, dp2.Exemplars().Len(), "exemplars cleared per emission")
}

// TestObserveCountsAsObserve: counts added at once give the buckets, count
// and sum of one Observe per value, and one exemplar per call; calls with
// nothing to count change nothing.
func TestObserveCountsAsObserve(t *testing.T) {
	d := []Desc{{Name: "h", Unit: "s", Kind: Histogram, Bounds: []float64{0.01, 0.02, 0.04}}}
	point := func(record func(s *Series, bounds []float64)) pmetric.HistogramDataPoint {
		st := New(d, Options{MaxSeries: 1, MaxExemplars: 3})
		record(st.Series(0, "svc", key(), 1), st.Bounds(0))
		md := pmetric.NewMetrics()
		st.Emit(md, "scope", "v", 2, false)
		return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	}
	values := []float64{0.005, 0.02, 0.03, 0.03, 0.5}
	ex := Exemplar{TraceID: pcommon.TraceID{1}, SpanID: pcommon.SpanID{2}, Time: 7}
	want := point(func(s *Series, bounds []float64) {
		for _, v := range values {
			s.Observe(bounds, v, ex)
		}
	})
	got := point(func(s *Series, _ []float64) {
		s.ObserveCounts([]uint64{1, 1, 2, 1}, 0.585, ex)
		s.ObserveCounts([]uint64{0, 0}, 0, ex)
		s.ObserveCounts(nil, 0, ex)
	})
	assert.Equal(t, want.BucketCounts().AsRaw(), got.BucketCounts().AsRaw())
	assert.Equal(t, want.Count(), got.Count())
	assert.InDelta(t, want.Sum(), got.Sum(), 1e-12)
	require.Equal(t, 1, got.Exemplars().Len(), "one exemplar per call that counted something")
	assert.InDelta(t, 0.117, got.Exemplars().At(0).DoubleValue(), 1e-15, "the mean of the five")
	assert.Equal(t, pcommon.Timestamp(7), got.Exemplars().At(0).Timestamp())
}

// TestLeadingZero: with LeadingZero, a series' first emission is at zero —
// the overflow series' too — with its bounds, start time and attributes,
// and its exemplars wait for the next emission, which carries the counts;
// a series created later gets its own zero; a last emission sends every
// count.
func TestLeadingZero(t *testing.T) {
	st := New(descs, Options{MaxSeries: 3, MaxExemplars: 2, LeadingZero: true})
	h := st.Series(0, "svc", key("k", "a"), 1)
	h.Observe(descs[0].Bounds, 1.5, linked)
	st.Series(0, "svc", key("k", "b"), 1)
	st.Series(0, "svc", key("k", "c"), 1)
	over := st.Series(0, "svc", key("k", "d"), 1) // past the cap
	require.Equal(t, 3, st.Len(0))
	over.Observe(descs[0].Bounds, 3, linked)
	st.Series(1, "svc", key("k", "a"), 1).Add(4)

	emit := func(now pcommon.Timestamp, last bool) (hist []pmetric.HistogramDataPoint, sum []pmetric.NumberDataPoint) {
		md := pmetric.NewMetrics()
		st.Emit(md, "scope", "v", now, last)
		ms := md.ResourceMetrics()
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < m.Len(); j++ {
				switch m.At(j).Type() {
				case pmetric.MetricTypeHistogram:
					for k := 0; k < m.At(j).Histogram().DataPoints().Len(); k++ {
						hist = append(hist, m.At(j).Histogram().DataPoints().At(k))
					}
				case pmetric.MetricTypeSum:
					for k := 0; k < m.At(j).Sum().DataPoints().Len(); k++ {
						sum = append(sum, m.At(j).Sum().DataPoints().At(k))
					}
				}
			}
		}
		return hist, sum
	}

	hist, sum := emit(2, false)
	require.Len(t, hist, 4)
	require.Len(t, sum, 1)
	for _, dp := range hist {
		assert.Equal(t, uint64(0), dp.Count())
		assert.Zero(t, dp.Sum())
		assert.Equal(t, []uint64{0, 0, 0, 0}, dp.BucketCounts().AsRaw())
		assert.Equal(t, descs[0].Bounds, dp.ExplicitBounds().AsRaw())
		assert.Equal(t, 0, dp.Exemplars().Len())
		assert.Equal(t, pcommon.Timestamp(1), dp.StartTimestamp())
		assert.Equal(t, pcommon.Timestamp(2), dp.Timestamp())
	}
	_, overflow := hist[3].Attributes().Get(OverflowKey)
	assert.True(t, overflow, "the overflow series, at zero too")
	assert.Equal(t, pmetric.NumberDataPointValueTypeInt, sum[0].ValueType(), "an int zero, not a point without a value")
	assert.Equal(t, int64(0), sum[0].IntValue())
	assert.Equal(t, map[string]any{"k": "a"}, sum[0].Attributes().AsRaw())

	st.Series(1, "svc", key("k", "new"), 3).Add(7)
	hist, sum = emit(4, false)
	assert.Equal(t, []uint64{0, 1, 0, 0}, hist[0].BucketCounts().AsRaw())
	assert.Equal(t, 1, hist[0].Exemplars().Len(), "the exemplar held back")
	assert.Equal(t, uint64(1), hist[3].Count(), "the overflow series' counts")
	require.Len(t, sum, 2)
	_, overflow = sum[1].Attributes().Get(OverflowKey)
	require.False(t, overflow)
	assert.Equal(t, int64(4), sum[0].IntValue())
	assert.Equal(t, int64(0), sum[1].IntValue(), "a later series' own leading zero")
	assert.Equal(t, pcommon.Timestamp(3), sum[1].StartTimestamp())

	st.Series(1, "svc", key("k", "last"), 5).Add(2)
	_, sum = emit(6, true)
	require.Len(t, sum, 3)
	assert.Equal(t, []int64{4, 7, 2}, []int64{sum[0].IntValue(), sum[1].IntValue(), sum[2].IntValue()}, "a last emission sends every count")
}

// TestCountsSaturate (outside review): a cumulative sum wrapped past
// 2⁶³−1 into negative values — a counter reset to every backend — after
// 8.4M spans of the largest count one span may carry; histogram counts
// could wrap past 2⁶⁴−1 likewise. A sum stays at its maximum; a histogram
// takes no observation that would wrap its count, which stays the sum of
// its buckets; both report it.
func TestCountsSaturate(t *testing.T) {
	st := New(descs, Options{MaxSeries: 10})
	c := st.Series(1, "svc", key(), 1)
	assert.False(t, c.Add(math.MaxInt64-5))
	assert.False(t, c.Add(5), "up to the maximum exactly")
	assert.True(t, c.Add(1), "past it")
	h := st.Series(0, "svc", key(), 1)
	assert.False(t, h.ObserveCounts([]uint64{math.MaxUint64 - 2, 0, 0, 0}, 1, Exemplar{}))
	assert.True(t, h.ObserveCounts([]uint64{3, 0, 0, 0}, 1, Exemplar{}))
	assert.False(t, h.Observe(descs[0].Bounds, 0.5, Exemplar{}))
	assert.False(t, h.Observe(descs[0].Bounds, 0.5, Exemplar{}), "up to the maximum exactly")
	assert.True(t, h.Observe(descs[0].Bounds, 0.5, Exemplar{}), "a review: past it, the count wrapped to 0")
	md := pmetric.NewMetrics()
	st.Emit(md, "scope", "v", 2, false)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		switch m := ms.At(i); m.Type() {
		case pmetric.MetricTypeSum:
			assert.Equal(t, int64(math.MaxInt64), m.Sum().DataPoints().At(0).IntValue())
		case pmetric.MetricTypeHistogram:
			dp := m.Histogram().DataPoints().At(0)
			assert.Equal(t, uint64(math.MaxUint64), dp.Count())
			assert.Equal(t, []uint64{math.MaxUint64, 0, 0, 0}, dp.BucketCounts().AsRaw(), "the buckets add up to the count")
		}
	}
}
