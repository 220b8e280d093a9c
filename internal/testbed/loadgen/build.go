package loadgen

import (
	"encoding/binary"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/semconv"
)

// Building the spans of a request: calls, their attempts and timelines.

// builder builds requests; not safe for concurrent use.
type builder struct {
	Shape
	rng  *rand.Rand
	base time.Time
	call int
}

func (b *builder) request() (ptrace.Traces, Counts) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", b.Service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(hedgeprobe.InstrumentationName)
	spans := ss.Spans()
	c := Counts{Requests: 1}
	for range b.CallsPerRequest {
		b.addCall(spans, &c)
	}
	return td, c
}

// attempt is what an attempt span records.
type attempt struct {
	index   int
	route   Route
	trigger string
	launch  time.Duration // since the call start
	outcome string
	offs    []int64 // content chunks, µs since the attempt start
	end     time.Duration
}

func (b *builder) addCall(spans ptrace.SpanSlice, c *Counts) {
	i := b.call
	b.call++
	start := b.base.Add(time.Duration(i) * time.Millisecond)
	primary := b.Routes[i%len(b.Routes)]
	second := b.Routes[(i+1)%len(b.Routes)]
	failed := b.rng.Float64() < b.ErrorFraction
	hedged := !failed && b.rng.Float64() < b.HedgeFraction
	stalled := !failed && b.rng.Float64() < b.StallFraction
	onStall := hedged && b.rng.IntN(2) == 0

	var atts []attempt
	switch {
	case failed:
		atts = []attempt{{route: primary, trigger: semconv.TriggerPrimary, outcome: semconv.AttemptOutcomeFailed, end: b.TTFT / 2}}
	case !hedged:
		offs := b.timeline(b.TTFT, b.Chunks, stalled)
		atts = []attempt{{route: primary, trigger: semconv.TriggerPrimary, outcome: semconv.AttemptOutcomeWinner, offs: offs}}
	case onStall:
		// The primary delivers a few chunks and falls silent; after
		// StallAfter a hedge races it and wins.
		lost := b.timeline(b.TTFT, stallHedgeAfter, false)
		launch := time.Duration(lost[len(lost)-1])*time.Microsecond + stallAfter
		win := b.timeline(b.TTFT, b.Chunks, stalled)
		commit := launch + time.Duration(win[0])*time.Microsecond
		atts = []attempt{
			{route: primary, trigger: semconv.TriggerPrimary, outcome: semconv.AttemptOutcomeCanceled, offs: lost, end: commit},
			{index: 1, route: second, trigger: semconv.TriggerStall, launch: launch, outcome: semconv.AttemptOutcomeWinner, offs: win},
		}
	default:
		// No first chunk by the hedge delay: the hedge wins the race.
		win := b.timeline(b.TTFT, b.Chunks, stalled)
		commit := hedgeLaunch + time.Duration(win[0])*time.Microsecond
		atts = []attempt{
			{route: primary, trigger: semconv.TriggerPrimary, outcome: semconv.AttemptOutcomeCanceled, end: commit},
			{index: 1, route: second, trigger: semconv.TriggerTTFT, launch: hedgeLaunch, outcome: semconv.AttemptOutcomeWinner, offs: win},
		}
	}

	traceID := b.traceID()
	callID := b.spanID()
	call := spans.AppendEmpty()
	winner := -1
	var callEnd time.Duration
	for k := range atts {
		a := &atts[k]
		a.index = k
		if a.outcome == semconv.AttemptOutcomeWinner {
			winner = k
			a.end = time.Duration(a.offs[len(a.offs)-1])*time.Microsecond + 5*time.Millisecond
		}
		callEnd = max(callEnd, a.launch+a.end)
	}
	for k := range atts {
		b.addAttempt(spans.AppendEmpty(), traceID, callID, start, &atts[k], c)
	}

	call.SetTraceID(traceID)
	call.SetSpanID(callID)
	call.SetName(semconv.CallSpanName)
	call.SetKind(ptrace.SpanKindInternal)
	call.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	call.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(callEnd + time.Millisecond)))
	a := call.Attributes()
	a.EnsureCapacity(12)
	a.PutStr(string(semconv.GenAIOperationName), operation)
	a.PutStr(string(semconv.Delivery), semconv.DeliveryStreaming)
	a.PutStr(string(semconv.GenAIRequestModel), primary.Model)
	a.PutInt(string(semconv.Attempts), int64(len(atts)))
	a.PutBool(string(semconv.Truncated), false)
	a.PutInt(string(semconv.HedgesThrottled), 0)
	evs := call.Events()
	if len(atts) > 1 {
		h := atts[1]
		ev := evs.AppendEmpty()
		ev.SetName(semconv.EventHedge)
		ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(h.launch)))
		ev.Attributes().PutInt(string(semconv.EventAttemptIndex), 1)
		ev.Attributes().PutStr(string(semconv.EventTrigger), h.trigger)
		ev.Attributes().PutStr(string(semconv.EventRoute), h.route.Name)
		ev.Attributes().PutDouble(string(semconv.EventDelayMs), float64(h.launch.Microseconds())/1000)
	}
	c.Calls++
	c.Spans += int64(1 + len(atts))
	if winner < 0 {
		a.PutStr(string(semconv.Outcome), semconv.OutcomeError)
		a.PutStr(string(semconv.ErrorType), "500")
		call.Status().SetCode(ptrace.StatusCodeError)
		call.Status().SetMessage("upstream answered 500")
		c.CallsError++
		return
	}
	w := atts[winner]
	commit := start.Add(w.launch + time.Duration(w.offs[0])*time.Microsecond)
	ev := evs.AppendEmpty()
	ev.SetName(semconv.EventCommit)
	ev.SetTimestamp(pcommon.NewTimestampFromTime(commit))
	ev.Attributes().PutInt(string(semconv.EventAttemptIndex), int64(winner))
	for k, l := range atts {
		if k != winner {
			ev := evs.AppendEmpty()
			ev.SetName(semconv.EventAttemptCanceled)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(commit))
			ev.Attributes().PutInt(string(semconv.EventAttemptIndex), int64(l.index))
		}
	}
	a.PutStr(string(semconv.Outcome), semconv.OutcomeOK)
	a.PutInt(string(semconv.WinnerIndex), int64(winner))
	a.PutStr(string(semconv.WinnerRoute), w.route.Name)
	a.PutStr(string(semconv.GenAIProviderName), w.route.Provider)
	a.PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), (w.launch + time.Duration(w.offs[0])*time.Microsecond).Seconds())
	// The caller's view: the winner's chunks as they reached the caller,
	// in µs since the call start.
	view := a.PutEmptySlice(string(semconv.CallerChunkOffsetsUs))
	view.EnsureCapacity(len(w.offs))
	for _, o := range w.offs {
		view.AppendEmpty().SetInt(w.launch.Microseconds() + o)
	}
	c.CallsOK++
}

