package breakdown

// Timeline is the input of Derive: the arrivals of one stream's content
// chunks and keepalives, relative to the start of the span that carries them.
type Timeline struct {
	// ChunkOffsetsUs holds one arrival per content chunk, in microseconds
	// since span start, in arrival order. The slice is only read.
	ChunkOffsetsUs []int64
	// KeepaliveOffsetsUs holds keepalive arrivals the same way. It only
	// feeds the keepalive count of each stall segment; keepalives never end
	// a silence. Optional.
	KeepaliveOffsetsUs []int64
	// OutputTokens is k, the output token count the upstream reported, or
	// 0 when it is unknown.
	OutputTokens int64
	// ExpectedChunks is the content-chunk count the producer says it
	// received (streamwatch.chunk.count), or a negative number when it is
	// not known. A timeline shorter than this makes the result partial.
	ExpectedChunks int64
	// EventsDropped reports that the producer dropped span events, so an
	// event-form timeline may have lost chunks: the result is partial.
	EventsDropped bool
	// ThresholdUs is T: a gap longer than this (strictly) is a stall.
	ThresholdUs int64
	// LaunchOffsetUs is the attempt's launch offset from the call start,
	// valid when HasLaunchOffset; it turns TTFT into the caller's TTFT.
	LaunchOffsetUs  int64
	HasLaunchOffset bool
}

// Segment is one attributed silence: a maximal run of consecutive gaps that
// each exceed the threshold.
type Segment struct {
	// StartUs is when the silence began (the arrival of chunk AfterChunk),
	// in microseconds since span start.
	StartUs int64
	// DurationUs is the sum of the run's gaps.
	DurationUs int64
	// AfterChunk is the index of the last content chunk before the silence.
	AfterChunk int
	// Keepalives counts keepalives that arrived strictly inside the silence:
	// the upstream was alive but not producing. -1: unknown (set by the
	// reader when the span's keepalives could not be read, on the caller's
	// view, which has none, and past the last listed keepalive when the
	// producer dropped some).
	Keepalives int
}

// Status says how far the figures of a Result can be trusted.
type Status uint8

const (
	// Complete: the whole timeline was present and consistent.
	Complete Status = iota
	// Partial: the timeline is shorter than the producer's chunk count, or
	// events were dropped; figures describe what is present.
	Partial
	// Anomaly: a negative gap or a first chunk before the span start; every
	// timeline figure is absent.
	Anomaly
	// Burst: n ≥ 2 chunks whose mean gap is under BurstGapUs arrived
	// together (a buffering proxy, a gateway's "fake streaming"), so the
	// rates are not identifiable: ITL, TPOT and active TPS are absent, every
	// other figure is kept. It wins over Partial; Problem then still names
	// the partial timeline.
	Burst
)

// BurstGapUs is the mean gap under which a timeline is a burst: 1 ms
// (docs/design.md §4). No token stream a person reads is produced faster
// than a thousand chunks a second; a mean gap below that says the chunks
// were held back and released together, which is what pi-tps refuses to
// turn into a rate.
const BurstGapUs = 1000

// String returns the wire value of the status (semconv.Derivation*).
func (s Status) String() string {
	switch s {
	case Complete:
		return "complete"
	case Partial:
		return "partial"
	case Burst:
		return "burst"
	default:
		return "anomaly"
	}
}

// IsStatus reports whether s is the wire value of a Status: a span whose
// streamwatch.derivation holds one was derived by the processor. Any other
// value is a producer's, and says nothing about the span's figures.
func IsStatus(s string) bool {
	for _, st := range []Status{Complete, Partial, Burst, Anomaly} {
		if st.String() == s {
			return true
		}
	}
	return false
}

// Problem says why a derivation is not complete.
type Problem uint8

const (
	// NoProblem accompanies Complete.
	NoProblem Problem = iota
	// ProblemShortTimeline: fewer offsets than ExpectedChunks.
	ProblemShortTimeline
	// ProblemEventsDropped: the producer dropped span events.
	ProblemEventsDropped
	// ProblemNegativeGap: an arrival earlier than the one before it.
	ProblemNegativeGap
	// ProblemBeforeStart: the first chunk arrived before the span started.
	ProblemBeforeStart
	// ProblemBurst: the chunks arrived together (Status Burst).
	ProblemBurst
)

