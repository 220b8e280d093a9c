// Package measure turns the spans of hedgeprobe, as derived by the
// streamwatch processor, into observations of the connector's metrics.
//
// It reads call spans (name streamwatch.call) and attempt spans (those with
// streamwatch.attempt.index) and ignores every other span. Figures come from
// the processor's attributes; an attempt span the processor did not derive
// but that still carries its raw timeline is derived here with
// internal/breakdown, the one implementation of that math.
//
// A value that cannot be used (wrong type, negative, NaN or infinite, an
// anomalous timeline) is skipped and reported to Problems; the rest of the
// span is still used. Nothing in a span can make a Recorder panic.
//
// A Recorder is not safe for concurrent use.
package measure

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/semconv"
)

// Reasons a value is reported as invalid.
const (
	ReasonWrongType = "wrong_type"
	ReasonNegative  = "negative"
	ReasonNotFinite = "not_finite"
	ReasonMissing   = "missing"
	// ReasonOutOfRange: a duration above MaxSeconds.
	ReasonOutOfRange = "out_of_range"
	// ReasonAnomaly: a timeline with a negative gap or a first chunk before
	// the span start, or a span the processor marked anomaly.
	ReasonAnomaly = "anomaly"
)

// MaxSeconds is the longest duration recorded (about 31 years): anything
// longer is a broken clock or unit, and could overflow a histogram's sum.
const MaxSeconds = 1e9

// SpanDuration names the span's own duration (end − start) in reports.
const SpanDuration = "span.duration"

// Problems receives what a Recorder could not use or had to work around.
// Calls are synchronous and must be cheap.
type Problems interface {
	// Invalid reports a value of key skipped for reason.
	Invalid(key, reason string)
	// Derived reports an attempt span derived from its raw timeline because
	// the processor had not derived it.
	Derived()
	// NoGaps reports a winning attempt with at least two content chunks
	// whose timeline is gone (dropped by the processor's drop_timeline), so
	// its gaps are missing from time_per_output_chunk.
	NoGaps()
}

// Options configure a Recorder.
type Options struct {
	aggregate.Options
	// StallThresholdUs is T for the attempts derived here.
	StallThresholdUs int64
	// Dimensions are extra span (then resource) attribute keys.
	Dimensions []string
}

// maxSegments bounds the stall segments recorded per attempt derived here;
// stall_count stays exact beyond it.
const maxSegments = 64

// Recorder records spans into a cumulative aggregate.Store.
type Recorder struct {
	store *aggregate.Store
	opts  Options
	p     Problems

	// Scratch, reused across spans so that a known series costs no
	// allocation.
	attrs []aggregate.Attr
	extra []aggregate.Attr
	offs  []int64
	segs  []breakdown.Segment
	now   pcommon.Timestamp
}

// New returns an empty Recorder.
func New(o Options, p Problems) *Recorder {
	return &Recorder{
		store: aggregate.New(Descs, o.Options),
		opts:  o,
		p:     p,
		segs:  make([]breakdown.Segment, 0, maxSegments),
	}
}

// Traces records every call and attempt span of td; new series start at now.
func (r *Recorder) Traces(td ptrace.Traces, now pcommon.Timestamp) {
	r.now = now
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := rs.Resource().Attributes()
		service := ""
		if v, ok := res.Get("service.name"); ok && v.Type() == pcommon.ValueTypeStr {
			service = v.Str()
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				r.span(service, res, spans.At(k))
			}
		}
	}
}

// Emit appends the cumulative snapshot to out (see aggregate.Store.Emit).
func (r *Recorder) Emit(out pmetric.Metrics, scope, version string, now pcommon.Timestamp) {
	r.store.Emit(out, scope, version, now)
}

// Empty reports whether nothing was recorded yet.
func (r *Recorder) Empty() bool { return r.store.Empty() }

// TakeOverflowed reports and resets the overflow counts per metric.
func (r *Recorder) TakeOverflowed(f func(metric string, n int64)) { r.store.TakeOverflowed(f) }

func (r *Recorder) span(service string, res pcommon.Map, sp ptrace.Span) {
	a := sp.Attributes()
	if sp.Name() == semconv.CallSpanName {
		r.extras(a, res)
		r.call(service, sp)
		return
	}
	if _, ok := a.Get(string(semconv.AttemptIndex)); ok {
		r.extras(a, res)
		r.attempt(service, sp)
	}
}

