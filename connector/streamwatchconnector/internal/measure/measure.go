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
	"github.com/streamwatch/streamwatch/internal/timeline"
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
	// ReasonAnomaly: a derivation that is an anomaly (a malformed timeline,
	// a negative gap, a first chunk before the span start), whether the
	// processor or the connector derived it; reported on
	// streamwatch.derivation either way.
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
	// Derived reports a span derived from its raw timeline because the
	// processor had not derived it.
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
	buf   timeline.Buffers
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
	r.buf.Shrink()
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

// call records a call span: the call metrics, the caller's view and the
// route ejections reported on it.
func (r *Recorder) call(service string, sp ptrace.Span) {
	a := sp.Attributes()
	r.ejections(service, sp)
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

	// The caller's view: the silence the caller lived through, beside the
	// upstreams' own (docs/design.md §5). Its stall events are not upstream
	// segments and stay out of streamwatch.stall.duration.
	if f := r.figures(service, sp, timeline.Caller); f.hasStall && f.hasStallCount {
		r.observe(callStallDuration, service, f.stall, ex)
		r.series(callStalls, service).Add(f.stallCount)
	}

	if v, ok := r.number(a, string(semconv.GenAIResponseTimeToFirstChunk)); ok {
		r.labels(model, route)
		r.observe(callTTFT, service, v, ex)
	}
}

// ejections counts the streamwatch.route.ejected events of a call span by
// route and reason. An event without a route is skipped and reported.
func (r *Recorder) ejections(service string, sp ptrace.Span) {
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		if e.Name() != semconv.EventRouteEjected {
			continue
		}
		ea := e.Attributes()
		route := r.label(ea, string(semconv.EventRoute))
		if !route.ok {
			if _, present := ea.Get(string(semconv.EventRoute)); !present {
				r.p.Invalid(string(semconv.EventRoute), ReasonMissing)
			}
			continue
		}
		r.labels(route, r.label(ea, string(semconv.EventEjectionReason)))
		r.series(routeEjections, service).Add(1)
	}
}

// figures are a span's figures, in seconds.
type figures struct {
	ttft, generation, active, stall          float64
	hasTTFT, hasGeneration, hasAct, hasStall bool
	stallCount                               int64
	hasStallCount                            bool
	// derivation is the streamwatch.derivation value, empty when the span
	// has no timeline.
	derivation string
	// offs is the timeline when it was derived here (nil otherwise).
	offs []int64
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
	ex := aggregate.Exemplar{Time: sp.EndTimestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID()}

	// Most attempt metrics carry provider, model, route, attempt outcome
	// and the extra dimensions.
	r.labels(l.provider, l.model, l.route, l.outcome)
	f := r.figures(service, sp, timeline.Compact)

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
		derivation := label{key: string(semconv.Derivation), value: f.derivation, ok: f.derivation != ""}
		r.labels(l.provider, l.model, l.route, l.outcome, stalled, derivation)
		r.series(streams, service).Add(1)
		r.labels(l.provider, l.model, l.route, l.outcome)
	}
	// Wasted: received and never given to the caller. hedgeprobe says how
	// many of an attempt's chunks the caller got (a resumed attempt is
	// cancelled, yet delivered); without that, every chunk of an attempt
	// that did not win.
	// Every attempt that did not win keeps a series, 0 or not, so a route
	// whose attempts only ever fail is still listed by the dashboard's
	// route variable.
	switch delivered, okDelivered := r.count(a, string(semconv.ChunksDelivered)); {
	case okChunks && okDelivered && delivered <= chunks:
		if chunks > delivered || l.outcome.value != semconv.AttemptOutcomeWinner {
			r.series(wastedChunks, service).Add(chunks - delivered)
		}
	case l.outcome.ok && l.outcome.value != semconv.AttemptOutcomeWinner && okChunks:
		r.series(wastedChunks, service).Add(chunks)
	}
	if okIndex && index > 0 {
		r.labels(l.provider, l.model, l.route, l.trigger, l.outcome)
		r.series(hedges, service).Add(1)
	}
	// A burst has no identifiable gaps (docs/design.md §4) and an anomaly
	// none at all: neither feeds the pooled ITL.
	if l.outcome.ok && l.outcome.value == semconv.AttemptOutcomeWinner &&
		f.derivation != semconv.DerivationBurst && f.derivation != semconv.DerivationAnomaly {
		r.labels(l.provider, l.model, l.route)
		r.winnerGaps(service, sp, &f, okChunks && chunks >= 2)
	}
}