// addAttempt writes one attempt span in the order hedgeprobe sets its
// attributes: at launch, then at its end.
func (b *builder) addAttempt(sp ptrace.Span, traceID pcommon.TraceID, parent pcommon.SpanID, callStart time.Time, at *attempt, c *Counts) {
	start := callStart.Add(at.launch)
	sp.SetTraceID(traceID)
	sp.SetSpanID(b.spanID())
	sp.SetParentSpanID(parent)
	sp.SetName(operation + " " + at.route.Model)
	sp.SetKind(ptrace.SpanKindClient)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(at.end)))
	a := sp.Attributes()
	a.EnsureCapacity(21)
	a.PutStr(string(semconv.GenAIOperationName), operation)
	a.PutBool(string(semconv.GenAIRequestStream), true)
	a.PutStr(string(semconv.Route), at.route.Name)
	a.PutInt(string(semconv.AttemptIndex), int64(at.index))
	a.PutStr(string(semconv.AttemptTrigger), at.trigger)
	a.PutDouble(string(semconv.AttemptLaunchOffsetMs), float64(at.launch.Microseconds())/1000)
	a.PutStr(string(semconv.GenAIProviderName), at.route.Provider)
	a.PutStr(string(semconv.GenAIRequestModel), at.route.Model)
	if at.route.ServerAddress != "" {
		a.PutStr(string(semconv.ServerAddress), at.route.ServerAddress)
		if at.route.ServerPort > 0 {
			a.PutInt(string(semconv.ServerPort), int64(at.route.ServerPort))
		}
	}
	a.PutStr(string(semconv.AttemptOutcome), at.outcome)
	a.PutInt(string(semconv.ChunkCount), int64(len(at.offs)))
	// What the caller got: all of the winner's chunks, none of a loser's.
	delivered := 0
	if at.outcome == semconv.AttemptOutcomeWinner {
		delivered = len(at.offs)
	}
	a.PutInt(string(semconv.ChunksDelivered), int64(delivered))
	offs := a.PutEmptySlice(string(semconv.ChunkOffsetsUs))
	offs.EnsureCapacity(len(at.offs))
	for _, o := range at.offs {
		offs.AppendEmpty().SetInt(o)
	}
	if len(at.offs) > 0 {
		a.PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), float64(at.offs[0])/1e6)
	}
	if b.KeepaliveEvery > 0 && at.end > b.KeepaliveEvery {
		ka := a.PutEmptySlice(string(semconv.KeepaliveOffsetsUs))
		for t := b.KeepaliveEvery; t < at.end; t += b.KeepaliveEvery {
			ka.AppendEmpty().SetInt(t.Microseconds())
		}
	}
	if len(at.offs) > 0 {
		a.PutInt(string(semconv.GenAIUsageOutputTokens), int64(len(at.offs)))
		a.PutStr(string(semconv.GenAIResponseModel), at.route.Model)
		a.PutStr(string(semconv.GenAIResponseID), "chatcmpl-loadgen")
		a.PutInt(string(semconv.GenAIUsageInputTokens), 1000)
	}
	if at.outcome == semconv.AttemptOutcomeWinner {
		a.PutEmptySlice(string(semconv.GenAIResponseFinishReasons)).AppendEmpty().SetStr("stop")
	}
	if at.outcome == semconv.AttemptOutcomeFailed {
		a.PutStr(string(semconv.ErrorType), "500")
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("upstream answered 500")
	}
	c.Chunks += int64(len(at.offs))
	if at.outcome == semconv.AttemptOutcomeWinner && len(at.offs) > 1 {
		c.WinnerGaps += int64(len(at.offs) - 1)
	}
	if at.index > 0 {
		c.Hedges++
	}
	for i := 1; i < len(at.offs); i++ {
		if at.offs[i]-at.offs[i-1] > (2 * time.Second).Microseconds() {
			c.Stalls++
		}
	}
}

// timeline returns n content-chunk offsets (µs since the attempt start):
// the first after ttft (±10 %), then one every ChunkGap, with one Stall
// half-way when stalled.
func (b *builder) timeline(ttft time.Duration, n int, stalled bool) []int64 {
	first := ttft.Microseconds()
	if first > 0 {
		first += b.rng.Int64N(first/5+1) - first/10
	}
	gap := b.ChunkGap.Microseconds()
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = first + int64(i)*gap
		if stalled && i >= n/2 {
			offs[i] += b.Stall.Microseconds()
		}
	}
	return offs
}

func (b *builder) traceID() pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[:8], b.rng.Uint64())
	binary.BigEndian.PutUint64(id[8:], b.rng.Uint64()|1)
	return id
}

func (b *builder) spanID() pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], b.rng.Uint64()|1)
	return id
}