// call records a call span.
func (r *Recorder) call(service string, sp ptrace.Span) {
	a := sp.Attributes()
	outcome, ok := r.str(a, string(semconv.Outcome))
	if !ok {
		if _, present := a.Get(string(semconv.Outcome)); !present {
			r.p.Invalid(string(semconv.Outcome), ReasonMissing)
		}
		return
	}
	model := r.label(a, string(semconv.GenAIRequestModel))
	// The winner's route becomes streamwatch.route, as on attempt metrics.
	route := r.label(a, string(semconv.WinnerRoute))
	route.key = string(semconv.Route)
	out := label{key: string(semconv.Outcome), value: outcome, ok: true}
	ex := aggregate.Exemplar{Time: sp.EndTimestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID()}

	r.labels(model, route, out)
	r.series(calls, service).Add(1)

	if end, start := sp.EndTimestamp(), sp.StartTimestamp(); end >= start {
		r.observe(callDuration, service, float64(end-start)/1e9, ex)
	} else {
		r.p.Invalid(SpanDuration, ReasonNegative)
	}

	if v, ok := r.number(a, string(semconv.GenAIResponseTimeToFirstChunk)); ok {
		r.labels(model, route)
		r.observe(callTTFT, service, v, ex)
	}
}

// figures are the per-attempt figures, in seconds.
type figures struct {
	ttft, generation, active       float64
	hasTTFT, hasGeneration, hasAct bool
	stallCount                     int64
	hasStallCount                  bool
}

// label is an optional string attribute of a span.
type label struct {
	key, value string
	ok         bool
}

// attemptLabels are the attempt span's attributes that become metric
// attributes.
type attemptLabels struct {
	provider, model, route, outcome, trigger label
}

func (r *Recorder) label(a pcommon.Map, k string) label {
	v, ok := r.str(a, k)
	return label{key: k, value: v, ok: ok}
}

// attempt records an attempt span.
func (r *Recorder) attempt(service string, sp ptrace.Span) {
	a := sp.Attributes()
	index, okIndex := r.count(a, string(semconv.AttemptIndex))
	l := attemptLabels{
		provider: r.label(a, string(semconv.GenAIProviderName)),
		model:    r.label(a, string(semconv.GenAIRequestModel)),
		route:    r.label(a, string(semconv.Route)),
		outcome:  r.label(a, string(semconv.AttemptOutcome)),
		trigger:  r.label(a, string(semconv.AttemptTrigger)),
	}
	chunks, okChunks := r.count(a, string(semconv.ChunkCount))
	offs, okOffs := r.offsets(sp)
	// A timeline with a chunk before the span start or a gap going back
	// yields no figure at all (docs/design.md §4 "anomaly"); it is reported once.
	anomalous := okOffs && !ordered(offs)
	if anomalous {
		r.p.Invalid(string(semconv.ChunkOffsetsUs), ReasonAnomaly)
		okOffs = false
	}
	ex := aggregate.Exemplar{Time: sp.EndTimestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID()}

	// Most attempt metrics carry provider, model, route, attempt outcome
	// and the extra dimensions.
	r.labels(l.provider, l.model, l.route, l.outcome)

	var f figures
	if _, derived := a.Get(string(semconv.Derivation)); derived {
		f = r.fromAttributes(a)
		if f.hasStallCount || f.hasGeneration {
			r.stallEvents(service, sp)
		}
	} else if okOffs {
		expected := int64(-1)
		if okChunks {
			expected = chunks
		}
		res := breakdown.Derive(breakdown.Timeline{
			ChunkOffsetsUs: offs,
			ExpectedChunks: expected,
			ThresholdUs:    r.opts.StallThresholdUs,
		}, r.segs)
		r.p.Derived()
		f = fromResult(&res)
		start := sp.StartTimestamp()
		for _, s := range res.Segments {
			r.observe(stallDuration, service, float64(s.DurationUs)/1e6, aggregate.Exemplar{
				Time: start + pcommon.Timestamp(s.StartUs*1000), TraceID: ex.TraceID, SpanID: ex.SpanID,
			})
		}
	}

	if f.hasTTFT {
		r.observe(attemptTTFT, service, f.ttft, ex)
	}
	if f.hasGeneration {
		r.observe(generation, service, f.generation, ex)
	}
	if f.hasAct {
		r.observe(activeGeneration, service, f.active, ex)
	}
	if f.hasStallCount {
		r.series(stalls, service).Add(f.stallCount)
		stalled := label{key: string(semconv.Stalled), value: "no", ok: true}
		if f.stallCount > 0 {
			stalled.value = "yes"
		}
		r.labels(l.provider, l.model, l.route, l.outcome, stalled)
		r.series(streams, service).Add(1)
		r.labels(l.provider, l.model, l.route, l.outcome)
	}
	if l.outcome.ok && l.outcome.value != semconv.AttemptOutcomeWinner && okChunks {
		r.series(wastedChunks, service).Add(chunks)
	}
	if okIndex && index > 0 {
		r.labels(l.provider, l.model, l.route, l.trigger, l.outcome)
		r.series(hedges, service).Add(1)
	}
	if l.outcome.ok && l.outcome.value == semconv.AttemptOutcomeWinner {
		switch {
		case okOffs:
			r.labels(l.provider, l.model, l.route)
			r.gaps(service, sp, offs)
		case okChunks && chunks >= 2 && !anomalous:
			r.p.NoGaps()
		}
	}
}

