package hedgeprobe

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/semconv"
)

// attemptRecorder records one attempt on its own span: the compact
// timeline in microseconds since the span's start, which is the attempt's
// launch time taken here with the monotonic clock, so every offset is an
// exact monotonic difference.
type attemptRecorder struct {
	t         *tracing
	span      trace.Span
	start     time.Time
	offsets   []int64
	kaOffsets []int64
	kaDropped int
	model     string // gen_ai.response.model, once known
	tokens    int64  // gen_ai.usage.output_tokens, when hasTokens
	hasTokens bool
	id        string // gen_ai.response.id, once known
	inTokens  int64  // gen_ai.usage.input_tokens, when hasIn
	hasIn     bool
	finish    []string // gen_ai.response.finish_reasons by choice, "" until it ends
	onFinish  func(choice int, reason string)
}

// maxChoices bounds the choices whose finish reasons an attempt span
// keeps: OpenAI allows 128 per request.
const maxChoices = 128

// finished records that choice ended for reason; a later reason for the
// same choice replaces it.
func (a *attemptRecorder) finished(choice int, reason string) {
	if choice < 0 || choice >= maxChoices || reason == "" {
		return
	}
	if choice >= len(a.finish) {
		a.finish = append(a.finish, make([]string, choice+1-len(a.finish))...)
	}
	a.finish[choice] = reason
}

func (r *callRecorder) attempt(ctx context.Context, idx int, route *routeNames, trig Trigger, offset time.Duration, delivered int64, at time.Time) (context.Context, *attemptRecorder) {
	attrs := make([]attribute.KeyValue, 0, 11)
	attrs = append(attrs,
		r.t.opAttr,
		semconv.GenAIRequestStream.Bool(true),
		semconv.Route.String(route.name),
		semconv.AttemptIndex.Int(idx),
		semconv.AttemptTrigger.String(string(trig)),
		semconv.AttemptLaunchOffsetMs.Float64(float64(offset.Microseconds())/1000))
	// A route without a provider or a model has none to report: an empty
	// string would be a value, and a series of its own where metrics are
	// pushed.
	if route.provider != "" {
		attrs = append(attrs, semconv.GenAIProviderName.String(route.provider))
	}
	name := r.t.operation
	if route.model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel.String(route.model))
		name += " " + route.model
	}
	if route.server != "" {
		attrs = append(attrs, semconv.ServerAddress.String(route.server))
		if route.port > 0 {
			attrs = append(attrs, semconv.ServerPort.Int(route.port))
		}
	}
	if trig == TriggerResume {
		attrs = append(attrs, semconv.ResumeDeliveredChunks.Int64(delivered))
	}
	// On the call's clock, so the span's times match its offsets; the
	// monotonic reading stays at's, so the offsets stay exact.
	at = r.onCallClock(at)
	ctx, span := r.t.tracer.Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(at),
		trace.WithAttributes(attrs...))
	a := &attemptRecorder{t: r.t, span: span, start: at, offsets: getOffsets()}
	r.attempts = append(r.attempts, a)
	return ctx, a
}

// delivered records the delivery of a content chunk to the caller at at.
func (r *callRecorder) delivered(at time.Time) {
	r.delivery = appendOffset(r.delivery, at.Sub(r.start).Microseconds())
	r.forget() // a new silence reports its skips anew
}

// offsetPool recycles timeline buffers: SetAttributes copies the offsets
// into the attribute, so once an attempt span has ended its buffer is
// free, and a steady stream of calls allocates only that copy, 8 B per
// chunk, instead of growing a buffer per call.
var offsetPool sync.Pool

// maxPooledOffsets bounds the buffers kept (1 MiB each at most).
const maxPooledOffsets = 1 << 17

func getOffsets() []int64 {
	if p, ok := offsetPool.Get().(*[]int64); ok {
		return (*p)[:0]
	}
	return make([]int64, 0, 64)
}

