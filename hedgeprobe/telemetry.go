package hedgeprobe

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/semconv"
)

// InstrumentationName is the name of hedgeprobe's tracer.
const InstrumentationName = "github.com/streamwatch/streamwatch/hedgeprobe"

// DefaultKeepaliveOffsets is the default cap of keepalive offsets kept per
// attempt span.
const DefaultKeepaliveOffsets = 1000

// WithTracerProvider sets the TracerProvider of the call and attempt
// spans. The default, and what a nil tp means, is the global one
// (otel.GetTracerProvider) at New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// WithOperationName sets gen_ai.operation.name, which also names attempt
// spans ("{operation} {model}"). Default "chat", which an empty name
// means too. New fails on a name that is not UTF-8.
func WithOperationName(name string) Option {
	return func(o *options) { o.operation = name }
}

// WithChunkEvents also records one streamwatch.chunk span event per content
// chunk (and streamwatch.keepalive per keepalive), timestamped at arrival,
// beside the compact timeline. For debugging short streams: an SDK keeps
// 128 events per span by default and drops the oldest, and an event costs
// about a microsecond.
func WithChunkEvents(on bool) Option {
	return func(o *options) { o.chunkEvents = on }
}

// WithKeepaliveOffsets caps streamwatch.keepalive.offsets_us at n entries
// per attempt span; later keepalives are counted in
// streamwatch.keepalive.dropped. 0 (or a negative n) records no keepalive
// offsets. Default DefaultKeepaliveOffsets.
func WithKeepaliveOffsets(n int) Option {
	return func(o *options) { o.keepaliveCap, o.keepaliveCapSet = max(n, 0), true }
}

// Neither prompt nor completion text is ever recorded: hedgeprobe looks
// inside an item only through Items, records only the kinds, counts and
// model names they return, and keeps the text of Items.Text in memory for
// a resume only, never on a span.

type traceOptions struct {
	tp              trace.TracerProvider
	operation       string
	chunkEvents     bool
	keepaliveCap    int
	keepaliveCapSet bool
}

// tracing creates the spans of a Prober's calls.
type tracing struct {
	tracer      trace.Tracer
	operation   string
	opAttr      attribute.KeyValue
	chunkEvents bool
	kaCap       int
}

func newTracing(o traceOptions) *tracing {
	tp := o.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &tracing{
		tracer:      tp.Tracer(InstrumentationName, trace.WithSchemaURL(otelsemconv.SchemaURL)),
		operation:   o.operation,
		chunkEvents: o.chunkEvents,
		kaCap:       DefaultKeepaliveOffsets,
	}
	if t.operation == "" {
		t.operation = "chat"
	}
	if o.keepaliveCapSet {
		t.kaCap = o.keepaliveCap
	}
	t.opAttr = semconv.GenAIOperationName.String(t.operation)
	return t
}

// callRecorder records one call on its span. It is nil when the call span
// is not recording: then nothing is recorded and nothing allocated per
// chunk. Only the goroutine driving the Stream uses it.
type callRecorder struct {
	t        *tracing
	span     trace.Span
	start    time.Time
	attempts []*attemptRecorder // by attempt index
	// delivery is the caller's view: the arrival at the caller of every
	// content chunk delivered, in µs since the call span's start.
	delivery []int64
	// noted are the resume skips and throttles put on the span since the
	// latest launch (hedge or resume), content chunk received or failure
	// that calls for a rescue: a repeat of one — the same attempt index,
	// trigger or skip and reason, and a skip's route — is not added again
	// (forget clears them). A silence that lasts repeats them (a resume is
	// due again every ResumeAfter, a hedge pushed back at the pushback's
	// end), and an SDK keeps only the newest 128 events of a span: the
	// repeats would push out the hedges, commits and ejections that the
	// connector counts. So a throttle event is one rescue refused, however
	// often, in one silence; the connector counts those. A throttle's
	// route is not part of it: a budget refusal names the route the
	// rotation points at, which other calls' refusals and ejections move
	// during one silence. A set, not the latest alone: refusals that
	// alternate are one event each, whatever their order.
	noted []notedEvent
	// notedEvents counts the skip and throttle events written; past
	// maxNotedEvents none is (see there).
	notedEvents int
}

