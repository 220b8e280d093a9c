package measure

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
)

// Reading the values of a span, and the series they go to.

func (r *Recorder) series(m int, service string) *aggregate.Series {
	return r.store.Series(m, aggregate.Attrs{Service: service, List: r.attrs}, r.now)
}

func (r *Recorder) observe(m int, service string, v float64, ex aggregate.Exemplar) {
	if v > MaxSeconds {
		r.p.Invalid(Descs[m].Name, ReasonOutOfRange)
		return
	}
	r.series(m, service).Observe(r.store.Bounds(m), v, ex)
}

// extras reads the configured dimensions from the span, then the resource.
func (r *Recorder) extras(a, res pcommon.Map) {
	r.extra = r.extra[:0]
	for _, k := range r.opts.Dimensions {
		v, ok := a.Get(k)
		if !ok {
			v, ok = res.Get(k)
		}
		if ok {
			r.extra = append(r.extra, aggregate.Attr{Key: k, Value: v.AsString()})
		}
	}
}

// str reads a string attribute; a present value of another type is
// reported.
func (r *Recorder) str(a pcommon.Map, k string) (string, bool) {
	v, ok := a.Get(k)
	if !ok {
		return "", false
	}
	if v.Type() != pcommon.ValueTypeStr {
		r.p.Invalid(k, ReasonWrongType)
		return "", false
	}
	return v.Str(), true
}

// number reads a finite, non-negative double (an int is accepted).
func (r *Recorder) number(a pcommon.Map, k string) (float64, bool) {
	v, ok := a.Get(k)
	if !ok {
		return 0, false
	}
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	default:
		r.p.Invalid(k, ReasonWrongType)
		return 0, false
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		r.p.Invalid(k, ReasonNotFinite)
		return 0, false
	case f < 0:
		r.p.Invalid(k, ReasonNegative)
		return 0, false
	}
	return f, true
}

// count reads a non-negative integer (an integral double is accepted).
func (r *Recorder) count(a pcommon.Map, k string) (int64, bool) {
	v, ok := a.Get(k)
	if !ok {
		return 0, false
	}
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			r.p.Invalid(k, ReasonNotFinite)
			return 0, false
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			r.p.Invalid(k, ReasonWrongType)
			return 0, false
		}
		n = int64(f)
	default:
		r.p.Invalid(k, ReasonWrongType)
		return 0, false
	}
	if n < 0 {
		r.p.Invalid(k, ReasonNegative)
		return 0, false
	}
	return n, true
}
