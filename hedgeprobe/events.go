package hedgeprobe

import (
	"context"
	"time"
)

// Trigger is why an attempt was launched.
type Trigger string

// Values of Trigger (the streamwatch.attempt.trigger values).
const (
	TriggerPrimary Trigger = "primary"
	TriggerTTFT    Trigger = "ttft"
	TriggerStall   Trigger = "stall"
	TriggerError   Trigger = "error"
	// TriggerResume: a continuation of text a stalled attempt already
	// produced, on a route that can continue it (docs/design.md §2 rule 10).
	TriggerResume Trigger = "resume"
)

// AttemptOutcome is how an attempt ended.
type AttemptOutcome string

// Values of AttemptOutcome (the streamwatch.attempt.outcome values).
const (
	// AttemptRunning: the attempt has not ended yet.
	AttemptRunning AttemptOutcome = ""
	// AttemptWinner: the attempt committed and its stream ended cleanly.
	AttemptWinner AttemptOutcome = "winner"
	// AttemptCanceled: the attempt lost a race (before commit, or a resume
	// race after it), or the caller cancelled or closed the call, or
	// another attempt's failure ended the call (a fatal error). Never a
	// failure. The watchdogs differ: a TTFT timeout makes every live
	// attempt AttemptFailed; a stall timeout fails the attempt that
	// stalled and cancels a resume racing it.
	AttemptCanceled AttemptOutcome = "canceled"
	// AttemptFailed: the attempt failed with an error or a watchdog
	// timeout, committed or not.
	AttemptFailed AttemptOutcome = "failed"
)

// Outcome is how a call ended.
type Outcome string

// Values of Outcome (the streamwatch.outcome values).
const (
	// OutcomeRunning: the call has not ended.
	OutcomeRunning      Outcome = ""
	OutcomeOK           Outcome = "ok"
	OutcomeTTFTTimeout  Outcome = "ttft_timeout"
	OutcomeStallTimeout Outcome = "stall_timeout"
	OutcomeError        Outcome = "error"
	// OutcomeCanceled: the caller ended the call — Close, or its context
	// cancelled or past its deadline (Err then returns the context's
	// error, and the span's error.type says which).
	OutcomeCanceled Outcome = "canceled"
)

// ThrottleReason says why a hedge or resume was refused.
type ThrottleReason string

// Values of ThrottleReason.
const (
	// ThrottleBudget: the hedge budget had no token, or, for a TTFT
	// hedge, none above the reserve it leaves for the other rescues
	// (Config.HedgeBurst).
	ThrottleBudget ThrottleReason = "budget"
	// ThrottlePushback: every route the hedge could go to asked callers to
	// stay away (Retry-After) or is ejected.
	ThrottlePushback ThrottleReason = "pushback"
)

// ResumeSkip says why a resume that was due was not launched, or, for
// ResumeRefused and ResumeBuild, was launched and declined by its route.
type ResumeSkip string

// Values of ResumeSkip (the streamwatch.resume.reason values).
const (
	// ResumeMaxAttempts: the call already has MaxAttempts attempts.
	ResumeMaxAttempts ResumeSkip = "max_attempts"
	// ResumeNoRoute: no route can continue now: every route that Continues
	// has refused a continuation recently, could not build this call's
	// (ResumeBuild), asks callers to stay away (Retry-After) or is
	// ejected. (A call none of whose routes Continues never resumes, so it
	// reports no ResumeEvent at all.)
	ResumeNoRoute ResumeSkip = "no_route"
	// ResumeNotResumable: what was delivered cannot be continued: nothing
	// but reasoning, a tool call in progress, text followed by a control
	// item and no text since (a finish reason, usage, the end of a content
	// block: a continuation could follow the answer's end), or text
	// followed by content without text and no text since (reasoning after
	// the text: a continuation would abandon it half written; a citation,
	// which Items.Text cannot tell from reasoning).
	ResumeNotResumable ResumeSkip = "not_resumable"
	// ResumeTooLong: the delivered text passed Config.ResumeMaxText.
	ResumeTooLong ResumeSkip = "too_long"
	// ResumeRefused: the route answered the continuation with a fatal
	// error (a 400 on prefill, say); it is not asked again for a while.
	// The attempt was launched: OnAttemptDone reports it failed, with
	// that error, and it counts towards MaxAttempts; the route's health
	// (rule 11) is not touched, and the call goes on.
	ResumeRefused ResumeSkip = "refused"
	// ResumeBuild: the route could not build the continuation request
	// (its Open returned an error wrapping ErrCannotContinue). As with
	// ResumeRefused the attempt was launched and OnAttemptDone reports it
	// failed, with that error (a hook feeding a circuit breaker can leave
	// it out with errors.Is); the route is not taken to refuse, but this
	// call does not ask it for a continuation again.
	ResumeBuild ResumeSkip = "build"
)