// maxNotedEvents bounds the resume skip and throttle events of one call
// span. A stream that pauses past StallAfter (Buffered, HoldChunks) or
// ResumeAfter between most of its chunks, with the budget spent, is
// refused a rescue at every pause: one event each would push the call's
// first events — its hedges, commit, ejections, which the connector
// counts — out of the SDK's 128. Past the bound the call span's
// streamwatch.hedges.throttled still counts every refusal, and the hooks
// see every one.
const maxNotedEvents = 32

// notedEvent is the identity of a resume skip or throttle event.
type notedEvent struct {
	skip    bool
	attempt int
	trigger Trigger
	route   string
	reason  string
}

// news reports whether e is to be written: not noted since the latest
// forget (it is noted now), and within maxNotedEvents.
func (r *callRecorder) news(e notedEvent) bool {
	if slices.Contains(r.noted, e) {
		return false
	}
	r.noted = append(r.noted, e)
	if r.notedEvents >= maxNotedEvents {
		return false
	}
	r.notedEvents++
	return true
}

// onCallClock returns at on the call span's clock: the call's start, wall
// time, plus the monotonic time since. Every time the spans carry goes
// through it. The offsets are monotonic (at.Sub(start)) and the spans'
// times are exported as wall-clock; a wall clock stepped during a call
// (NTP, a VM resumed) would otherwise put a span's end and events off its
// own timeline, by as much as the step. (The OpenTelemetry SDK ends a
// span so when it is given no time.)
func (r *callRecorder) onCallClock(at time.Time) time.Time { return r.start.Add(at.Sub(r.start)) }

// forget ends a run of repeats: after a launch, a content chunk received or
// a failure that calls for a rescue, a skip or throttle is news again.
func (r *callRecorder) forget() { r.noted = r.noted[:0] }

var _ observer = (*callRecorder)(nil)

// startCall starts the call span at start and returns the context the
// attempts derive from (it carries the span even when it is not
// recording, so the trace context still propagates upstream).
func (t *tracing) startCall(ctx context.Context, start time.Time, model string, d Delivery) (context.Context, *callRecorder) {
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, t.opAttr, semconv.Delivery.String(d.String()))
	if model != "" { // as on the attempt spans
		attrs = append(attrs, semconv.GenAIRequestModel.String(model))
	}
	ctx, span := t.tracer.Start(ctx, semconv.CallSpanName,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		return ctx, nil
	}
	return ctx, &callRecorder{t: t, span: span, start: start, delivery: getOffsets()}
}

// routeNames are the strings of a Route, and its port, without its type
// parameter.
type routeNames struct {
	name, provider, model, server string
	port                          int
}

func (r *callRecorder) hedge(e HedgeEvent) {
	r.forget()
	r.span.AddEvent(semconv.EventHedge, trace.WithTimestamp(r.start.Add(e.Elapsed)), trace.WithAttributes(
		semconv.EventAttemptIndex.Int(e.Attempt), semconv.EventTrigger.String(string(e.Trigger)),
		semconv.EventRoute.String(e.Route), semconv.EventDelayMs.Float64(ms(e.Delay))))
}

func (r *callRecorder) throttle(e ThrottleEvent) {
	if !r.news(notedEvent{attempt: e.Attempt, trigger: e.Trigger, reason: string(e.Reason)}) {
		return // counted all the same, in streamwatch.hedges.throttled
	}
	r.span.AddEvent(semconv.EventHedgeThrottled, trace.WithTimestamp(r.start.Add(e.Elapsed)), trace.WithAttributes(
		semconv.EventAttemptIndex.Int(e.Attempt), semconv.EventTrigger.String(string(e.Trigger)),
		semconv.EventRoute.String(e.Route), semconv.EventThrottleReason.String(string(e.Reason))))
}

func (r *callRecorder) commit(e CommitEvent) {
	r.span.AddEvent(semconv.EventCommit, trace.WithTimestamp(r.start.Add(e.Elapsed)),
		trace.WithAttributes(semconv.EventAttemptIndex.Int(e.Attempt)))
}

func (r *callRecorder) canceled(idx int, at time.Time) {
	r.span.AddEvent(semconv.EventAttemptCanceled, trace.WithTimestamp(r.onCallClock(at)), trace.WithAttributes(semconv.EventAttemptIndex.Int(idx)))
}