// labels sets the attribute list of the next series: the present labels in
// order, then the extra dimensions.
func (r *Recorder) labels(ls ...label) {
	r.attrs = r.attrs[:0]
	for _, l := range ls {
		if l.ok {
			r.attrs = append(r.attrs, aggregate.Attr{Key: l.key, Value: l.value})
		}
	}
	r.attrs = append(r.attrs, r.extra...)
}

// ordered reports whether a timeline starts at or after the span start and
// never goes back.
func ordered(offs []int64) bool {
	if len(offs) > 0 && offs[0] < 0 {
		return false
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return false
		}
	}
	return true
}

// gaps records every gap of an ordered winner's timeline in
// time_per_output_chunk, under the labels already set.
func (r *Recorder) gaps(service string, sp ptrace.Span, offs []int64) {
	if len(offs) < 2 {
		return
	}
	if float64(offs[len(offs)-1]-offs[0])/1e6 > MaxSeconds {
		r.p.Invalid(Descs[timePerOutputChunk].Name, ReasonOutOfRange)
		return
	}
	s := r.series(timePerOutputChunk, service)
	bounds := r.store.Bounds(timePerOutputChunk)
	start := sp.StartTimestamp()
	ex := aggregate.Exemplar{TraceID: sp.TraceID(), SpanID: sp.SpanID()}
	for i := 1; i < len(offs); i++ {
		ex.Time = start + pcommon.Timestamp(offs[i]*1000)
		s.Observe(bounds, float64(offs[i]-offs[i-1])/1e6, ex)
	}
}

// fromAttributes reads the processor's figures.
func (r *Recorder) fromAttributes(a pcommon.Map) figures {
	var f figures
	if v, ok := r.str(a, string(semconv.Derivation)); ok && v == semconv.DerivationAnomaly {
		r.p.Invalid(string(semconv.Derivation), ReasonAnomaly)
		return f
	}
	f.ttft, f.hasTTFT = r.number(a, string(semconv.TTFTMs))
	f.generation, f.hasGeneration = r.number(a, string(semconv.GenerationMs))
	f.active, f.hasAct = r.number(a, string(semconv.ActiveGenerationMs))
	f.ttft /= 1000
	f.generation /= 1000
	f.active /= 1000
	f.stallCount, f.hasStallCount = r.count(a, string(semconv.StallCount))
	return f
}

// fromResult converts a breakdown derived here.
func fromResult(res *breakdown.Result) figures {
	var f figures
	var v int64
	v, f.hasTTFT = res.TTFTUs()
	f.ttft = float64(v) / 1e6
	v, f.hasGeneration = res.GenerationUs()
	f.generation = float64(v) / 1e6
	v, f.hasAct = res.ActiveGenerationUs()
	f.active = float64(v) / 1e6
	n, ok := res.StallSegments()
	f.stallCount, f.hasStallCount = int64(n), ok
	return f
}

// stallEvents records the processor's streamwatch.stall events.
func (r *Recorder) stallEvents(service string, sp ptrace.Span) {
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		if e.Name() != semconv.EventStall {
			continue
		}
		v, ok := r.number(e.Attributes(), string(semconv.StallDurationMs))
		if !ok {
			if _, present := e.Attributes().Get(string(semconv.StallDurationMs)); !present {
				r.p.Invalid(string(semconv.StallDurationMs), ReasonMissing)
			}
			continue
		}
		r.observe(stallDuration, service, v/1000, aggregate.Exemplar{
			Time: e.Timestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID(),
		})
	}
}

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

// offsets reads the timeline into scratch: the compact form, else the
// event form (streamwatch.chunk events, converted to µs since span start).
// False when there is neither, or the compact form is malformed (reported).
func (r *Recorder) offsets(sp ptrace.Span) ([]int64, bool) {
	r.offs = r.offs[:0]
	v, ok := sp.Attributes().Get(string(semconv.ChunkOffsetsUs))
	if !ok {
		return r.chunkEvents(sp)
	}
	if v.Type() != pcommon.ValueTypeSlice {
		r.p.Invalid(string(semconv.ChunkOffsetsUs), ReasonWrongType)
		return nil, false
	}
	sl := v.Slice()
	for i := 0; i < sl.Len(); i++ {
		e := sl.At(i)
		if e.Type() != pcommon.ValueTypeInt {
			r.p.Invalid(string(semconv.ChunkOffsetsUs), ReasonWrongType)
			return nil, false
		}
		r.offs = append(r.offs, e.Int())
	}
	return r.offs, true
}

// chunkEvents reads the event form of the timeline.
func (r *Recorder) chunkEvents(sp ptrace.Span) ([]int64, bool) {
	evs := sp.Events()
	start := int64(sp.StartTimestamp())
	found := false
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		if e.Name() != semconv.EventChunk {
			continue
		}
		found = true
		// Timestamps are unsigned ns; the difference is taken in int64 so
		// an event before the span start becomes a negative offset, which
		// the anomaly checks then catch.
		r.offs = append(r.offs, (int64(e.Timestamp())-start)/1000)
	}
	return r.offs, found
}