// String describes the problem in a few words for the span attribute.
func (p Problem) String() string {
	switch p {
	case ProblemShortTimeline:
		return "timeline shorter than streamwatch.chunk.count"
	case ProblemEventsDropped:
		return "span dropped events"
	case ProblemNegativeGap:
		return "chunk arrival earlier than the one before it"
	case ProblemBeforeStart:
		return "first chunk before span start"
	case ProblemBurst:
		return "chunks arrived together (mean gap under 1 ms): rates not identifiable"
	default:
		return ""
	}
}

// Result holds the figures of one timeline. Figures that docs/design.md §4 declares
// absent for the input are reported absent by their accessor (ok == false),
// never as zero.
type Result struct {
	// Status and Problem classify the derivation.
	Status  Status
	Problem Problem
	// Chunks is n, the number of content chunks in the timeline.
	Chunks int
	// StallCount is the number of stall segments, including any that did
	// not fit the caller's segment buffer.
	StallCount int
	// SegmentsDropped counts segments that did not fit the buffer.
	SegmentsDropped int
	// Segments is the caller's buffer, filled with the first stall segments
	// (at most its capacity).
	Segments []Segment

	ttftUs, e2eUs, generationUs, stallUs int64
	outputTokens                         int64
	launchOffsetUs                       int64
	hasLaunchOffset                      bool
}

// timeline reports whether the timeline figures exist at all.
func (r *Result) timeline() bool { return r.Status != Anomaly && r.Chunks > 0 }

// rates reports whether the per-chunk and per-token rates exist: n ≥ 2 and
// not a burst.
func (r *Result) rates() bool { return r.timeline() && r.Chunks >= 2 && r.Status != Burst }

// Incomplete reports whether the timeline was shorter than the producer
// says (ProblemShortTimeline, ProblemEventsDropped), whatever the status.
func (r *Result) Incomplete() bool {
	return r.Problem == ProblemShortTimeline || r.Problem == ProblemEventsDropped
}

// TTFTUs is t_0 − s; absent when n = 0 or on anomaly.
func (r *Result) TTFTUs() (int64, bool) { return r.ttftUs, r.timeline() }

// E2EUs is t_{n−1} − s; absent when n = 0 or on anomaly.
func (r *Result) E2EUs() (int64, bool) { return r.e2eUs, r.timeline() }

// GenerationUs is t_{n−1} − t_0, the raw wall time; absent when n = 0 or
// on anomaly.
func (r *Result) GenerationUs() (int64, bool) { return r.generationUs, r.timeline() }

// StallUs is the sum of every gap longer than the threshold; 0 when n < 2
// (n = 0 included: a timeline without content has no silence to count),
// absent only on anomaly.
func (r *Result) StallUs() (int64, bool) { return r.stallUs, r.Status != Anomaly }

// StallSegments is the stall count; 0 when n < 2, absent only on anomaly.
func (r *Result) StallSegments() (int, bool) { return r.StallCount, r.Status != Anomaly }

// ActiveGenerationUs is generation − stall (the sum of gaps ≤ T); absent
// when n < 2 or on anomaly.
func (r *Result) ActiveGenerationUs() (int64, bool) {
	return r.generationUs - r.stallUs, r.timeline() && r.Chunks >= 2
}

// ITLMeanUs is generation / (n − 1), per chunk (a chunk is not a token);
// absent when n < 2, on anomaly and on burst.
func (r *Result) ITLMeanUs() (float64, bool) {
	if !r.rates() {
		return 0, false
	}
	return float64(r.generationUs) / float64(r.Chunks-1), true
}

// TPOTUs is generation / (k − 1); absent when k is unknown, k < 2, n < 2,
// on anomaly and on burst.
func (r *Result) TPOTUs() (float64, bool) {
	if !r.rates() || r.outputTokens < 2 {
		return 0, false
	}
	return float64(r.generationUs) / float64(r.outputTokens-1), true
}

// ActiveTPS is (k − 1) / active generation seconds; absent as TPOT is, and
// when active generation is 0.
func (r *Result) ActiveTPS() (float64, bool) {
	if _, ok := r.TPOTUs(); !ok {
		return 0, false
	}
	active := r.generationUs - r.stallUs
	if active <= 0 {
		return 0, false
	}
	return float64(r.outputTokens-1) / (float64(active) / 1e6), true
}

