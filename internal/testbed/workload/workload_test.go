package workload

import (
	"errors"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

func TestTTFTQuantileIsExact(t *testing.T) {
	var r Result
	for _, ms := range []int{300, 310, 320, 8000, 305, 1000, 290, 315, 330, 1005} {
		r.TTFTs = append(r.TTFTs, time.Duration(ms)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{
		0.5:  315 * time.Millisecond, // 5th of 10
		0.9:  1005 * time.Millisecond,
		0.99: 8 * time.Second, // never above the slowest call
		0:    290 * time.Millisecond,
	} {
		if got := r.TTFTQuantile(q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	if got := (Result{}).TTFTQuantile(0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

// A hedged call counts every attempt that streamed, the loser's chunks as
// wasted, and the caller's TTFT; a call that failed after delivering
// content, and a resumed call's stalled original, waste nothing.
func TestRecordCountsStreamsAndWaste(t *testing.T) {
	r := Result{Outcomes: map[hedgeprobe.Outcome]int{}, Hedges: map[hedgeprobe.Trigger]int{},
		HedgeWins: map[hedgeprobe.Trigger]int{}, Errors: map[hedgeprobe.Outcome]string{}}
	record(&r, hedgeprobe.Stats{
		Winner: 1, Outcome: hedgeprobe.OutcomeOK, TimeToFirstChunk: 2 * time.Second, ChunksDelivered: 40,
		Attempts: []hedgeprobe.AttemptStats{
			{Index: 0, Trigger: hedgeprobe.TriggerPrimary, Outcome: hedgeprobe.AttemptCanceled, ContentChunks: 5},
			{Index: 1, Trigger: hedgeprobe.TriggerStall, Outcome: hedgeprobe.AttemptWinner, ContentChunks: 40, ChunksDelivered: 40},
		},
	}, nil)
	record(&r, hedgeprobe.Stats{
		Winner: 0, Outcome: hedgeprobe.OutcomeStallTimeout, TimeToFirstChunk: 300 * time.Millisecond, ChunksDelivered: 5,
		Attempts: []hedgeprobe.AttemptStats{
			{Index: 0, Trigger: hedgeprobe.TriggerPrimary, Outcome: hedgeprobe.AttemptFailed, ContentChunks: 5, ChunksDelivered: 5},
		},
	}, nil)
	// A resumed call: the stalled original is cancelled, yet its 5 chunks
	// reached the caller: nothing wasted.
	record(&r, hedgeprobe.Stats{
		Winner: 1, Outcome: hedgeprobe.OutcomeOK, TimeToFirstChunk: 300 * time.Millisecond, ChunksDelivered: 40,
		Attempts: []hedgeprobe.AttemptStats{
			{Index: 0, Trigger: hedgeprobe.TriggerPrimary, Outcome: hedgeprobe.AttemptCanceled, ContentChunks: 5, ChunksDelivered: 5},
			{Index: 1, Trigger: hedgeprobe.TriggerResume, Outcome: hedgeprobe.AttemptWinner, ContentChunks: 35, ChunksDelivered: 35},
		},
	}, nil)
	if r.Streams != 5 || r.WastedChunks != 5 || len(r.TTFTs) != 3 || r.Hedges[hedgeprobe.TriggerStall] != 1 {
		t.Errorf("streams %d, wasted chunks %d, TTFTs %v, hedges %v", r.Streams, r.WastedChunks, r.TTFTs, r.Hedges)
	}
}

// Truncated counts, as the call span's streamwatch.truncated does, every
// call that failed after content reached the caller — a mid-stream error
// too, not only a watchdog — and no call that failed before.
func TestRecordTruncated(t *testing.T) {
	r := Result{Outcomes: map[hedgeprobe.Outcome]int{}, Hedges: map[hedgeprobe.Trigger]int{},
		HedgeWins: map[hedgeprobe.Trigger]int{}, Errors: map[hedgeprobe.Outcome]string{}}
	for _, st := range []hedgeprobe.Stats{
		{Winner: 0, Outcome: hedgeprobe.OutcomeError, ChunksDelivered: 3},        // counts
		{Winner: 0, Outcome: hedgeprobe.OutcomeStallTimeout, ChunksDelivered: 5}, // counts
		{Winner: -1, Outcome: hedgeprobe.OutcomeTTFTTimeout},                     // delivered nothing
		{Winner: 0, Outcome: hedgeprobe.OutcomeOK, ChunksDelivered: 40},          // ok
	} {
		record(&r, st, errors.New("upstream"))
	}
	if r.Truncated != 2 {
		t.Errorf("Truncated = %d, want 2", r.Truncated)
	}
}

// Throttles are summed as the probe counts them, each refusal, and the
// calls that had any are counted apart: the collector counts the call
// spans' throttle events, between the two.
func TestRecordCountsThrottles(t *testing.T) {
	r := Result{Outcomes: map[hedgeprobe.Outcome]int{}, Hedges: map[hedgeprobe.Trigger]int{},
		HedgeWins: map[hedgeprobe.Trigger]int{}, Errors: map[hedgeprobe.Outcome]string{}}
	record(&r, hedgeprobe.Stats{Winner: 0, Outcome: hedgeprobe.OutcomeOK, HedgesThrottled: 3}, nil)
	record(&r, hedgeprobe.Stats{Winner: 0, Outcome: hedgeprobe.OutcomeOK}, nil)
	record(&r, hedgeprobe.Stats{Winner: 0, Outcome: hedgeprobe.OutcomeOK, HedgesThrottled: 1}, nil)
	if r.Throttled != 4 || r.ThrottledCalls != 2 {
		t.Errorf("throttled %d in %d calls, want 4 in 2", r.Throttled, r.ThrottledCalls)
	}
	if tot := Totals([]Result{r, r}); tot.Throttled != 8 || tot.ThrottledCalls != 4 {
		t.Errorf("totals: throttled %d in %d calls, want 8 in 4", tot.Throttled, tot.ThrottledCalls)
	}
}
