package measure

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

// call records a call span: the call metrics, the caller's view and the
// route ejections and throttled hedges reported on it.
func (r *Recorder) call(service string, sp ptrace.Span) {
	r.events(service, sp)
	outcome, ok := r.strAt(slotOutcome)
	if !ok {
		if _, present := r.vals.get(slotOutcome); !present {
			r.p.Invalid(string(semconv.Outcome), ReasonMissing)
		}
		return
	}
	model := r.labelAt(slotModel)
	// The winner's route becomes streamwatch.route, as on attempt metrics.
	route := r.labelAt(slotWinnerRoute)
	route.key = string(semconv.Route)
	// And the winner's provider, which hedgeprobe puts on the call span.
	provider := r.labelAt(slotProvider)
	out := label{key: string(semconv.Outcome), value: outcome, ok: true}
	ex := aggregate.Exemplar{Time: sp.EndTimestamp(), TraceID: sp.TraceID(), SpanID: sp.SpanID()}

	r.labels(provider, model, route, out)
	r.add(calls, service, 1)

	// The caller's view: the silence the caller lived through, beside the
	// upstreams' own (docs/design.md §5). Its stall events are not upstream
	// segments and stay out of streamwatch.stall.duration. A view without a
	// content chunk is a call the caller got nothing from: it has no
	// silence to record, as an attempt without one is no stream.
	view := r.figures(service, sp, timeline.Caller)
	if view.hasStall && view.hasStallCount && view.streamed {
		r.observe(callStallDuration, service, view.stall, ex)
		r.add(callStalls, service, view.stallCount)
	}

	// The GenAI conventions' metrics also carry gen_ai.operation.name.
	op := r.labelAt(slotOperation)
	r.labels(op, provider, model, route, out, r.errorType(outcome))
	if end, start := sp.EndTimestamp(), sp.StartTimestamp(); end >= start {
		r.observe(callDuration, service, float64(end-start)/1e9, ex)
	} else {
		r.p.Invalid(SpanDuration, ReasonNegative)
	}

	// What the caller waited: the call span's own figure, else the first
	// chunk of its caller's view (a producer that writes the view alone).
	v, ok := view.ttft, view.hasTTFT
	if _, present := r.vals.get(slotCallTTFT); present {
		v, ok = r.numberAt(slotCallTTFT)
	}
	if ok {
		r.labels(op, provider, model, route)
		r.observe(callTTFT, service, v, ex)
	}
}

// errorType is the duration's error.type, which the GenAI conventions
// require when the operation ended in an error: the call span's own (the
// provider's status code, the watchdog's kind, …), "_OTHER" when a failed
// call span has none, or one that is no code. A call that ended ok has
// none.
func (r *Recorder) errorType(outcome string) label {
	if outcome == string(semconv.OutcomeOK) {
		return label{}
	}
	// Judged as sent, before labelAt repairs or cuts it: one count for one
	// bad value, and a cut copy of text is text still.
	if v, ok := r.vals.get(slotErrorType); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" && !codeLike(v.Str()) {
		r.p.Invalid(slotKeys[slotErrorType], ReasonNotACode)
		return label{key: slotKeys[slotErrorType], value: "_OTHER", ok: true}
	}
	l := r.labelAt(slotErrorType)
	if !l.ok || l.value == "" {
		l = label{key: slotKeys[slotErrorType], value: "_OTHER", ok: true}
	}
	return l
}

// codeLike reports whether an error.type reads as a code: a status
// ("429"), a kind ("stall_timeout"), a type name ("*net.OpError",
// "openai.RateLimitError", "java.net.SocketTimeoutException") — at most
// 128 bytes of ASCII letters, digits and _ . : / * $ # @ + - [ ]. A value
// with spaces or quotes is text, and an instrumentation's text can quote
// the prompt or the answer, which no metric label may carry.
func codeLike(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_.:/*$#@+-[]", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// events counts the events of a call span that are metrics: its
// streamwatch.route.ejected events by route and reason, its
// streamwatch.hedge.throttled events by the route the hedge would have
// gone to, trigger and reason. hedgeprobe writes a throttled event when a
// rescue is refused and not again while the same refusal repeats with no
// launch, content chunk received or failure that calls for a rescue in
// between, at most 32 skip and throttle events a call (the span's
// streamwatch.hedges.throttled counts every refusal), so the counter
// reads "rescues refused". An event without a route is skipped
// and reported.
func (r *Recorder) events(service string, sp ptrace.Span) {
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		name := e.Name()
		if name != semconv.EventRouteEjected && name != semconv.EventHedgeThrottled {
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
		if name == semconv.EventRouteEjected {
			r.labels(route, r.label(ea, string(semconv.EventEjectionReason)))
			r.add(routeEjections, service, 1)
			continue
		}
		r.labels(route, r.label(ea, string(semconv.EventTrigger)), r.label(ea, string(semconv.EventThrottleReason)))
		r.add(throttledHedges, service, 1)
	}
}
