// Package aggregate holds the cumulative series of the streamwatch connector:
// explicit-bucket histograms and monotonic sums, keyed by a cheap byte key,
// capped per metric with one overflow series, with capped exemplars that are
// cleared at every emission, each series optionally emitted first at zero.
//
// A Store is not safe for concurrent use; the connector guards it with its
// own mutex.
//
// The canonical use:
//
//	st := aggregate.New(descs, aggregate.Options{MaxSeries: 1000, MaxExemplars: 5})
//	var k aggregate.Key
//	k.Reset(); k.Add("streamwatch.route", "a")
//	s := st.Series(metric, service, &k, now) // builds attributes only for a new series
//	s.Observe(v, ex)                         // histograms
//	s.Add(n)                                 // sums
//	st.Emit(out, scope, version, now, false) // cumulative snapshot, exemplars reset
package aggregate

import (
	"encoding/binary"
	"math"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamwatch/streamwatch/semconv"
)

// Kind is the instrument of a metric.
type Kind uint8

const (
	// Histogram is an explicit-bucket histogram of float64 observations.
	Histogram Kind = iota
	// Sum is a monotonic int64 counter.
	Sum
)

// Desc describes one metric.
type Desc struct {
	Name        string
	Unit        string
	Description string
	Kind        Kind
	// Bounds are the explicit bucket boundaries of a Histogram, ascending.
	Bounds []float64
}

// OverflowKey is the attribute that marks the one overflow series of a
// metric past its series cap, as the OpenTelemetry SDKs name it.
const OverflowKey = semconv.MetricOverflow

// Options bound the memory of a Store.
type Options struct {
	// MaxSeries is the number of series each metric keeps, overflow series
	// excluded. Further attribute sets go to the overflow series.
	MaxSeries int
	// MaxExemplars is the number of exemplars a series keeps between two
	// emissions; 0 keeps none.
	MaxExemplars int
	// LeadingZero emits every series at zero, without exemplars, the first
	// time it is emitted (unless that emission is the last), and what it
	// holds from the next on: a backend that computes increases between
	// samples (Prometheus's rate) then counts a series' first measurements
	// too, instead of taking them as where the series started.
	LeadingZero bool
}

// Key is the attributes of a series, in a fixed order per metric (absent
// attributes left out), encoded with every key and value length-prefixed:
// no two attribute lists encode alike, whatever bytes the values hold. The
// zero Key is empty and ready to use; reuse one with Reset, so that
// finding an existing series allocates nothing.
type Key struct{ b []byte }

// Reset empties k, keeping its buffer.
func (k *Key) Reset() { k.b = k.b[:0] }

// Add appends one attribute.
//
// The methods of Key store k.b once each: a Key lives in a heap object,
// and while the garbage collector marks — most of the time under load —
// every store of the slice runs a write barrier (docs/scale.md).
func (k *Key) Add(key, value string) { k.b = appendString(appendString(k.b, key), value) }

// Append appends every attribute of o.
func (k *Key) Append(o *Key) { k.b = append(k.b, o.b...) }

// appendString appends s to b with its length as a uvarint.
func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeAttrs decodes an encoding of Key into m. Keys are built only by
// Add, so the encoding is always whole; a truncated one would end early.
func decodeAttrs(b []byte, m pcommon.Map) {
	next := func() string {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			b = nil
			return ""
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s
	}
	for len(b) > 0 {
		k := next()
		m.PutStr(k, next())
	}
}

// Exemplar is a sampled observation with the span it came from.
type Exemplar struct {
	Time    pcommon.Timestamp
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}

// links reports whether ex names a span. One without a trace or span id
// (a producer that propagates no context, a hand-built batch) would lead
// nowhere, and would take a slot — the first exemplars win — from one
// that leads to its trace: it is not kept.
func (ex Exemplar) links() bool { return !ex.TraceID.IsEmpty() && !ex.SpanID.IsEmpty() }

// Series is one attribute set of one metric.
type Series struct {
	service string
	attrs   pcommon.Map
	start   pcommon.Timestamp

	// Histogram state; counts has len(bounds)+1 buckets.
	counts []uint64
	count  uint64
	sum    float64
	// Sum state.
	value int64

	exemplars []exemplar
	maxEx     int
	// emitted is set once the series has been emitted (Options.LeadingZero).
	emitted bool

	// overflowed is the table's count of measurements routed to its
	// overflow series, on that series only (nil on every other).
	overflowed *int64
}

type exemplar struct {
	value float64
	Exemplar
}

type table struct {
	desc     Desc
	series   map[string]*Series
	order    []*Series // creation order, for a stable emission
	overflow *Series
	// overflowed counts measurements recorded in the overflow series
	// since the last TakeOverflowed: each observation, a stream's gaps
	// each, and each addition.
	overflowed int64
}