func (r *callRecorder) watchdog(e WatchdogEvent, at time.Time) {
	r.span.AddEvent(semconv.EventWatchdog, trace.WithTimestamp(r.onCallClock(at)), trace.WithAttributes(
		semconv.EventWatchdogKind.String(string(e.Kind)), semconv.EventTimeoutMs.Float64(ms(e.Timeout)),
		semconv.EventAttemptIndex.Int(e.Attempt)))
}

func (r *callRecorder) resume(e ResumeEvent) {
	at := trace.WithTimestamp(r.start.Add(e.Elapsed))
	if e.Skipped != "" {
		if !r.news(notedEvent{skip: true, attempt: e.Attempt, route: e.Route, reason: string(e.Skipped)}) {
			return
		}
		attrs := []attribute.KeyValue{semconv.EventAttemptIndex.Int(e.Attempt),
			semconv.EventResumeReason.String(string(e.Skipped))}
		// A resume skipped before a route was chosen (no_route,
		// max_attempts, not_resumable, too_long) has none: an empty
		// route would read as a route named "".
		if e.Route != "" {
			attrs = append(attrs, semconv.EventRoute.String(e.Route))
		}
		r.span.AddEvent(semconv.EventResumeSkipped, at, trace.WithAttributes(attrs...))
		return
	}
	r.forget()
	r.span.AddEvent(semconv.EventResume, at, trace.WithAttributes(
		semconv.EventAttemptIndex.Int(e.Attempt), semconv.EventRoute.String(e.Route),
		semconv.ResumeDeliveredChunks.Int64(e.DeliveredChunks)))
}

func (r *callRecorder) eject(e RouteEvent, at time.Time) {
	r.span.AddEvent(semconv.EventRouteEjected, trace.WithTimestamp(r.onCallClock(at)), trace.WithAttributes(
		semconv.EventRoute.String(e.Route), semconv.EventEjectionMs.Float64(ms(e.For)),
		semconv.EventEjectionReason.String(string(e.Reason))))
}

func (r *callRecorder) restore(e RouteEvent, at time.Time) {
	r.span.AddEvent(semconv.EventRouteRestored, trace.WithTimestamp(r.onCallClock(at)), trace.WithAttributes(semconv.EventRoute.String(e.Route)))
}

func (r *callRecorder) routeSkipped(route string, at time.Time) {
	r.span.AddEvent(semconv.EventRouteSkipped, trace.WithTimestamp(r.onCallClock(at)), trace.WithAttributes(semconv.EventRoute.String(route)))
}

// attemptDone ends the attempt's span.
func (r *callRecorder) attemptDone(e AttemptEvent, at time.Time) {
	if e.Index < len(r.attempts) {
		r.attempts[e.Index].end(e.Outcome, e.Err, e.ContentChunks, e.ChunksDelivered, at)
	}
}

// end ends the call span with the call's figures.
func (r *callRecorder) end(st Stats, err error, at time.Time) {
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		semconv.Attempts.Int(len(st.Attempts)),
		semconv.Outcome.String(string(st.Outcome)),
		semconv.Truncated.Bool(st.Truncated()),
		semconv.HedgesThrottled.Int(st.HedgesThrottled))
	if st.Winner >= 0 {
		attrs = append(attrs, semconv.WinnerIndex.Int(st.Winner), semconv.WinnerRoute.String(st.WinnerRoute))
		// The winner's provider is the call's: the connector labels the
		// call metrics with it (docs/design.md §5). As on an attempt span,
		// a route without one reports none.
		if p := st.Attempts[st.Winner].Provider; p != "" {
			attrs = append(attrs, semconv.GenAIProviderName.String(p))
		}
	}
	if st.ChunksDelivered > 0 {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk.Float64(st.TimeToFirstChunk.Seconds()),
			semconv.CallerChunkOffsetsUs.Int64Slice(r.delivery))
	}
	if st.Outcome != OutcomeOK {
		et := errorType(err)
		if err == nil || st.Outcome == OutcomeCanceled && et == "canceled" {
			et = string(st.Outcome)
		}
		attrs = append(attrs, semconv.ErrorType.String(et))
		desc := string(st.Outcome)
		if err != nil {
			desc = statusText(err)
		}
		r.span.SetStatus(codes.Error, desc)
	}
	r.span.SetAttributes(attrs...)
	r.span.End(trace.WithTimestamp(r.onCallClock(at)))
	putOffsets(r.delivery)
	r.delivery = nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
