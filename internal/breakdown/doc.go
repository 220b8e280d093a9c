// Package breakdown turns the chunk timeline of one stream into the figures
// of docs/design.md §4: TTFT, end-to-end and raw generation time, the stall segments
// and their sum and count, active ("net") generation time, mean inter-chunk
// latency, TPOT and active tokens per second — or, for a burst (chunks
// that arrived together), no rate at all.
//
// It is the one implementation of that math; the streamwatch processor and
// connector both call it, through the one reader internal/timeline, so a
// figure on a span and the metric built from it can never disagree. Everything here is a pure function over caller-owned
// slices: no allocation, no clock, no state.
//
// The canonical use:
//
//	segs := make([]breakdown.Segment, 0, 64)
//	r := breakdown.Derive(breakdown.Timeline{
//		ChunkOffsetsUs: offsets,      // µs since span start, one per content chunk
//		KeepaliveOffsetsUs: keepalives,
//		OutputTokens: k,              // 0 when unknown
//		ThresholdUs: 2_000_000,
//	}, segs)
//	if v, ok := r.ActiveGenerationUs(); ok { … }
package breakdown
