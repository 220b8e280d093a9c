package measure

import (
	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/semconv"
)

// Indices of the metrics in Descs.
const (
	callTTFT = iota
	timePerOutputChunk
	callDuration
	attemptTTFT
	generation
	activeGeneration
	stallDuration
	streams
	stalls
	hedges
	calls
	wastedChunks
	callStallDuration
	callStalls
	routeEjections
	throttledHedges
)

// Descs are the metrics of docs/design.md §5, in the order the connector emits them.
var Descs = []aggregate.Desc{
	callTTFT: {
		Name: semconv.MetricTimeToFirstChunk, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.GenAIDurationBuckets,
		Description: "Time from the start of a call to its first content chunk, as the caller saw it.",
	},
	timePerOutputChunk: {
		Name: semconv.MetricTimePerOutputChunk, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.GenAIDurationBuckets,
		Description: "Each gap between two consecutive content chunks an attempt gave the caller: a winner's, or one's that gave the caller every chunk it received (pooled inter-chunk latency).",
	},
	callDuration: {
		Name: semconv.MetricOperationDuration, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.GenAIDurationBuckets,
		Description: "Duration of a call, from its start to its end, whatever the outcome.",
	},
	attemptTTFT: {
		Name: semconv.MetricAttemptTimeToFirstChunk, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.GenAIDurationBuckets,
		Description: "Time from the launch of an attempt to its first content chunk, per route.",
	},
	generation: {
		Name: semconv.MetricGenerationDuration, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.GenAIDurationBuckets,
		Description: "Raw generation time of an attempt: first to last content chunk, silences included.",
	},
	activeGeneration: {
		Name: semconv.MetricActiveGenerationDuration, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.GenAIDurationBuckets,
		Description: "Active generation time of an attempt: raw generation time minus its stalls.",
	},
	stallDuration: {
		Name: semconv.MetricStallDuration, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.StallDurationBuckets,
		Description: "Duration of each stall segment (a silence longer than the stall threshold).",
	},
	streams: {
		Name: semconv.MetricStreams, Unit: semconv.UnitStream, Kind: aggregate.Sum,
		Description: "Attempts that streamed at least one content chunk, by whether they stalled and by derivation (burst: rates not measurable).",
	},
	stalls: {
		Name: semconv.MetricStalls, Unit: semconv.UnitStall, Kind: aggregate.Sum,
		Description: "Stall segments of attempts.",
	},
	hedges: {
		Name: semconv.MetricHedges, Unit: semconv.UnitAttempt, Kind: aggregate.Sum,
		Description: "Hedge and resume attempts (attempt index above 0), by trigger and outcome.",
	},
	calls: {
		Name: semconv.MetricCalls, Unit: semconv.UnitCall, Kind: aggregate.Sum,
		Description: "Calls, by outcome.",
	},
	wastedChunks: {
		Name: semconv.MetricWastedChunks, Unit: semconv.UnitChunk, Kind: aggregate.Sum,
		Description: "Content chunks received by attempts and never given to the caller (streamwatch.chunk.count − streamwatch.chunk.delivered; where the latter is absent, every chunk of an attempt that did not win).",
	},
	callStallDuration: {
		Name: semconv.MetricCallStallDuration, Unit: semconv.UnitSeconds, Kind: aggregate.Histogram,
		Bounds:      semconv.StallDurationBuckets,
		Description: "Per call, the total silence the caller saw between its content chunks (0 when none), from the caller's view.",
	},
	callStalls: {
		Name: semconv.MetricCallStalls, Unit: semconv.UnitStall, Kind: aggregate.Sum,
		Description: "Stall segments the callers saw, from the caller's view.",
	},
	routeEjections: {
		Name: semconv.MetricRouteEjections, Unit: semconv.UnitEjection, Kind: aggregate.Sum,
		Description: "Route ejections reported on call spans, by route and reason.",
	},
	throttledHedges: {
		Name: semconv.MetricThrottledHedges, Unit: semconv.UnitHedge, Kind: aggregate.Sum,
		Description: "Hedges and resumes the hedge budget or a route's pushback refused, by the route asked, trigger and reason: the call spans' streamwatch.hedge.throttled events, one per rescue refused (a refusal repeated with no launch, content chunk received or failure that calls for a rescue in between is one), at most 32 skip and throttle events a call. The call span's streamwatch.hedges.throttled counts every refusal.",
	},
}