// figures returns the figures of a span: the processor's attributes when it
// derived the span, else derived here from the span's timeline of form want
// (timeline.Caller for a call span's caller view, any attempt form
// otherwise). Stall segments of attempts are recorded on the way.
func (r *Recorder) figures(service string, sp ptrace.Span, want timeline.Form) figures {
	a := sp.Attributes()
	if _, derived := a.Get(string(semconv.Derivation)); derived {
		f := r.fromAttributes(a)
		if want != timeline.Caller && (f.hasStallCount || f.hasGeneration) {
			r.stallEvents(service, sp)
		}
		return f
	}
	d := timeline.Derive(sp, &r.buf, r.opts.StallThresholdUs, maxSegments)
	if d.Form == timeline.None || (d.Form == timeline.Caller) != (want == timeline.Caller) {
		return figures{}
	}
	r.p.Derived()
	res := &d.Result
	if res.Status == breakdown.Anomaly {
		r.p.Invalid(string(semconv.Derivation), ReasonAnomaly)
		return figures{derivation: semconv.DerivationAnomaly}
	}
	f := fromResult(res)
	f.offs = d.Chunks
	if want != timeline.Caller {
		start := sp.StartTimestamp()
		for _, s := range res.Segments {
			r.observe(stallDuration, service, float64(s.DurationUs)/1e6, aggregate.Exemplar{
				Time: start + pcommon.Timestamp(s.StartUs*1000), TraceID: sp.TraceID(), SpanID: sp.SpanID(),
			})
		}
	}
	return f
}

// winnerGaps records the gaps of a winning attempt in
// time_per_output_chunk, from the timeline derived here or, after the
// processor, read again with the shared reader. haveGaps says the span
// should have had gaps: when its timeline is gone it is reported.
func (r *Recorder) winnerGaps(service string, sp ptrace.Span, f *figures, haveGaps bool) {
	offs := f.offs
	if offs == nil {
		in := timeline.Read(sp, &r.buf)
		switch {
		case in.Form == timeline.None || in.Form == timeline.Caller:
			if haveGaps {
				r.p.NoGaps()
			}
			return
		case in.Malformed != "":
			r.p.Invalid(in.Key, ReasonAnomaly)
			return
		case !ordered(in.Chunks):
			// The processor called it derived, yet the timeline goes back:
			// the span was altered after it. No gap is trustworthy.
			r.p.Invalid(in.Key, ReasonAnomaly)
			return
		}
		offs = in.Chunks
	}
	r.gaps(service, sp, offs)
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
// never goes back: what the derivation checks, for a timeline the connector
// did not derive itself.
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
	// One call per span, not one Observe per gap: the gaps are the bulk of
	// the connector's work (docs/scale.md).
	r.series(timePerOutputChunk, service).ObserveGaps(r.store.BoundsUs(timePerOutputChunk), offs,
		sp.StartTimestamp(), aggregate.Exemplar{TraceID: sp.TraceID(), SpanID: sp.SpanID()})
}

// fromAttributes reads the processor's figures.
func (r *Recorder) fromAttributes(a pcommon.Map) figures {
	var f figures
	f.derivation, _ = r.str(a, string(semconv.Derivation))
	if f.derivation == semconv.DerivationAnomaly {
		r.p.Invalid(string(semconv.Derivation), ReasonAnomaly)
		return f
	}
	f.ttft, f.hasTTFT = r.number(a, string(semconv.TTFTMs))
	f.generation, f.hasGeneration = r.number(a, string(semconv.GenerationMs))
	f.active, f.hasAct = r.number(a, string(semconv.ActiveGenerationMs))
	f.stall, f.hasStall = r.number(a, string(semconv.StallMs))
	f.ttft /= 1000
	f.generation /= 1000
	f.active /= 1000
	f.stall /= 1000
	f.stallCount, f.hasStallCount = r.count(a, string(semconv.StallCount))
	return f
}

// fromResult converts a breakdown derived here.
func fromResult(res *breakdown.Result) figures {
	f := figures{derivation: res.Status.String()}
	var v int64
	v, f.hasTTFT = res.TTFTUs()
	f.ttft = float64(v) / 1e6
	v, f.hasGeneration = res.GenerationUs()
	f.generation = float64(v) / 1e6
	v, f.hasAct = res.ActiveGenerationUs()
	f.active = float64(v) / 1e6
	v, f.hasStall = res.StallUs()
	f.stall = float64(v) / 1e6
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
