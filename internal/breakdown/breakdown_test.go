package breakdown

import (
	"math"
	"slices"
	"testing"
)

const ms = int64(1000) // µs per millisecond

// want describes the expected figures; a nil pointer means "absent".
type want struct {
	status                                  Status
	problem                                 Problem
	ttft, e2e, gen, stall, active, callTTFT *int64
	stallCount                              *int
	itl, tpot, tps                          *float64
	segs                                    []Segment
	dropped                                 int
}

func i64(v int64) *int64     { return &v }
func ip(v int) *int          { return &v }
func f64(v float64) *float64 { return &v }
func at(msOffsets ...int64) []int64 {
	out := make([]int64, len(msOffsets))
	for i, m := range msOffsets {
		out[i] = m * ms
	}
	return out
}

func TestDerive(t *testing.T) {
	const T = 2000 * ms // the default threshold, 2 s
	tests := []struct {
		name string
		tl   Timeline
		want want
	}{
		{
			// n = 0: the stall figures are 0 (design.md §4: n < 2 → 0),
			// every other timeline figure is absent.
			name: "no content chunk",
			tl:   Timeline{ThresholdUs: T, ExpectedChunks: -1},
			want: want{stall: i64(0), stallCount: ip(0)},
		},
		{
			// n = 1 at 1.6 s: ttft = e2e = 1600 ms, generation 0, stall 0;
			// active and ITL need n ≥ 2.
			name: "one chunk",
			tl:   Timeline{ChunkOffsetsUs: at(1600), ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(1600 * ms), e2e: i64(1600 * ms), gen: i64(0), stall: i64(0), stallCount: ip(0)},
		},
		{
			// 1600, 1650: generation 50 ms, one gap of 50 ≤ T, itl = 50/1.
			name: "two chunks",
			tl:   Timeline{ChunkOffsetsUs: at(1600, 1650), ThresholdUs: T, ExpectedChunks: 2},
			want: want{ttft: i64(1600 * ms), e2e: i64(1650 * ms), gen: i64(50 * ms), stall: i64(0), stallCount: ip(0),
				active: i64(50 * ms), itl: f64(50 * 1000)},
		},
		{
			// gap 2000 ms == T is not a stall: the rule is g > T.
			name: "gap equal to threshold",
			tl:   Timeline{ChunkOffsetsUs: at(100, 2100), ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(100 * ms), e2e: i64(2100 * ms), gen: i64(2000 * ms), stall: i64(0), stallCount: ip(0),
				active: i64(2000 * ms), itl: f64(2000 * 1000)},
		},
		{
			// gaps: 100, 3000, 5000, 100 → the 3000 and 5000 run is one
			// segment of 8000 ms starting at chunk 1 (t=200); stall 8000,
			// gen 8200, active 200, itl 8200/4 = 2050 ms.
			name: "consecutive stalled gaps merge",
			tl:   Timeline{ChunkOffsetsUs: at(100, 200, 3200, 8200, 8300), ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(100 * ms), e2e: i64(8300 * ms), gen: i64(8200 * ms), stall: i64(8000 * ms), stallCount: ip(1),
				active: i64(200 * ms), itl: f64(2050 * 1000),
				segs: []Segment{{StartUs: 200 * ms, DurationUs: 8000 * ms, AfterChunk: 1}}},
		},
		{
			// gaps: 55000 (stall, after chunk 0), 10, 10 → stall 55000,
			// gen 55020, active 20.
			name: "stall in the first gap",
			tl:   Timeline{ChunkOffsetsUs: at(1600, 56600, 56610, 56620), ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(1600 * ms), e2e: i64(56620 * ms), gen: i64(55020 * ms), stall: i64(55000 * ms), stallCount: ip(1),
				active: i64(20 * ms), itl: f64(55020.0 / 3 * 1000),
				segs: []Segment{{StartUs: 1600 * ms, DurationUs: 55000 * ms, AfterChunk: 0}}},
		},
		{
			// A 30 s silence after chunk 1 bridged only by keepalives every
			// 10 s (at 10100, 20100, 30100 ms, all inside (100, 30200)):
			// keepalives do not split it; one segment with 3 keepalives.
			// The keepalive at 50 ms is before the silence and not counted.
			name: "keepalives inside a silence",
			tl: Timeline{ChunkOffsetsUs: at(50, 100, 30200, 30250), KeepaliveOffsetsUs: at(50, 10100, 20100, 30100),
				ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(50 * ms), e2e: i64(30250 * ms), gen: i64(30200 * ms), stall: i64(30100 * ms), stallCount: ip(1),
				active: i64(100 * ms), itl: f64(30200.0 / 3 * 1000),
				segs: []Segment{{StartUs: 100 * ms, DurationUs: 30100 * ms, AfterChunk: 1, Keepalives: 3}}},
		},
		{
			// Same, keepalives out of order (a bad producer): same count.
			name: "keepalives unsorted",
			tl: Timeline{ChunkOffsetsUs: at(50, 100, 30200, 30250), KeepaliveOffsetsUs: at(30100, 10100, 50, 20100),
				ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(50 * ms), e2e: i64(30250 * ms), gen: i64(30200 * ms), stall: i64(30100 * ms), stallCount: ip(1),
				active: i64(100 * ms), itl: f64(30200.0 / 3 * 1000),
				segs: []Segment{{StartUs: 100 * ms, DurationUs: 30100 * ms, AfterChunk: 1, Keepalives: 3}}},
		},
		{
			// Burst: 5 chunks within 1 ms (µs offsets 1000..1004), then
			// one more at 1.8 ms: gen 800 µs, mean gap 160 µs < 1 ms, so
			// ITL is absent; the times are kept.
			name: "burst within a millisecond",
			tl:   Timeline{ChunkOffsetsUs: []int64{1000, 1001, 1002, 1003, 1004, 1800}, ThresholdUs: T, ExpectedChunks: -1},
			want: want{status: Burst, problem: ProblemBurst, ttft: i64(1000), e2e: i64(1800), gen: i64(800), stall: i64(0), stallCount: ip(0), active: i64(800)},
		},
		{
			// The case: five chunks 0.1 ms apart, k = 200. Hard
			// computed it is an ITL of 0.1 ms and ~500,000 tokens/s; as a
			// burst ITL, TPOT and active TPS are absent.
			name: "burst hides the rates",
			tl:   Timeline{ChunkOffsetsUs: []int64{900_000, 900_100, 900_200, 900_300, 900_400}, OutputTokens: 200, ThresholdUs: T, ExpectedChunks: 5},
			want: want{status: Burst, problem: ProblemBurst, ttft: i64(900 * ms), e2e: i64(900_400), gen: i64(400), stall: i64(0), stallCount: ip(0), active: i64(400)},
		},
		{
			// Mean gap exactly 1 ms is not a burst: the rule is < 1 ms.
			name: "mean gap of one millisecond",
			tl:   Timeline{ChunkOffsetsUs: at(5, 6, 7), OutputTokens: 3, ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(5 * ms), e2e: i64(7 * ms), gen: i64(2 * ms), stall: i64(0), stallCount: ip(0), active: i64(2 * ms),
				itl: f64(1000), tpot: f64(1000), tps: f64(1000)},
		},
		{
			// A partial burst is a burst; the problem still names the
			// short timeline.
			name: "partial burst",
			tl:   Timeline{ChunkOffsetsUs: []int64{100, 200}, ThresholdUs: T, ExpectedChunks: 3},
			want: want{status: Burst, problem: ProblemShortTimeline, ttft: i64(100), e2e: i64(200), gen: i64(100), stall: i64(0), stallCount: ip(0), active: i64(100)},
		},
		{
			// Equal timestamps are gaps of 0: legal, not an anomaly, but a
			// burst.
			name: "equal timestamps",
			tl:   Timeline{ChunkOffsetsUs: at(10, 10, 10), ThresholdUs: T, ExpectedChunks: 3},
			want: want{status: Burst, problem: ProblemBurst, ttft: i64(10 * ms), e2e: i64(10 * ms), gen: i64(0), stall: i64(0), stallCount: ip(0), active: i64(0)},
		},
		{
			// 100, 90: a negative gap → anomaly, every figure absent.
			name: "clock going backwards",
			tl:   Timeline{ChunkOffsetsUs: at(100, 5000, 90), ThresholdUs: T, ExpectedChunks: -1},
			want: want{status: Anomaly, problem: ProblemNegativeGap},
		},
		{
			// A gap that would overflow int64 if computed first is still
			// seen as negative.
			name: "negative gap that overflows",
			tl:   Timeline{ChunkOffsetsUs: []int64{5, math.MinInt64}, ThresholdUs: T, ExpectedChunks: -1},
			want: want{status: Anomaly, problem: ProblemNegativeGap},
		},
		{
			// A launch offset near MaxInt64 would wrap: call TTFT absent.
			name: "launch offset overflow",
			tl:   Timeline{ChunkOffsetsUs: at(1), ThresholdUs: T, ExpectedChunks: -1, LaunchOffsetUs: math.MaxInt64, HasLaunchOffset: true},
			want: want{ttft: i64(1 * ms), e2e: i64(1 * ms), gen: i64(0), stall: i64(0), stallCount: ip(0)},
		},
		{
			name: "first chunk before span start",
			tl:   Timeline{ChunkOffsetsUs: []int64{-1, 100}, ThresholdUs: T, ExpectedChunks: -1},
			want: want{status: Anomaly, problem: ProblemBeforeStart},
		},
		{
			// k unknown (0): TPOT and active TPS absent, the rest present.
			name: "k unknown",
			tl:   Timeline{ChunkOffsetsUs: at(100, 200, 300), ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(100 * ms), e2e: i64(300 * ms), gen: i64(200 * ms), stall: i64(0), stallCount: ip(0), active: i64(200 * ms), itl: f64(100 * 1000)},
		},
		{
			// k = 1: TPOT needs k ≥ 2.
			name: "k is one",
			tl:   Timeline{ChunkOffsetsUs: at(100, 200, 300), OutputTokens: 1, ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(100 * ms), e2e: i64(300 * ms), gen: i64(200 * ms), stall: i64(0), stallCount: ip(0), active: i64(200 * ms), itl: f64(100 * 1000)},
		},
		{
			// k = 2 < n = 3 (chunks split tokens): tpot = 200 ms / 1;
			// active tps = 1 / 0.2 s = 5.
			name: "k below n",
			tl:   Timeline{ChunkOffsetsUs: at(100, 200, 300), OutputTokens: 2, ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(100 * ms), e2e: i64(300 * ms), gen: i64(200 * ms), stall: i64(0), stallCount: ip(0), active: i64(200 * ms),
				itl: f64(100 * 1000), tpot: f64(200 * 1000), tps: f64(5)},
		},
		{
			// k = 11 over 100, 200, 5300, 5400: gen 5300, stall 5100
			// (one gap), active 200 ms → tpot 530 ms, active tps = 10/0.2 = 50.
			name: "tpot and active tps with a stall",
			tl:   Timeline{ChunkOffsetsUs: at(100, 200, 5300, 5400), OutputTokens: 11, ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(100 * ms), e2e: i64(5400 * ms), gen: i64(5300 * ms), stall: i64(5100 * ms), stallCount: ip(1), active: i64(200 * ms),
				itl: f64(5300.0 / 3 * 1000), tpot: f64(530 * 1000), tps: f64(50),
				segs: []Segment{{StartUs: 200 * ms, DurationUs: 5100 * ms, AfterChunk: 1}}},
		},
		{
			// Two chunks 3 s apart with k = 5: active = 0, so active tps is
			// absent, tpot = 3000/4 = 750 ms.
			name: "active zero hides tps",
			tl:   Timeline{ChunkOffsetsUs: at(0, 3000), OutputTokens: 5, ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(0), e2e: i64(3000 * ms), gen: i64(3000 * ms), stall: i64(3000 * ms), stallCount: ip(1), active: i64(0),
				itl: f64(3000 * 1000), tpot: f64(750 * 1000),
				segs: []Segment{{StartUs: 0, DurationUs: 3000 * ms, AfterChunk: 0}}},
		},
		{
			// chunk.count says 5, the timeline has 2: partial, figures of
			// what is present.
			name: "timeline shorter than chunk count",
			tl:   Timeline{ChunkOffsetsUs: at(100, 150), ThresholdUs: T, ExpectedChunks: 5},
			want: want{status: Partial, problem: ProblemShortTimeline, ttft: i64(100 * ms), e2e: i64(150 * ms), gen: i64(50 * ms), stall: i64(0),
				stallCount: ip(0), active: i64(50 * ms), itl: f64(50 * 1000)},
		},
		{
			name: "events dropped",
			tl:   Timeline{ChunkOffsetsUs: at(100), ThresholdUs: T, ExpectedChunks: -1, EventsDropped: true},
			want: want{status: Partial, problem: ProblemEventsDropped, ttft: i64(100 * ms), e2e: i64(100 * ms), gen: i64(0), stall: i64(0), stallCount: ip(0)},
		},
		{
			// Hedge launched 1.5 s into the call, its first chunk 0.4 s
			// after its own start: the caller waited 1.9 s.
			name: "call ttft from launch offset",
			tl:   Timeline{ChunkOffsetsUs: at(400), ThresholdUs: T, ExpectedChunks: -1, LaunchOffsetUs: 1500 * ms, HasLaunchOffset: true},
			want: want{ttft: i64(400 * ms), e2e: i64(400 * ms), gen: i64(0), stall: i64(0), stallCount: ip(0), callTTFT: i64(1900 * ms)},
		},
		{
			// Three separate silences (gaps 3000, 50, 4000, 50, 5000) with
			// a buffer of 2: two stored, one dropped, count 3.
			name: "segments beyond the buffer",
			tl:   Timeline{ChunkOffsetsUs: at(0, 3000, 3050, 7050, 7100, 12100), ThresholdUs: T, ExpectedChunks: -1},
			want: want{ttft: i64(0), e2e: i64(12100 * ms), gen: i64(12100 * ms), stall: i64(12000 * ms), stallCount: ip(3), active: i64(100 * ms),
				itl: f64(12100.0 / 5 * 1000), dropped: 1,
				segs: []Segment{{StartUs: 0, DurationUs: 3000 * ms, AfterChunk: 0}, {StartUs: 3050 * ms, DurationUs: 4000 * ms, AfterChunk: 2}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			segs := make([]Segment, 0, 2)
			r := Derive(tc.tl, segs)
			check(t, &r, tc.want)
		})
	}
}

func check(t *testing.T, r *Result, w want) {
	t.Helper()
	if r.Status != w.status || r.Problem != w.problem {
		t.Errorf("status = %v/%q, want %v/%q", r.Status, r.Problem, w.status, w.problem)
	}
	checkI := func(name string, got int64, ok bool, want *int64) {
		t.Helper()
		switch {
		case want == nil && ok:
			t.Errorf("%s = %d, want absent", name, got)
		case want != nil && !ok:
			t.Errorf("%s absent, want %d", name, *want)
		case want != nil && got != *want:
			t.Errorf("%s = %d, want %d", name, got, *want)
		}
	}
	checkF := func(name string, got float64, ok bool, want *float64) {
		t.Helper()
		switch {
		case want == nil && ok:
			t.Errorf("%s = %g, want absent", name, got)
		case want != nil && !ok:
			t.Errorf("%s absent, want %g", name, *want)
		case want != nil && (got-*want > 1e-6 || *want-got > 1e-6):
			t.Errorf("%s = %g, want %g", name, got, *want)
		}
	}
	v, ok := r.TTFTUs()
	checkI("ttft", v, ok, w.ttft)
	v, ok = r.E2EUs()
	checkI("e2e", v, ok, w.e2e)
	v, ok = r.GenerationUs()
	checkI("generation", v, ok, w.gen)
	v, ok = r.StallUs()
	checkI("stall", v, ok, w.stall)
	v, ok = r.ActiveGenerationUs()
	checkI("active", v, ok, w.active)
	v, ok = r.CallTTFTUs()
	checkI("call ttft", v, ok, w.callTTFT)
	c, ok := r.StallSegments()
	var cw *int64
	if w.stallCount != nil {
		cw = i64(int64(*w.stallCount))
	}
	checkI("stall count", int64(c), ok, cw)
	f, ok := r.ITLMeanUs()
	checkF("itl", f, ok, w.itl)
	f, ok = r.TPOTUs()
	checkF("tpot", f, ok, w.tpot)
	f, ok = r.ActiveTPS()
	checkF("active tps", f, ok, w.tps)
	if !slices.Equal(r.Segments, w.segs) {
		t.Errorf("segments = %+v, want %+v", r.Segments, w.segs)
	}
	if r.SegmentsDropped != w.dropped {
		t.Errorf("segments dropped = %d, want %d", r.SegmentsDropped, w.dropped)
	}
}

// A 100,000-chunk stream at 20 ms per chunk with a 55 s silence after chunk
// 50,000: every figure follows from the arithmetic of the script.
func TestDeriveLongTimeline(t *testing.T) {
	const n = 100_000
	offs := make([]int64, n)
	t0 := int64(1600 * ms)
	for i := range offs {
		offs[i] = t0 + int64(i)*20*ms
		if i > 50_000 {
			offs[i] += 55_000 * ms
		}
	}
	r := Derive(Timeline{ChunkOffsetsUs: offs, ThresholdUs: 2000 * ms, ExpectedChunks: n}, make([]Segment, 0, 64))
	gen := int64(n-1)*20*ms + 55_000*ms
	check(t, &r, want{
		ttft: i64(t0), e2e: i64(t0 + gen), gen: i64(gen), stall: i64(55_020 * ms), stallCount: ip(1),
		active: i64(gen - 55_020*ms), itl: f64(float64(gen) / (n - 1)),
		segs: []Segment{{StartUs: offs[50_000], DurationUs: 55_020 * ms, AfterChunk: 50_000}},
	})
}

func TestDeriveDoesNotAllocate(t *testing.T) {
	offs, kas := benchTimeline(2000)
	segs := make([]Segment, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		r := Derive(Timeline{ChunkOffsetsUs: offs, KeepaliveOffsetsUs: kas, OutputTokens: 2500, ThresholdUs: 2e6, ExpectedChunks: -1}, segs)
		_, _ = r.ActiveTPS()
	})
	if allocs != 0 {
		t.Fatalf("Derive allocated %v times per span, want 0", allocs)
	}
}

func TestStatusStrings(t *testing.T) {
	for s, want := range map[Status]string{Complete: "complete", Partial: "partial", Anomaly: "anomaly", Burst: "burst"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
		if !IsStatus(want) {
			t.Errorf("IsStatus(%q) = false", want)
		}
	}
	for _, s := range []string{"", "done", "Complete", "complete "} {
		if IsStatus(s) {
			t.Errorf("IsStatus(%q) = true", s)
		}
	}
	for _, p := range []Problem{ProblemShortTimeline, ProblemEventsDropped, ProblemNegativeGap, ProblemBeforeStart, ProblemBurst} {
		if p.String() == "" {
			t.Errorf("problem %d has no text", p)
		}
	}
}