func putOffsets(b []int64) {
	if cap(b) == 0 || cap(b) > maxPooledOffsets {
		return
	}
	offsetPool.Put(&b)
}

// appendOffset appends v to b, doubling by hand when b is full: append
// grows large slices by 1.25×, which costs about 40 B per chunk in copies;
// doubling costs at most 16.
func appendOffset(b []int64, v int64) []int64 {
	if len(b) == cap(b) {
		grown := make([]int64, len(b), max(2*cap(b), 64))
		copy(grown, b)
		b = grown
	}
	return append(b, v)
}

// onSpanClock returns at on the span's clock, as callRecorder.onCallClock
// does for the call span.
func (a *attemptRecorder) onSpanClock(at time.Time) time.Time { return a.start.Add(at.Sub(a.start)) }

// content records a content chunk that arrived at at.
func (a *attemptRecorder) content(at time.Time) {
	a.offsets = appendOffset(a.offsets, at.Sub(a.start).Microseconds())
	if a.t.chunkEvents {
		a.span.AddEvent(semconv.EventChunk, trace.WithTimestamp(a.onSpanClock(at)))
	}
}

// keepalive records a keepalive that arrived at at, up to the cap.
func (a *attemptRecorder) keepalive(at time.Time) {
	if len(a.kaOffsets) < a.t.kaCap {
		if a.kaOffsets == nil {
			a.kaOffsets = getOffsets()
		}
		a.kaOffsets = append(a.kaOffsets, at.Sub(a.start).Microseconds())
	} else {
		a.kaDropped++
	}
	if a.t.chunkEvents {
		a.span.AddEvent(semconv.EventKeepalive, trace.WithTimestamp(a.onSpanClock(at)))
	}
}

// end ends the attempt span; the token count is the attempt's, set by the
// race as usage items arrive.
func (a *attemptRecorder) end(o AttemptOutcome, err error, chunks, delivered int64, at time.Time) {
	attrs := make([]attribute.KeyValue, 0, 13)
	attrs = append(attrs,
		semconv.AttemptOutcome.String(string(o)),
		semconv.ChunkCount.Int64(chunks),
		semconv.ChunksDelivered.Int64(delivered),
		semconv.ChunkOffsetsUs.Int64Slice(a.offsets))
	if len(a.offsets) > 0 {
		// The attempt's own wait, from its request: the conventions' figure
		// on the client span. The call span's is what the caller waited.
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk.Float64(float64(a.offsets[0])/1e6))
	}
	if len(a.kaOffsets) > 0 {
		attrs = append(attrs, semconv.KeepaliveOffsetsUs.Int64Slice(a.kaOffsets))
	}
	if a.kaDropped > 0 {
		attrs = append(attrs, semconv.KeepalivesDropped.Int(a.kaDropped))
	}
	if a.hasTokens {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens.Int64(a.tokens))
	}
	if a.model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel.String(validUTF8(a.model)))
	}
	if a.id != "" {
		attrs = append(attrs, semconv.GenAIResponseID.String(validUTF8(a.id)))
	}
	if a.hasIn {
		attrs = append(attrs, semconv.GenAIUsageInputTokens.Int64(a.inTokens))
	}
	if len(a.finish) > 0 {
		// In choice order, the choices that did not end left out.
		reasons := a.finish[:0]
		for _, r := range a.finish {
			if r != "" {
				reasons = append(reasons, validUTF8(r))
			}
		}
		attrs = append(attrs, semconv.GenAIResponseFinishReasons.StringSlice(reasons))
	}
	if o == AttemptFailed {
		attrs = append(attrs, semconv.ErrorType.String(errorType(err)))
		desc := "failed"
		if err != nil {
			desc = statusText(err)
		}
		a.span.SetStatus(codes.Error, desc)
	}
	a.span.SetAttributes(attrs...)
	a.span.End(trace.WithTimestamp(a.onSpanClock(at)))
	putOffsets(a.offsets)
	putOffsets(a.kaOffsets)
	a.offsets, a.kaOffsets = nil, nil
}
