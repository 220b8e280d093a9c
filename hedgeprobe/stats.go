package hedgeprobe

import "time"

// Stats describes a call. It is complete once Next has reported false or
// Close has returned (see Stream.Stats for which goroutine may read it).
type Stats struct {
	// Attempts lists the attempts launched, in order; index 0 is the primary.
	Attempts []AttemptStats
	// Winner is the index of the attempt the caller read last from (the
	// committed attempt, or the resume that took over from it), -1 when
	// none committed.
	Winner int
	// WinnerRoute is that attempt's route name.
	WinnerRoute string
	// HedgesThrottled counts hedges the budget or pushback refused and
	// resumes the budget refused. A resume no route can take (every
	// continuing route refused recently, asks callers to stay away or is
	// ejected) is a skip, ResumeNoRoute, reported to OnResume.
	HedgesThrottled int
	// TimeToFirstChunk is the time from the call's start (the first Next)
	// to the first content chunk Next returned; 0 when there was none.
	TimeToFirstChunk time.Duration
	// ChunksDelivered counts content chunks returned by Next.
	ChunksDelivered int64
	// ItemsDelivered counts every item returned by Next.
	ItemsDelivered int64
	// Outcome is how the call ended; OutcomeRunning while it runs.
	Outcome Outcome
}

// Truncated reports whether the call ended, after the caller had been
// given content, before Next reported the stream's end: any outcome but
// ok, with content delivered — what the call span's
// streamwatch.truncated says. After the caller's Close, Err is nil
// whatever was read; Truncated says the call was cut. A caller that
// closes as soon as it has what it wanted (the finish item, say) reads
// true for an answer it considers whole.
func (s Stats) Truncated() bool {
	return s.Outcome != OutcomeOK && s.Outcome != OutcomeRunning && s.ChunksDelivered > 0
}

// AttemptStats describes one attempt; AttemptEvent carries it to the
// OnAttemptDone hook.
type AttemptStats struct {
	// Index is the attempt's index: 0 for the primary, then in launch
	// order.
	Index int
	// Route, Provider and Model are its route's.
	Route, Provider, Model string
	// Trigger is why it was launched.
	Trigger Trigger
	// Outcome is AttemptRunning while the attempt runs.
	Outcome AttemptOutcome
	// Err is the error of a failed attempt. Its Error can quote the
	// prompt or the answer (an upstream's message, a panic's value): log
	// StatusText(Err) where that must not be kept.
	Err error
	// LaunchOffset is the time from the call's start to the launch.
	LaunchOffset time.Duration
	// TTFT is the time from the launch to the first content chunk; 0 when
	// the attempt had none.
	TTFT time.Duration
	// Duration is the time from the launch to the end; 0 while it runs.
	Duration time.Duration
	// ContentChunks counts content chunks received (winner: read so far).
	ContentChunks int64
	// ChunksDelivered counts the content chunks of this attempt the caller
	// was given: all of a winner's, a resumed attempt's up to its
	// continuation, none of a loser's. ContentChunks − ChunksDelivered is
	// what the attempt wasted.
	ChunksDelivered int64
	// ResumeOf is, for a resume attempt, the index of the attempt it
	// continues; −1 otherwise.
	ResumeOf int
	// DeliveredBefore is, for a resume after commit, the content chunks
	// the caller had when it was launched.
	DeliveredBefore int64
}

// Stats returns the call's figures so far. Like Err, it is complete and
// safe to call on the goroutine that called Next once Next has reported
// false, and on a goroutine that called Close once Close has returned;
// between Next calls it is safe only while no Close may be running on
// another goroutine. It must not be called concurrently with Next.
func (s *Stream[T]) Stats() Stats { return s.stats() }

func (s *Stream[T]) stats() Stats {
	st := Stats{
		Winner:           -1,
		HedgesThrottled:  s.race.throttled,
		TimeToFirstChunk: s.out.ttfc,
		ChunksDelivered:  s.out.delivered,
		ItemsDelivered:   s.out.items,
		Outcome:          s.outcome,
	}
	if w := s.race.winner; w != nil {
		st.Winner, st.WinnerRoute = w.idx, w.route.Name
	}
	st.Attempts = make([]AttemptStats, len(s.attempts))
	for i, a := range s.attempts {
		st.Attempts[i] = a.stats()
	}
	return st
}