// Store is the set of all series of all metrics.
type Store struct {
	opts   Options
	tables []table
	key    Key // scratch for the map key
	// zeroed are the series the latest Emit sent as their leading zero,
	// for Unsent.
	zeroed []*Series
}

// New returns an empty Store for the metrics descs, indexed by position.
func New(descs []Desc, opts Options) *Store {
	st := &Store{opts: opts, tables: make([]table, len(descs))}
	for i, d := range descs {
		st.tables[i] = table{desc: d, series: make(map[string]*Series)}
	}
	return st
}

// Series returns the series of metric m for service and attributes k,
// creating it at now when it is new. Past the series cap it returns the
// metric's overflow series. The attribute map is built only when a series
// is created; finding an existing series does not allocate.
func (st *Store) Series(m int, service string, k *Key, now pcommon.Timestamp) *Series {
	t := &st.tables[m]
	// The map key is the service, length-prefixed, then the attributes.
	st.key.b = append(appendString(st.key.b[:0], service), k.b...)
	if s, ok := t.series[string(st.key.b)]; ok {
		return s
	}
	if len(t.series) >= st.opts.MaxSeries {
		if t.overflow == nil {
			t.overflow = st.newSeries(t.desc, "", now)
			t.overflow.attrs.PutBool(OverflowKey, true)
			t.overflow.overflowed = &t.overflowed
		}
		return t.overflow
	}
	s := st.newSeries(t.desc, service, now)
	decodeAttrs(k.b, s.attrs)
	t.series[string(st.key.b)] = s
	t.order = append(t.order, s)
	return s
}

func (st *Store) newSeries(d Desc, service string, now pcommon.Timestamp) *Series {
	s := &Series{service: service, attrs: pcommon.NewMap(), start: now, maxEx: st.opts.MaxExemplars}
	if d.Kind == Histogram {
		s.counts = make([]uint64, len(d.Bounds)+1)
	}
	return s
}

// Observe records v in a histogram series with bounds (those of its Desc)
// and keeps ex as an exemplar while the series has room for one (and ex
// names a span). Callers pass finite, non-negative values only. An
// observation that would wrap the count is not recorded, as in
// ObserveCounts, and saturated is true.
func (s *Series) Observe(bounds []float64, v float64, ex Exemplar) (saturated bool) {
	if s.count == math.MaxUint64 {
		return true
	}
	// Buckets are upper-inclusive, (b[i-1], b[i]], as in OTLP.
	s.overflow(1)
	i := sort.SearchFloat64s(bounds, v)
	s.counts[i]++
	s.count++
	s.sum += v
	if len(s.exemplars) < s.maxEx && ex.links() {
		s.exemplars = append(s.exemplars, exemplar{value: v, Exemplar: ex})
	}
	return false
}

// ObserveCounts records observations already bucketed over the series'
// bounds — counts[i] of them in bucket i, len(counts) at most
// len(bounds)+1 — whose values add up to sum, and keeps ex as one
// exemplar, valued at their mean, while the series has room. It is one call for a
// whole stream's gaps (internal/breakdown.CountGaps, or the processor's
// streamwatch.gap.bucket_counts). Callers pass a finite, non-negative sum.
// Observations that would take the count past 2⁶⁴−1 are not recorded,
// and saturated is true: the count stays the sum of the bucket counts, as
// OTLP requires (see Add). Callers pass counts of at most 2⁴⁰ each
// (measure.MaxCount).
func (s *Series) ObserveCounts(counts []uint64, sum float64, ex Exemplar) (saturated bool) {
	counts = counts[:min(len(counts), len(s.counts))]
	var n uint64
	for _, c := range counts {
		var ok bool
		if n, ok = addCount(n, c); !ok {
			return true
		}
	}
	if n == 0 {
		return false
	}
	if _, ok := addCount(s.count, n); !ok {
		return true
	}
	// No bucket can wrap: each holds at most the count.
	for i, c := range counts {
		s.counts[i] += c
	}
	s.overflow(int64(min(n, math.MaxInt64)))
	s.count += n
	s.sum += sum
	if len(s.exemplars) < s.maxEx && ex.links() {
		s.exemplars = append(s.exemplars, exemplar{value: sum / float64(n), Exemplar: ex})
	}
	return false
}

// Add adds n ≥ 0 to a sum series. A cumulative sum never passes
// 2⁶³−1: where it would, it stays there and saturated is true. Wrapped, it
// would go negative, which a backend reads as a counter reset — a spike
// of the whole count in every rate() — where a sum that stops rising
// reads as no more traffic.
func (s *Series) Add(n int64) (saturated bool) {
	s.overflow(1)
	if n > math.MaxInt64-s.value {
		s.value = math.MaxInt64
		return true
	}
	s.value += n
	return false
}

// addCount returns a+b, or 2⁶⁴−1 and false where that would wrap.
func addCount(a, b uint64) (uint64, bool) {
	if b > math.MaxUint64-a {
		return math.MaxUint64, false
	}
	return a + b, true
}

