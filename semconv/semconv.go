// Package semconv names every attribute, event, metric and unit that crosses
// the wire between hedgeprobe and the streamwatch collector components.
//
// It is the single source of truth for the contract of docs/design.md §3–§5: the
// probe writes these keys, the processor reads and adds to them, the
// connector turns them into metrics, and the dashboard queries the metric
// names. Renaming a constant here is a breaking change for every stored
// trace and every dashboard.
//
// Keys that the OpenTelemetry GenAI semantic conventions already define are
// re-exported from go.opentelemetry.io/otel/semconv/v1.41.0 rather than
// retyped, so a typo cannot drift from the specification. Everything of
// ours carries the "streamwatch." prefix; no new "gen_ai.*" key is invented.
package semconv

import (
	"go.opentelemetry.io/otel/attribute"
	otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// GenAI keys reused from the OpenTelemetry semantic conventions v1.41.0.
const (
	// GenAIOperationName is the operation, such as "chat".
	GenAIOperationName = otelsemconv.GenAIOperationNameKey
	// GenAIProviderName is the upstream provider, such as "openai".
	GenAIProviderName = otelsemconv.GenAIProviderNameKey
	// GenAIRequestModel is the model the caller asked for.
	GenAIRequestModel = otelsemconv.GenAIRequestModelKey
	// GenAIRequestStream is true on every attempt span: attempts are streams.
	GenAIRequestStream = otelsemconv.GenAIRequestStreamKey
	// GenAIResponseModel is the model the upstream says answered.
	GenAIResponseModel = otelsemconv.GenAIResponseModelKey
	// GenAIUsageOutputTokens is the output token count k, when the upstream
	// reports usage.
	GenAIUsageOutputTokens = otelsemconv.GenAIUsageOutputTokensKey
	// GenAIUsageInputTokens is the input (prompt) token count, cached
	// tokens included, when the upstream reports it.
	GenAIUsageInputTokens = otelsemconv.GenAIUsageInputTokensKey
	// GenAIResponseID is the upstream's id of its response, on an attempt
	// span.
	GenAIResponseID = otelsemconv.GenAIResponseIDKey
	// GenAIResponseFinishReasons are the reasons an attempt's upstream gave
	// for ending its answer, one per choice that ended, in choice order.
	GenAIResponseFinishReasons = otelsemconv.GenAIResponseFinishReasonsKey
	// GenAIResponseTimeToFirstChunk is, on the call span, the seconds the
	// caller waited for its first content chunk; on an attempt span, the
	// seconds from the attempt's launch to its first content chunk (content:
	// not a role chunk or a keepalive, which the conventions' "first chunk"
	// would count).
	GenAIResponseTimeToFirstChunk = otelsemconv.GenAIResponseTimeToFirstChunkKey
	// ErrorType classifies a failure on any span.
	ErrorType = otelsemconv.ErrorTypeKey
	// ServerAddress and ServerPort are the upstream's host and port, on an
	// attempt span whose route names them (hedgeprobe's sse routes do,
	// from their base URL).
	ServerAddress = otelsemconv.ServerAddressKey
	ServerPort    = otelsemconv.ServerPortKey
)

// Call span: one per logical call, kind INTERNAL.
const (
	// CallSpanName is the name of the call span.
	CallSpanName = "streamwatch.call"
	// Delivery is the delivery mode: "streaming" or "buffered".
	Delivery = attribute.Key("streamwatch.delivery")
	// Attempts is the number of attempts launched for the call.
	Attempts = attribute.Key("streamwatch.attempts")
	// WinnerIndex is the attempt index that committed, absent when none did.
	WinnerIndex = attribute.Key("streamwatch.winner.index")
	// WinnerRoute is the route of the committed attempt.
	WinnerRoute = attribute.Key("streamwatch.winner.route")
	// Outcome is how the call ended; see the Outcome* values.
	Outcome = attribute.Key("streamwatch.outcome")
	// Truncated is true when content was delivered and the call then
	// ended with any outcome but ok (a timeout, an error, or the caller's
	// own cancel): the caller holds a cut-short answer.
	Truncated = attribute.Key("streamwatch.truncated")
	// HedgesThrottled counts hedges the budget or pushback refused, and
	// resumes the budget refused.
	HedgesThrottled = attribute.Key("streamwatch.hedges.throttled")
	// CallerChunkOffsetsUs is the caller's view: the arrival at the caller
	// of every content chunk delivered, as an int64 array of microseconds
	// since the call span's start. After a resume it runs on across the
	// switch of attempts, so the silence the caller lived through is the
	// gap until the continuation's first chunk. The processor derives the
	// figures of docs/design.md §4 from it onto the call span, under the
	// same keys (TTFTMs, StallMs, …) an attempt span gets from its own.
	CallerChunkOffsetsUs = attribute.Key("streamwatch.caller.chunk.offsets_us")
)

// Values of Outcome.
const (
	OutcomeOK           = "ok"
	OutcomeTTFTTimeout  = "ttft_timeout"
	OutcomeStallTimeout = "stall_timeout"
	OutcomeError        = "error"
	OutcomeCanceled     = "canceled"
)

// Values of Delivery.
const (
	DeliveryStreaming = "streaming"
	DeliveryBuffered  = "buffered"
)

// Events on the call span.
const (
	// EventHedge marks a hedge launch.
	EventHedge = "streamwatch.hedge"
	// EventHedgeThrottled marks a hedge the budget or pushback refused, a
	// resume the budget refused among them (see EventResumeReason).
	EventHedgeThrottled = "streamwatch.hedge.throttled"
	// EventCommit marks the moment an attempt won, and again the moment a
	// resume took over the answer.
	EventCommit = "streamwatch.commit"
	// EventAttemptCanceled marks a loser being cancelled.
	EventAttemptCanceled = "streamwatch.attempt.canceled"
	// EventWatchdog marks a watchdog firing.
	EventWatchdog = "streamwatch.watchdog"
	// EventResume marks the launch of a resume attempt: a continuation of
	// the delivered text on another route (docs/design.md §2 rule 10).
	EventResume = "streamwatch.resume"
	// EventResumeSkipped marks a resume that was due but not launched, or
	// launched and declined by its route (reasons refused, build);
	// EventResumeReason says why.
	EventResumeSkipped = "streamwatch.resume.skipped"
	// EventRouteEjected marks a route being ejected by this call's failing
	// attempt (docs/design.md §2 rule 11).
	EventRouteEjected = "streamwatch.route.ejected"
	// EventRouteRestored marks an ejected route restored by this call's
	// successful probe attempt.
	EventRouteRestored = "streamwatch.route.restored"
	// EventRouteSkipped marks a route this call passed over because it was
	// ejected.
	EventRouteSkipped = "streamwatch.route.skipped"

	// EventAttemptIndex is the attempt an event is about.
	EventAttemptIndex = attribute.Key("streamwatch.attempt.index")
	// EventTrigger is why a hedge was launched (an AttemptTrigger value).
	EventTrigger = attribute.Key("streamwatch.attempt.trigger")
	// EventRoute is the route an event is about.
	EventRoute = attribute.Key("streamwatch.route")
	// EventDelayMs is the hedge delay in force, in milliseconds.
	EventDelayMs = attribute.Key("streamwatch.hedge.delay_ms")
	// EventWatchdogKind is "ttft" or "stall".
	EventWatchdogKind = attribute.Key("streamwatch.watchdog.kind")
	// EventTimeoutMs is the watchdog's timeout, in milliseconds.
	EventTimeoutMs = attribute.Key("streamwatch.watchdog.timeout_ms")
	// EventThrottleReason is "budget" or "pushback".
	EventThrottleReason = attribute.Key("streamwatch.hedge.throttle_reason")
	// EventResumeReason says why a resume was skipped: "max_attempts",
	// "no_route" (no route can continue), "not_resumable" (the delivered
	// items cannot be continued, e.g. a tool call in progress), "too_long"
	// (the delivered text passed the memory bound), "refused" (the route
	// answered the continuation with a fatal error) or "build" (the
	// continuation request could not be built). A resume the hedge budget
	// refuses is a streamwatch.hedge.throttled event (EventThrottleReason
	// "budget"), not a skip.
	EventResumeReason = attribute.Key("streamwatch.resume.reason")
	// EventEjectionMs is how long a route is ejected for, in milliseconds.
	EventEjectionMs = attribute.Key("streamwatch.route.ejection_ms")
	// EventEjectionReason is "failures" (consecutive transient failures) or
	// "retry_after" (the upstream's pushback).
	EventEjectionReason = attribute.Key("streamwatch.route.ejection_reason")
)

// Attempt span: one per upstream stream, kind CLIENT, child of the call span.
const (
	// Route is the route name of the attempt.
	Route = attribute.Key("streamwatch.route")
	// AttemptIndex is 0 for the primary, 1… for hedges.
	AttemptIndex = attribute.Key("streamwatch.attempt.index")
	// AttemptTrigger is why the attempt was launched; see Trigger* values.
	AttemptTrigger = attribute.Key("streamwatch.attempt.trigger")
	// AttemptOutcome is how the attempt ended; see AttemptOutcome* values.
	AttemptOutcome = attribute.Key("streamwatch.attempt.outcome")
	// AttemptLaunchOffsetMs is milliseconds from call start to attempt
	// launch, a double (µs precision).
	AttemptLaunchOffsetMs = attribute.Key("streamwatch.attempt.launch_offset_ms")
	// ChunkCount is the number of content chunks the attempt received.
	ChunkCount = attribute.Key("streamwatch.chunk.count")
	// ChunksDelivered is the number of the attempt's content chunks the
	// caller was given: a winner's as far as the caller read (all of them
	// on a clean end), a stalled attempt's up to the resume that took
	// over, none of a loser's. ChunkCount − ChunksDelivered
	// is what the attempt wasted.
	ChunksDelivered = attribute.Key("streamwatch.chunk.delivered")
	// ResumeDeliveredChunks is, on a resume attempt, the number of content
	// chunks already delivered to the caller when it was launched: after
	// commit, the prefix it continues; 0 before commit, where it continues
	// text the caller has not been given.
	ResumeDeliveredChunks = attribute.Key("streamwatch.resume.delivered_chunks")
)

// Values of AttemptTrigger.
const (
	TriggerPrimary = "primary"
	TriggerTTFT    = "ttft"
	TriggerStall   = "stall"
	TriggerError   = "error"
	TriggerResume  = "resume"
)

// Values of AttemptOutcome.
const (
	AttemptOutcomeWinner   = "winner"
	AttemptOutcomeCanceled = "canceled"
	AttemptOutcomeFailed   = "failed"
)

// Chunk timeline: the arrival of every content chunk of an attempt.
const (
	// ChunkOffsetsUs is the compact timeline: an int64 array of microseconds
	// since the attempt span's start, one per content chunk, monotonic.
	ChunkOffsetsUs = attribute.Key("streamwatch.chunk.offsets_us")
	// KeepaliveOffsetsUs is the same for keepalives (optional, capped: the
	// first keepalives to arrive).
	KeepaliveOffsetsUs = attribute.Key("streamwatch.keepalive.offsets_us")
	// KeepalivesDropped counts keepalive offsets left out past the cap,
	// all later than the last listed.
	KeepalivesDropped = attribute.Key("streamwatch.keepalive.dropped")
	// EventChunk is the event form: one span event per content chunk,
	// timestamped at arrival.
	EventChunk = "streamwatch.chunk"
	// EventKeepalive is the event form of a keepalive arrival.
	EventKeepalive = "streamwatch.keepalive"
)

// Derived attributes, written by the streamwatch processor (docs/design.md §4).
const (
	// TTFTMs is t_0 − s.
	TTFTMs = attribute.Key("streamwatch.ttft_ms")
	// E2EMs is t_{n−1} − s: the last content chunk, not [DONE].
	E2EMs = attribute.Key("streamwatch.e2e_ms")
	// GenerationMs is t_{n−1} − t_0, raw wall time, never altered.
	GenerationMs = attribute.Key("streamwatch.generation_ms")
	// StallMs is the sum of every gap longer than the stall threshold.
	StallMs = attribute.Key("streamwatch.stall_ms")
	// StallCount is the number of stall segments (runs of stalled gaps).
	StallCount = attribute.Key("streamwatch.stall_count")
	// ActiveGenerationMs is GenerationMs − StallMs.
	ActiveGenerationMs = attribute.Key("streamwatch.active_generation_ms")
	// ITLMeanMs is GenerationMs / (n − 1): per chunk, not per token.
	ITLMeanMs = attribute.Key("streamwatch.itl_mean_ms")
	// TPOTMs is GenerationMs / (k − 1).
	TPOTMs = attribute.Key("streamwatch.tpot_ms")
	// ActiveTPS is (k − 1) / active generation seconds.
	ActiveTPS = attribute.Key("streamwatch.active_tps")
	// CallTTFTMs is launch offset + TTFT: what the caller waited.
	CallTTFTMs = attribute.Key("streamwatch.call_ttft_ms")
	// GapBucketCounts is an attempt's gaps g_i counted per bucket of
	// GenAIDurationBuckets: an int array whose entry i counts the gaps in
	// (bound[i−1], bound[i]] and whose last possible entry (index 14)
	// counts those above 81.92 s; trailing empty buckets are left out.
	// Written where ITLMeanMs is (n ≥ 2, not a burst, not an anomaly) and
	// only on attempt spans. The connector's time_per_output_chunk adds
	// these counts instead of reading the timeline again, and it keeps
	// working when the processor drops the timeline.
	GapBucketCounts = attribute.Key("streamwatch.gap.bucket_counts")
	// StallThresholdMs is the threshold T used, for audit.
	StallThresholdMs = attribute.Key("streamwatch.stall_threshold_ms")
	// Derivation is "complete", "partial", "burst" or "anomaly"; the
	// connector also puts it on MetricStreams, so the share of streams
	// whose rates cannot be measured (bursts) is one query.
	Derivation = attribute.Key("streamwatch.derivation")
	// DerivationProblem says, in words, why a derivation is not complete,
	// and what on the span was left out or may be missing (unreadable
	// context attributes, dropped attributes, ignored keepalives).
	DerivationProblem = attribute.Key("streamwatch.derivation.problem")
	// StallSegmentsDropped counts stall segments past max_segments.
	StallSegmentsDropped = attribute.Key("streamwatch.stall.segments_dropped")
)

// Values of Derivation.
const (
	DerivationComplete = "complete"
	DerivationPartial  = "partial"
	DerivationAnomaly  = "anomaly"
	// DerivationBurst: n ≥ 2 chunks whose mean gap is under 1 ms arrived
	// together (a buffering proxy, "fake streaming"); the rates are absent.
	DerivationBurst = "burst"
)

// Stall segment: one span event per silence longer than the threshold.
const (
	// EventStall is the event, timestamped at the silence's start.
	EventStall = "streamwatch.stall"
	// StallSpanName names the optional synthetic child span of a segment.
	StallSpanName = "streamwatch.stall"
	// StallDurationMs is the silence's length.
	StallDurationMs = attribute.Key("streamwatch.stall.duration_ms")
	// StallAfterChunk is the index of the last chunk before the silence.
	StallAfterChunk = attribute.Key("streamwatch.stall.after_chunk")
	// StallKeepalives counts keepalives inside the silence; absent when
	// unknown (the caller's view, unreadable keepalives, a span that
	// dropped events or attributes among which some may be, a silence
	// ending after the last listed keepalive when some were dropped).
	StallKeepalives = attribute.Key("streamwatch.stall.keepalives")
)

// Metric names and units of the streamwatch connector (docs/design.md §5).
const (
	MetricTimeToFirstChunk         = "gen_ai.client.operation.time_to_first_chunk"
	MetricTimePerOutputChunk       = "gen_ai.client.operation.time_per_output_chunk"
	MetricOperationDuration        = "gen_ai.client.operation.duration"
	MetricAttemptTimeToFirstChunk  = "streamwatch.attempt.time_to_first_chunk"
	MetricGenerationDuration       = "streamwatch.generation.duration"
	MetricActiveGenerationDuration = "streamwatch.generation.active_duration"
	MetricStallDuration            = "streamwatch.stall.duration"
	MetricStreams                  = "streamwatch.streams"
	MetricStalls                   = "streamwatch.stalls"
	MetricHedges                   = "streamwatch.hedges"
	MetricCalls                    = "streamwatch.calls"
	MetricWastedChunks             = "streamwatch.wasted_chunks"
	// MetricCallStallDuration is, per call, the total silence the caller
	// saw (from CallerChunkOffsetsUs), beside the upstreams' per-segment
	// MetricStallDuration: the pair shows what hedging and resuming saved.
	MetricCallStallDuration = "streamwatch.call.stall.duration"
	// MetricCallStalls counts the stall segments callers saw.
	MetricCallStalls = "streamwatch.call.stalls"
	// MetricRouteEjections counts route ejections (EventRouteEjected).
	MetricRouteEjections = "streamwatch.route.ejections"
	// MetricThrottledHedges counts hedges and resumes the hedge budget or
	// a route's pushback refused: the EventHedgeThrottled events, one per
	// rescue refused (a refusal repeated with no launch, content chunk
	// received or failure that calls for a rescue in between is one
	// event), at most 32 skip and throttle events a call. HedgesThrottled,
	// on the call span, counts every refusal.
	MetricThrottledHedges = "streamwatch.throttled_hedges"

	// UnitSeconds is the unit of every histogram.
	UnitSeconds = "s"
	// The units of the counters: each names what it counts, as the
	// OpenTelemetry metric conventions ask of a count ({request}, not
	// {count}). The Prometheus exporter appends nothing for a unit in
	// braces, so the names of the series do not depend on them.
	UnitStream   = "{stream}"
	UnitStall    = "{stall}"
	UnitAttempt  = "{attempt}"
	UnitCall     = "{call}"
	UnitChunk    = "{chunk}"
	UnitEjection = "{ejection}"
	UnitHedge    = "{hedge}"
)

// Metric attributes of the connector beyond the GenAI and span keys above.
const (
	// Stalled is "yes" or "no" on streamwatch.streams.
	Stalled = attribute.Key("streamwatch.stalled")
)

// GenAIDurationBuckets are the GenAI semantic-convention histogram bounds in
// seconds (0.01 doubling to 81.92).
var GenAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// StallDurationBuckets reach 10 minutes, because real mid-stream silences
// (median 55 s) outgrow the GenAI bounds.
var StallDurationBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// Series overflow of the connector.
const (
	// MetricOverflow marks, with the value true, the one series a connector
	// metric keeps for every attribute set past its series cap; the name
	// the OpenTelemetry SDKs use for their cardinality-limit overflow.
	MetricOverflow = "otel.metric.overflow"
)