// HedgeEvent describes a hedge launch.
type HedgeEvent struct {
	// Context is the context the call was started with (Prober.Stream),
	// so a hook can attribute the event to a request.
	Context context.Context
	// Attempt is the new attempt's index (1 for the first hedge).
	Attempt int
	// Route, Provider and Model are the new attempt's route's.
	Route, Provider, Model string
	// Trigger is why it was launched.
	Trigger Trigger
	// Delay is the TTFT trigger's hedge delay in force at the launch,
	// whatever the trigger: for a stall or error hedge it says how long a
	// TTFT hedge would have waited, not a wait this hedge made.
	Delay time.Duration
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// ThrottleEvent describes a hedge that was not launched for lack of
// budget or of a route that accepts traffic, or a resume not launched for
// lack of budget (a resume without a route is a ResumeEvent skip,
// ResumeNoRoute).
type ThrottleEvent struct {
	// Context is the context the call was started with.
	Context context.Context
	// Attempt is the index the attempt would have had.
	Attempt int
	// Route is the route it would have gone to.
	Route string
	// Trigger is why it was due.
	Trigger Trigger
	// Reason is what refused it: the budget, or every route it could go
	// to pushing back or ejected.
	Reason ThrottleReason
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// CommitEvent describes a commit.
type CommitEvent struct {
	// Context is the context the call was started with.
	Context context.Context
	// Attempt is the index of the attempt that won.
	Attempt int
	// Route, Provider and Model are its route's.
	Route, Provider, Model string
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// AttemptEvent describes an attempt that ended: its figures, and the call
// it belongs to.
type AttemptEvent struct {
	// Context is the context the call was started with.
	Context context.Context
	AttemptStats
}

// WatchdogEvent describes a watchdog firing.
type WatchdogEvent struct {
	// Context is the context the call was started with.
	Context context.Context
	// Kind is the watchdog that fired: TimeoutTTFT or TimeoutStall.
	Kind TimeoutKind
	// Timeout is its setting (Config.TTFTTimeout or Config.StallTimeout).
	Timeout time.Duration
	// Attempt is the index of the attempt the call's error names: the
	// newest live attempt for a TTFT timeout, the committed stream's for
	// a stall timeout.
	Attempt int
	// Route is that attempt's route.
	Route string
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// ResumeEvent describes a resume: a resume attempt launched, or, with
// Skipped set, one that was due and was not launched — or, for
// ResumeRefused and ResumeBuild, one that was launched and whose route
// declined the continuation (its launch was reported first).
type ResumeEvent struct {
	// Context is the context the call was started with.
	Context context.Context
	// Attempt is the resume attempt's index (the index it would have had
	// when skipped).
	Attempt int
	// Of is the index of the stalled attempt it continues.
	Of int
	// Route is the route it went to; empty when skipped for lack of one.
	Route string
	// DeliveredChunks is the number of content chunks delivered to the
	// caller before it (0 for a resume before commit: that one continues
	// text the caller has not been given).
	DeliveredChunks int64
	// Skipped is why it was not launched (or was declined after its
	// launch: ResumeRefused, ResumeBuild); empty for a launch.
	Skipped ResumeSkip
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// RouteEvent describes a change of a route's health (docs/design.md §2
// rule 11): an ejection, or a restore after a successful probe.
type RouteEvent struct {
	// Context is the context of the call whose attempt caused it.
	Context context.Context
	// Route is the route's name.
	Route string
	// Reason is why the route was ejected: EjectFailures or
	// EjectRetryAfter; empty on a restore.
	Reason EjectReason
	// For is how long the route is ejected; 0 on a restore.
	For time.Duration
	// Ejections is the route's consecutive ejection count (0 on a restore).
	Ejections int
	// Seq orders the route events of a Prober: a later ejection or
	// restore has a larger Seq. Each call reports its own on its own
	// goroutine, after the change, so the events of concurrent calls can
	// reach the hooks in another order; a listener that keeps each
	// route's state keeps the event with the largest Seq.
	Seq uint64
}

// EjectReason says why a route was ejected.
type EjectReason string

// Values of EjectReason (the streamwatch.route.ejection_reason values).
const (
	// EjectFailures: Config.EjectFailures consecutive transient failures.
	EjectFailures EjectReason = "failures"
	// EjectRetryAfter: the upstream asked callers to stay away.
	EjectRetryAfter EjectReason = "retry_after"
)