// overflow counts n measurements when s is an overflow series.
func (s *Series) overflow(n int64) {
	if s.overflowed != nil {
		*s.overflowed += n
	}
}

// Bounds returns the bucket bounds of metric m.
func (st *Store) Bounds(m int) []float64 { return st.tables[m].desc.Bounds }

// Len returns the number of series of metric m, overflow series excluded.
func (st *Store) Len(m int) int { return len(st.tables[m].series) }

// TakeOverflowed returns, per metric, the measurements routed to the
// overflow series since the last call, and resets them.
func (st *Store) TakeOverflowed(f func(name string, n int64)) {
	for i := range st.tables {
		t := &st.tables[i]
		if t.overflowed > 0 {
			f(t.desc.Name, t.overflowed)
			t.overflowed = 0
		}
	}
}

// Empty reports whether the store holds no series at all.
func (st *Store) Empty() bool {
	for i := range st.tables {
		if len(st.tables[i].series) > 0 || st.tables[i].overflow != nil {
			return false
		}
	}
	return true
}

// Unsent says that the snapshot of the latest Emit did not reach the
// backend: the series it carried as their leading zero are sent at zero
// again by the next Emit. Otherwise the first sample the backend saw of
// them would hold their counts, and rate() would count none of those. The
// exemplars that snapshot took are lost with it. Call it before the next
// Emit, or not at all.
func (st *Store) Unsent() {
	for _, s := range st.zeroed {
		s.emitted = false
	}
	clear(st.zeroed)
	st.zeroed = st.zeroed[:0]
}

// Emit appends a cumulative snapshot of every series to out, one
// ResourceMetrics per service (resource attribute service.name), under the
// scope named scope, with time now. Exemplars are moved into the snapshot
// and cleared, so each appears once. With Options.LeadingZero a series
// emitted for the first time is emitted at zero and keeps its counts and
// exemplars for the next Emit, unless last says there will be none.
func (st *Store) Emit(out pmetric.Metrics, scope, version string, now pcommon.Timestamp, last bool) {
	clear(st.zeroed)
	st.zeroed = st.zeroed[:0]
	scopes := map[string]pmetric.ScopeMetrics{}
	scopeOf := func(service string) pmetric.ScopeMetrics {
		if sm, ok := scopes[service]; ok {
			return sm
		}
		rm := out.ResourceMetrics().AppendEmpty()
		if service != "" {
			rm.Resource().Attributes().PutStr("service.name", service)
		}
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(scope)
		sm.Scope().SetVersion(version)
		scopes[service] = sm
		return sm
	}
	for i := range st.tables {
		t := &st.tables[i]
		metrics := map[string]pmetric.Metric{}
		metricOf := func(service string) pmetric.Metric {
			if m, ok := metrics[service]; ok {
				return m
			}
			m := scopeOf(service).Metrics().AppendEmpty()
			m.SetName(t.desc.Name)
			m.SetUnit(t.desc.Unit)
			m.SetDescription(t.desc.Description)
			switch t.desc.Kind {
			case Histogram:
				m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			case Sum:
				sum := m.SetEmptySum()
				sum.SetIsMonotonic(true)
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			}
			metrics[service] = m
			return m
		}
		emit := func(s *Series) {
			m := metricOf(s.service)
			zero := st.opts.LeadingZero && !s.emitted && !last
			s.emitted = true
			if zero {
				st.zeroed = append(st.zeroed, s)
			}
			switch t.desc.Kind {
			case Histogram:
				dp := m.Histogram().DataPoints().AppendEmpty()
				s.attrs.CopyTo(dp.Attributes())
				dp.SetStartTimestamp(s.start)
				dp.SetTimestamp(now)
				dp.ExplicitBounds().FromRaw(t.desc.Bounds)
				if zero {
					dp.BucketCounts().FromRaw(make([]uint64, len(s.counts)))
					return
				}
				dp.SetCount(s.count)
				dp.SetSum(s.sum)
				dp.BucketCounts().FromRaw(s.counts)
				exs := dp.Exemplars()
				exs.EnsureCapacity(len(s.exemplars))
				for _, e := range s.exemplars {
					x := exs.AppendEmpty()
					x.SetDoubleValue(e.value)
					x.SetTimestamp(e.Time)
					x.SetTraceID(e.TraceID)
					x.SetSpanID(e.SpanID)
				}
				s.exemplars = s.exemplars[:0]
			case Sum:
				dp := m.Sum().DataPoints().AppendEmpty()
				s.attrs.CopyTo(dp.Attributes())
				dp.SetStartTimestamp(s.start)
				dp.SetTimestamp(now)
				v := s.value
				if zero {
					v = 0
				}
				dp.SetIntValue(v)
			}
		}
		for _, s := range t.order {
			emit(s)
		}
		if t.overflow != nil {
			emit(t.overflow)
		}
	}
}
