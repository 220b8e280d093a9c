package measure

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

// figures are a span's figures, in seconds.
type figures struct {
	ttft, generation, active, stall          float64
	hasTTFT, hasGeneration, hasAct, hasStall bool
	stallCount                               int64
	hasStallCount                            bool
	// streamed says the timeline holds a content chunk: the figures that
	// exist only then (ttft, generation) are there, valid or not. A timeline
	// without one has stall figures of 0 (docs/design.md §4) but no silence
	// to judge.
	streamed bool
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

// labelAt reads slot s of the span being recorded.
func (r *Recorder) labelAt(s slot) label {
	v, ok := r.strAt(s)
	return label{key: slotKeys[s], value: v, ok: ok}
}

// label reads attribute k of a (an event's attributes).
func (r *Recorder) label(a pcommon.Map, k string) label {
	v, present := a.Get(k)
	v2, ok := r.str(k, v, present)
	return label{key: k, value: v2, ok: ok}
}

// attempt records an attempt span.
func (r *Recorder) attempt(service string, sp ptrace.Span) {
	index, okIndex := r.countAt(slotIndex)
	l := attemptLabels{
		provider: r.labelAt(slotProvider),
		model:    r.labelAt(slotModel),
		route:    r.labelAt(slotRoute),
		outcome:  r.labelAt(slotAttemptOutcome),
		trigger:  r.labelAt(slotTrigger),
	}
	chunks, okChunks := r.countAt(slotChunkCount)
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
	// A stream is an attempt that streamed: counting one without a content
	// chunk would dilute the stalled share with attempts that failed or
	// lost before their first chunk.
	if f.hasStallCount && f.streamed {
		r.add(stalls, service, f.stallCount)
		stalled := label{key: string(semconv.Stalled), value: "no", ok: true}
		if f.stallCount > 0 {
			stalled.value = "yes"
		}
		derivation := label{key: string(semconv.Derivation), value: f.derivation, ok: f.derivation != ""}
		r.labels(l.provider, l.model, l.route, l.outcome, stalled, derivation)
		r.add(streams, service, 1)
		r.labels(l.provider, l.model, l.route, l.outcome)
	}
	// Wasted: received and never given to the caller. hedgeprobe says how
	// many of an attempt's chunks the caller got (a resumed attempt is
	// cancelled, yet delivered); without that, every chunk of an attempt
	// that did not win.
	// Every attempt that did not win keeps a series, 0 or not, so a route
	// whose attempts only ever fail is still listed by the dashboard's
	// route variable.
	delivered, okDelivered := r.countAt(slotDelivered)
	if okChunks && okDelivered && delivered > chunks {
		// More delivered than received: one of the two is wrong, and the
		// delivered count is left out.
		r.p.Invalid(slotKeys[slotDelivered], ReasonOutOfRange)
		okDelivered = false
	}
	switch {
	case okChunks && okDelivered:
		if chunks > delivered || l.outcome.value != semconv.AttemptOutcomeWinner {
			r.add(wastedChunks, service, chunks-delivered)
		}
	case l.outcome.ok && l.outcome.value != semconv.AttemptOutcomeWinner && okChunks:
		r.add(wastedChunks, service, chunks)
	}
	if okIndex && index > 0 {
		r.labels(l.provider, l.model, l.route, l.trigger, l.outcome)
		r.add(hedges, service, 1)
	}
	// The pooled ITL takes the gaps of the chunks the caller was given: a
	// winner's, and those of an attempt that gave the caller every chunk it
	// received without ending as winner — a committed stream a watchdog,
	// an error or the caller's Close cut short, a stalled stream a resume
	// took over from. Leaving those out would keep the streams that went
	// wrong out of the metric. An attempt with chunks the caller never got
	// (a loser's) is left out: its gaps were not the caller's.
	// A burst has no identifiable gaps (docs/design.md §4) and an anomaly
	// none at all: neither feeds the pooled ITL.
	winner := l.outcome.ok && l.outcome.value == semconv.AttemptOutcomeWinner
	gaveAll := okChunks && okDelivered && chunks >= 2 && delivered == chunks
	if (winner || gaveAll) &&
		f.derivation != semconv.DerivationBurst && f.derivation != semconv.DerivationAnomaly {
		// A GenAI conventions metric: gen_ai.operation.name too (read only
		// here, where a metric carries it).
		r.labels(r.labelAt(slotOperation), l.provider, l.model, l.route)
		r.deliveredGaps(service, sp, &f, okChunks && chunks >= 2)
	}
}

// figures returns the figures of a span: the processor's attributes when it
// derived the span, else derived here from the span's timeline of form want
// (timeline.Caller for a call span's caller view, any attempt form
// otherwise). Stall segments of attempts are recorded on the way.
func (r *Recorder) figures(service string, sp ptrace.Span, want timeline.Form) figures {
	if v, present := r.vals.get(slotDerivation); present {
		// Only the processor's values say it derived the span; any other
		// is a producer's, reported, and the span is derived here.
		switch {
		case v.Type() != pcommon.ValueTypeStr:
			r.p.Invalid(string(semconv.Derivation), ReasonWrongType)
		case !breakdown.IsStatus(v.Str()):
			r.p.Invalid(string(semconv.Derivation), ReasonUnknown)
		default:
			f := r.fromAttributes()
			if want != timeline.Caller && (f.hasStallCount || f.hasGeneration) {
				r.stallEvents(service, sp)
			}
			return f
		}
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
		if res.SegmentsDropped > 0 {
			r.p.SegmentsDropped(res.SegmentsDropped)
		}
	}
	return f
}

// deliveredGaps records the gaps of an attempt whose chunks the caller
// was given in time_per_output_chunk: the counts the processor wrote
// (streamwatch.gap.bucket_counts), else those of the timeline — derived
// here, or read again with the shared reader after a processor that wrote
// no counts. Counted here, only those attempts' gaps are, where the
// processor counts every attempt's. haveGaps says the span should have had
// gaps: when they are gone (drop_timeline before a processor that counts
// them) it is reported.
func (r *Recorder) deliveredGaps(service string, sp ptrace.Span, f *figures, haveGaps bool) {
	var counts []uint64
	sum := f.generation
	if f.offs == nil && f.hasGeneration {
		counts = r.gapCounts()
	}
	offs := f.offs
	if counts == nil && offs == nil {
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
	if counts == nil {
		if len(offs) < 2 {
			return
		}
		counts = r.buf.ZeroGaps()
		timeline.GapBuckets.CountGaps(offs, counts)
		sum = float64(offs[len(offs)-1]-offs[0]) / 1e6
	}
	if sum > MaxSeconds {
		r.p.Invalid(Descs[timePerOutputChunk].Name, ReasonOutOfRange)
		return
	}
	// The counts go in at once, not one observation per gap; the exemplar
	// is the span's mean gap (its streamwatch.itl_mean_ms), as the
	// individual gaps are no longer at hand.
	if r.series(timePerOutputChunk, service).ObserveCounts(counts, sum,
		aggregate.Exemplar{Time: sp.EndTimestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID()}) {
		r.p.Invalid(Descs[timePerOutputChunk].Name, ReasonOutOfRange)
	}
}

// gapCounts reads streamwatch.gap.bucket_counts of the span being
// recorded; nil when it is absent or unusable (reported), so that the
// caller falls back to the timeline.
func (r *Recorder) gapCounts() []uint64 {
	v, ok := r.vals.get(slotGapCounts)
	if !ok {
		return nil
	}
	k := slotKeys[slotGapCounts]
	if v.Type() != pcommon.ValueTypeSlice {
		r.p.Invalid(k, ReasonWrongType)
		return nil
	}
	s := v.Slice()
	counts := r.buf.ZeroGaps()
	if s.Len() > len(counts) {
		r.p.Invalid(k, ReasonOutOfRange)
		return nil
	}
	var total uint64
	for i := range s.Len() {
		e := s.At(i)
		if e.Type() != pcommon.ValueTypeInt {
			r.p.Invalid(k, ReasonWrongType)
			return nil
		}
		c := e.Int()
		switch {
		case c < 0:
			r.p.Invalid(k, ReasonNegative)
			return nil
		case c > MaxCount:
			r.p.Invalid(k, ReasonOutOfRange)
			return nil
		}
		counts[i] = uint64(c)
		total += counts[i] // no wrap: a few dozen entries of at most 2⁴⁰
	}
	// The processor writes counts only for n ≥ 2 chunks: at least one gap.
	// A total of none would lose the attempt's gaps unseen; one above
	// MaxCount is a broken producer.
	if total == 0 || total > MaxCount {
		r.p.Invalid(k, ReasonOutOfRange)
		return nil
	}
	return counts
}

// labels sets the attributes of the next series: the present labels in
// order, then the extra dimensions.
func (r *Recorder) labels(ls ...label) {
	r.key.Reset()
	for _, l := range ls {
		if l.ok {
			r.key.Add(l.key, l.value)
		}
	}
	r.key.Append(&r.extra)
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

// fromAttributes reads the processor's figures.
func (r *Recorder) fromAttributes() figures {
	var f figures
	f.derivation, _ = r.strAt(slotDerivation)
	if f.derivation == semconv.DerivationAnomaly {
		r.p.Invalid(string(semconv.Derivation), ReasonAnomaly)
		return f
	}
	f.ttft, f.hasTTFT = r.numberAt(slotTTFT)
	f.generation, f.hasGeneration = r.numberAt(slotGeneration)
	f.active, f.hasAct = r.numberAt(slotActive)
	f.stall, f.hasStall = r.numberAt(slotStall)
	f.ttft /= 1000
	f.generation /= 1000
	f.active /= 1000
	f.stall /= 1000
	f.stallCount, f.hasStallCount = r.countAt(slotStallCount)
	_, ttftKey := r.vals.get(slotTTFT)
	_, generationKey := r.vals.get(slotGeneration)
	f.streamed = ttftKey || generationKey
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
	f.streamed = f.hasTTFT
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
		k := string(semconv.StallDurationMs)
		v, present := e.Attributes().Get(k)
		d, ok := r.number(k, v, present)
		if !ok {
			if !present {
				r.p.Invalid(k, ReasonMissing)
			}
			continue
		}
		r.observe(stallDuration, service, d/1000, aggregate.Exemplar{
			Time: e.Timestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID(),
		})
	}
}
