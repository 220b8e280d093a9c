// Package measure turns the spans of hedgeprobe, as derived by the
// streamwatch processor, into observations of the connector's metrics.
//
// It reads call spans (name streamwatch.call) and attempt spans (those with
// streamwatch.attempt.index) and ignores every other span. Figures come from
// the processor's attributes; a span the processor did not derive but that
// still carries its raw timeline (an attempt's, or the caller's view on a
// call span) is derived here with internal/timeline, the one reader and
// derivation path the processor uses too.
//
// A value that cannot be used (wrong type, negative, NaN or infinite, an
// anomalous timeline) is skipped and reported to Problems; the rest of the
// span is still used. A label that is not UTF-8 is repaired and reported.
// Nothing in a span can make a Recorder panic.
//
// A Recorder is not safe for concurrent use.
package measure

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

// Reasons a value is reported as invalid.
const (
	ReasonWrongType = "wrong_type"
	ReasonNegative  = "negative"
	ReasonNotFinite = "not_finite"
	ReasonMissing   = "missing"
	// ReasonOutOfRange: a duration above MaxSeconds, a count above
	// MaxCount, gap counts that add up to none.
	ReasonOutOfRange = "out_of_range"
	// ReasonNotUTF8: a string used as a label that is not valid UTF-8; it
	// is used with each run of invalid bytes replaced by U+FFFD.
	ReasonNotUTF8 = "not_utf8"
	// ReasonTooLong: a string used as a label that is longer than
	// MaxLabelBytes; it is used cut there.
	ReasonTooLong = "too_long"
	// ReasonNotACode: an error.type that reads as text, not as a code
	// (see codeLike); it is recorded as "_OTHER".
	ReasonNotACode = "not_a_code"
	// ReasonUnknown: a streamwatch.derivation that is none of the
	// processor's values (a producer's); the span is derived from its
	// timeline as though the key were absent.
	ReasonUnknown = "unknown_value"
	// ReasonAnomaly: a derivation that is an anomaly (a malformed timeline,
	// a negative gap, a first chunk before the span start), whether the
	// processor or the connector derived it; reported on
	// streamwatch.derivation either way.
	ReasonAnomaly = "anomaly"
)

// MaxLabelBytes is the longest label value kept (model, route, provider,
// service.name, a configured dimension…): a longer one is cut, at a
// character's start, to at most this many bytes. Names and ids run far
// shorter; unbounded, one producer's megabyte values would be held by every
// series they make, and sent at every flush.
const MaxLabelBytes = 256

// MaxSeconds is the longest duration recorded (about 31 years): anything
// longer is a broken clock or unit, and could overflow a histogram's sum.
const MaxSeconds = 1e9

// MaxCount is the largest count taken from one span (2⁴⁰, about 1.1×10¹²:
// more chunks than a 7-day stream holds at one per µs): anything larger is
// a broken producer, and a few such spans would wrap a cumulative counter.
const MaxCount = 1 << 40

// SpanDuration names the span's own duration (end − start) in reports.
const SpanDuration = "span.duration"

// Problems receives what a Recorder could not use or had to work around.
// Calls are synchronous and must be cheap.
type Problems interface {
	// Invalid reports a value of key skipped for reason.
	Invalid(key, reason string)
	// Derived reports a span derived from its raw timeline because the
	// processor had not derived it.
	Derived()
	// NoGaps reports an attempt whose gaps are pooled (a winner, or one
	// that gave the caller every chunk) with at least two content chunks
	// that carries neither a timeline nor streamwatch.gap.bucket_counts, so
	// its gaps are missing from time_per_output_chunk.
	NoGaps()
	// SegmentsDropped reports the stall segments of an attempt derived
	// here past the maxSegments it records: counted in streamwatch.stalls,
	// missing from streamwatch.stall.duration.
	SegmentsDropped(n int)
}

// Options configure a Recorder.
type Options struct {
	aggregate.Options
	// StallThresholdUs is T for the attempts derived here.
	StallThresholdUs int64
	// Dimensions are extra span (then resource) attribute keys.
	Dimensions []string
}

// maxSegments bounds the stall segments recorded per attempt derived here,
// as the processor's max_segments does by default: stall_count stays exact
// beyond it, and the rest are reported (Problems.SegmentsDropped).
const maxSegments = 64

// Recorder records spans into a cumulative aggregate.Store.
type Recorder struct {
	store *aggregate.Store
	opts  Options
	p     Problems

	// Scratch, reused across spans so that a known series costs no
	// allocation.
	key   aggregate.Key // the next series' attributes (labels)
	extra aggregate.Key // the span's extra dimensions (extras)
	buf   timeline.Buffers
	vals  values
	now   pcommon.Timestamp
}

// New returns an empty Recorder.
func New(o Options, p Problems) *Recorder {
	return &Recorder{
		store: aggregate.New(Descs, o.Options),
		opts:  o,
		p:     p,
	}
}

// Traces records every call and attempt span of td; new series start at now.
func (r *Recorder) Traces(td ptrace.Traces, now pcommon.Timestamp) {
	r.now = now
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := rs.Resource().Attributes()
		// A service.name that is not a string (the semantic conventions
		// say it is one) is read as its string form, as the Prometheus
		// exporter reads it for the job label, rather than merged into
		// the resource of spans that have none.
		service := ""
		if v, ok := res.Get("service.name"); ok {
			service = r.labelValue("service.name", v.AsString())
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				r.span(service, res, spans.At(k))
			}
		}
	}
	r.buf.Shrink()
}

// Emit appends the cumulative snapshot to out (see aggregate.Store.Emit).
func (r *Recorder) Emit(out pmetric.Metrics, scope, version string, now pcommon.Timestamp, last bool) {
	r.store.Emit(out, scope, version, now, last)
}

// Unsent says the latest Emit's snapshot did not reach the backend (see
// aggregate.Store.Unsent).
func (r *Recorder) Unsent() { r.store.Unsent() }

// Empty reports whether nothing was recorded yet.
func (r *Recorder) Empty() bool { return r.store.Empty() }

// TakeOverflowed reports and resets the overflow counts per metric.
func (r *Recorder) TakeOverflowed(f func(metric string, n int64)) { r.store.TakeOverflowed(f) }

func (r *Recorder) span(service string, res pcommon.Map, sp ptrace.Span) {
	a := sp.Attributes()
	r.vals.scan(a)
	if sp.Name() == semconv.CallSpanName {
		r.extras(a, res)
		r.call(service, sp)
		return
	}
	if _, ok := r.vals.get(slotIndex); ok {
		r.extras(a, res)
		r.attempt(service, sp)
	}
}