// CallTTFTUs is launch offset + TTFT, what the caller waited; absent when
// TTFT is absent or there is no launch offset.
func (r *Result) CallTTFTUs() (int64, bool) {
	if !r.timeline() || !r.hasLaunchOffset {
		return 0, false
	}
	sum := r.launchOffsetUs + r.ttftUs
	if (r.launchOffsetUs > 0 && sum < r.ttftUs) || (r.launchOffsetUs < 0 && sum > r.ttftUs) {
		// An overflowing launch offset is garbage from the producer.
		return 0, false
	}
	return sum, true
}

// Derive computes the figures of tl. Stall segments are appended to
// segs[:0] up to cap(segs); the rest are counted in SegmentsDropped. Derive
// does not allocate and does not retain tl or segs beyond the returned
// Result.
func Derive(tl Timeline, segs []Segment) Result {
	offs := tl.ChunkOffsetsUs
	r := Result{
		Chunks:          len(offs),
		Segments:        segs[:0],
		outputTokens:    tl.OutputTokens,
		launchOffsetUs:  tl.LaunchOffsetUs,
		hasLaunchOffset: tl.HasLaunchOffset,
	}
	switch {
	case tl.ExpectedChunks >= 0 && int64(len(offs)) < tl.ExpectedChunks:
		r.Status, r.Problem = Partial, ProblemShortTimeline
	case tl.EventsDropped:
		r.Status, r.Problem = Partial, ProblemEventsDropped
	}
	if len(offs) == 0 {
		return r
	}
	if offs[0] < 0 {
		r.Status, r.Problem = Anomaly, ProblemBeforeStart
		return r
	}

	// One pass over the gaps. A run of consecutive stalled gaps is one
	// segment: the stream was silent, then produced a lone chunk, then fell
	// silent again — the reader experienced one stall, not several.
	T := tl.ThresholdUs
	var stall int64
	inRun := false
	prev := offs[0]
	for i := 1; i < len(offs); i++ {
		t := offs[i]
		// Compare before subtracting: with prev ≥ 0 and t ≥ prev the
		// gap cannot overflow, and the gaps sum to t_{n−1} − t_0, so
		// neither can the stall sum.
		if t < prev {
			r.Status, r.Problem = Anomaly, ProblemNegativeGap
			r.StallCount, r.SegmentsDropped, r.Segments = 0, 0, segs[:0]
			return r
		}
		g := t - prev
		if g > T {
			stall += g
			if inRun {
				if n := len(r.Segments); n > 0 && r.SegmentsDropped == 0 {
					r.Segments[n-1].DurationUs += g
				}
			} else {
				r.StallCount++
				if len(r.Segments) < cap(r.Segments) {
					r.Segments = append(r.Segments, Segment{StartUs: prev, DurationUs: g, AfterChunk: i - 1})
				} else {
					r.SegmentsDropped++
				}
				inRun = true
			}
		} else {
			inRun = false
		}
		prev = t
	}
	r.ttftUs = offs[0]
	r.e2eUs = offs[len(offs)-1]
	r.generationUs = r.e2eUs - offs[0]
	r.stallUs = stall
	if len(offs) >= 2 && r.generationUs < BurstGapUs*int64(len(offs)-1) {
		r.Status = Burst
		if r.Problem == NoProblem {
			r.Problem = ProblemBurst
		}
	}
	if len(tl.KeepaliveOffsetsUs) > 0 {
		countKeepalives(r.Segments, tl.KeepaliveOffsetsUs)
	}
	return r
}

// countKeepalives fills Segment.Keepalives. Keepalives normally arrive in
// order, so one merge pass suffices; out-of-order input (bad producers) is
// still counted correctly by a scan per segment.
func countKeepalives(segs []Segment, kas []int64) {
	sorted := true
	for i := 1; i < len(kas); i++ {
		if kas[i] < kas[i-1] {
			sorted = false
			break
		}
	}
	if !sorted {
		for s := range segs {
			end := segs[s].StartUs + segs[s].DurationUs
			for _, k := range kas {
				if k > segs[s].StartUs && k < end {
					segs[s].Keepalives++
				}
			}
		}
		return
	}
	j := 0
	for s := range segs {
		start, end := segs[s].StartUs, segs[s].StartUs+segs[s].DurationUs
		for j < len(kas) && kas[j] <= start {
			j++
		}
		for j < len(kas) && kas[j] < end {
			segs[s].Keepalives++
			j++
		}
	}
}
