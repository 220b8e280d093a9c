package hedgeprobe

import (
	"errors"
	"math"
	"time"
)

// How attempts and calls end: an attempt's outcome, a failure and what it
// asks for next, the end of the call.

// end gives attempt a its outcome, releases it (or, when its reader is
// closing it already, cancels it) and reports it. censor
// records an attempt that had no content in the delay sketch (it lost a
// race, or the TTFT watchdog cut it): see delayBook.observeCensored.
func (s *Stream[T]) end(a *attempt[T], o AttemptOutcome, err error, now time.Time, censor bool) {
	// Route health hears a failure last (unhealthy, after the report
	// below); only then may it forget the ejections a was admitted before
	// (health.leave), which tell whether a is stale.
	defer s.p.health.leave(&a.adm)
	if o == AttemptFailed {
		defer s.unhealthy(a, err, now)
	}
	a.done, a.outcome, a.err, a.endAt = true, o, err, now.Sub(s.start)
	if a.readerEnded {
		a.cancel() // the reader closes the source; finish waits for it
	} else {
		a.release()
	}
	if censor && a.content == 0 {
		s.p.delays.observeCensored(a.route.Name, a.route.Model, now.Sub(a.launchAt), a.delay, now)
	}
	// Route health: a stream that completed is a success (and restores a
	// probed route); content alone is not, since a stream that stalls
	// after its first chunk is the failure this project is about. A probe
	// that ended without telling (it lost a race, the caller hung up, a
	// fatal error, a failure not counted) frees the probe for the next
	// call; a transient failure is counted by unhealthy, and ejects a
	// probed route again.
	switch {
	case o == AttemptWinner:
		if ev, restored := s.p.health.success(a.route.Name, a.adm.epoch); restored {
			ev.Context = s.ctx
			s.obs.restore(ev, now)
		}
	case a.adm.probe && !(o == AttemptFailed && IsTransient(err) && !a.uncounted):
		s.p.health.abandon(a.route.Name, a.adm.epoch)
	}
	if o == AttemptCanceled && a != s.race.winner {
		s.obs.canceled(a.idx, now)
	}
	if s.handsOn(a) {
		// Its items reach the caller behind a continuation's, after this:
		// reported when the call ends, with the chunks the caller got.
		a.reportAt = now
		return
	}
	s.obs.attemptDone(AttemptEvent{Context: s.ctx, AttemptStats: a.stats()}, now)
}

// handsOn reports whether some of a's items may still reach the caller
// through a continuation of a that is live (before commit, or the winner):
// a stall hedge continues the stalled attempt's text, and the caller reads
// that attempt's items up to the prefix, then the continuation's.
func (s *Stream[T]) handsOn(a *attempt[T]) bool {
	if s.phase == phaseDone {
		return false // the call has ended: nothing more reaches the caller
	}
	for _, b := range s.attempts {
		if b.done {
			continue
		}
		for p := b.parent; p != nil; p = p.parent {
			if p == a {
				return true
			}
		}
	}
	return false
}

// fail ends attempt a with err: a transient error asks for the next
// attempt at once (a hedge before commit, a resume after it when no other
// attempt carries the answer on or only the silent stream is left), a
// fatal one ends the call — except on a
// resume attempt that has had no content yet, where it means the route
// refused to continue: that route is not asked again for a while, and the
// call goes on. Once a continuation has content
// the route has accepted it, and a fatal error is the stream's own, as on
// any attempt. A panic is never a refusal, nor is ErrNilSource: each is a
// bug in the caller's code or an adapter, and fails the call wherever it
// happens. An end that
// the caller's Close or cancel caused is not a failure: fail finishes the
// call as canceled instead.
func (s *Stream[T]) fail(a *attempt[T], err error) {
	if s.stopping() {
		return
	}
	s.failUnchecked(a, err)
}

// failUnchecked is fail once the caller's stop has been ruled out, for a
// watchdog that must report itself between that check and the failure:
// checking again after the report could turn a failure already reported
// into a cancellation.
func (s *Stream[T]) failUnchecked(a *attempt[T], err error) {
	now := time.Now()
	transient := IsTransient(err)
	refused := !transient && a.trigger == TriggerResume && a.content == 0 && !isPanic(err) && !errors.Is(err, ErrNilSource)
	s.end(a, AttemptFailed, err, now, false) // counts a transient err against the route
	if refused {
		// A refusal is the route's answer to continuations in general; a
		// request the adapter could not build is this call's alone.
		why := ResumeBuild
		if errors.Is(err, ErrCannotContinue) {
			if s.race.cannotBuild == nil {
				s.race.cannotBuild = make(map[string]bool)
			}
			s.race.cannotBuild[a.route.Name] = true
		} else {
			why = ResumeRefused
			s.p.refusals.add(a.route.Name, now, now.Add(s.p.cfg.ResumeRefusedFor))
		}
		s.obs.resume(ResumeEvent{Context: s.ctx, Attempt: a.idx, Of: a.stats().ResumeOf, Route: a.route.Name,
			DeliveredChunks: a.delivered, Skipped: why, Elapsed: now.Sub(s.start)})
	}
	r := &s.race
	// The call's error, should nothing rescue it: the committed stream's,
	// or before commit the latest failure; a racing resume's failure does
	// not replace it.
	if !refused && (s.phase == phaseRace || a == r.winner || r.lastErr == nil) {
		r.lastErr = err
	}
	if !transient && !refused {
		s.finish(err, outcomeOf(err))
		return
	}
	canLaunch := len(s.attempts) < s.p.cfg.MaxAttempts
	switch {
	case transient && s.phase == phaseRace && canLaunch:
		r.errorHedge, r.errorAt, r.errorSince = true, 0, now.Sub(s.start)
	case (transient || refused) && s.phase != phaseRace && r.resumable && canLaunch && s.live() == nil:
		// After commit, the committed stream or the last resume racing it
		// failed (or was refused: that route only is not asked again),
		// and nothing carries the answer on: resume it now. While
		// a resume still races, it carries on alone: another would
		// continue the same text, for another token.
		r.resumeNow, r.resumeAvoid = true, nil
	case transient && s.phase == phaseRelay && r.resumable && canLaunch && s.lastRacerFailed(a):
		// The last resume racing a stream still silent failed: the
		// next, at once, on another route (lastRacerFailed).
		r.resumeNow, r.resumeAvoid = true, a.route
	}
	if r.errorHedge || r.resumeNow {
		if s.rec != nil {
			// The rescue this failure calls for is a new one: its refusal
			// is news even when it reads as the one before (the same
			// trigger and index: no attempt launched in between). A
			// failure that calls for none (a racing resume's, while the
			// stream it raced lives) leaves a run of repeats as it is.
			s.rec.forget()
		}
		// Their triggers are due now: act before anything else happens.
		s.onDeadline()
	}
	if w := r.winner; s.phase == phaseRelay && w != nil && a != w && !w.done && len(w.buf) > 0 && !s.othersLive(w) {
		// The last resume racing the committed stream failed: what the
		// stream held for the race's decision goes to the caller. (A
		// committed stream that failed drops what it held, as any failed
		// attempt its undelivered items: it cannot win the race.)
		s.releaseHeld(w)
	}
	s.endIfNoneLeft(err)
}

// lastRacerFailed reports whether a, just ended, was the last resume
// racing a committed stream that is still live, silent and holds nothing.
// The caller has already waited ResumeAfter through this silence — the
// wait that launched a — so when a fails with a transient error (a 5xx,
// a 429, a reset), the next continuation goes at once, as a failed
// attempt's relaunch does before commit, not a further ResumeAfter after
// a's launch — on another route than a's (the stalled stream's own
// included), so that a failing upstream is not asked again and again;
// with none, the cadence stays (resumeAfterCommit). A refusal (a 400 on
// the prefill) does not hurry it: the call falls back to the watchdog and
// the usual cadence. A stream that holds items (a finish reason sent
// during the race) is ending, not silent: they go to the caller, and the
// resume trigger decides as usual.
func (s *Stream[T]) lastRacerFailed(a *attempt[T]) bool {
	w := s.race.winner
	if a.trigger != TriggerResume || w == nil || a == w || w.done {
		return false
	}
	return len(w.buf) == 0 && !s.othersLive(w)
}

// isPanic reports whether err is a recovered panic of code hedgeprobe
// calls: a Route's Open, a Source, the classifier or an Items function.
func isPanic(err error) bool {
	return errors.Is(err, ErrOpenPanic) || errors.Is(err, ErrSourcePanic) ||
		errors.Is(err, ErrClassifierPanic) || errors.Is(err, ErrExtractorPanic)
}

// unhealthy counts a's transient failure (an error, or a watchdog timeout
// of an attempt committed or racing) against its route's health.
func (s *Stream[T]) unhealthy(a *attempt[T], err error, now time.Time) {
	if !IsTransient(err) || a.uncounted {
		return
	}
	ev, ejected := s.p.health.failure(a.route.Name, now, retryAfter(err), a.adm.epoch, a.adm.probe)
	// Routes the failure restored without a probe, their entries idle
	// (health.idle): the listener hears of them; this call's span does
	// not, as no stream of it restored them. Before the ejection: when
	// the failing route's own entry was forgotten, its failure then
	// ejected it afresh, and a listener must end with it ejected.
	for _, ev := range s.p.health.takeForgotten() {
		ev.Context = s.ctx
		s.p.hooks.restore(ev, now)
	}
	if ejected {
		ev.Context = s.ctx
		s.obs.eject(ev, now)
	}
}

// endIfNoneLeft ends the call when no attempt is live and none is about to
// be launched: the latest failure (or err) is the call's error.
func (s *Stream[T]) endIfNoneLeft(err error) {
	r := &s.race
	if s.phase == phaseDone || s.live() != nil || r.errorHedge || r.resumeNow {
		return
	}
	if r.lastErr != nil {
		err = r.lastErr
	}
	s.finish(err, outcomeOf(err))
}

// live returns the most recently launched live attempt, or nil.
func (s *Stream[T]) live() *attempt[T] {
	for i := len(s.attempts) - 1; i >= 0; i-- {
		if !s.attempts[i].done {
			return s.attempts[i]
		}
	}
	return nil
}

func outcomeOf(err error) Outcome {
	if te, ok := errors.AsType[*TimeoutError](err); ok {
		if te.Kind == TimeoutTTFT {
			return OutcomeTTFTTimeout
		}
		return OutcomeStallTimeout
	}
	return OutcomeError
}

func (s *Stream[T]) watchdogFired(kind TimeoutKind, a *attempt[T], at time.Duration) {
	timeout := s.p.cfg.StallTimeout
	if kind == TimeoutTTFT {
		timeout = s.p.cfg.TTFTTimeout
	}
	s.obs.watchdog(WatchdogEvent{Context: s.ctx, Kind: kind, Timeout: timeout, Attempt: a.idx, Route: a.route.Name,
		Elapsed: at}, s.start.Add(at))
}

// finish ends the call with err and outcome: every live attempt gets its
// outcome and is released, timers stop, spans end, and finish waits for
// every reading goroutine; then it closes finished. Only the goroutine
// driving the Stream (or Close, once it owns the Stream) calls it.
func (s *Stream[T]) finish(err error, outcome Outcome) {
	if s.phase == phaseDone {
		return
	}
	defer close(s.life.finished)
	started := s.phase != phaseNew
	s.phase = phaseDone
	s.err, s.outcome = err, outcome
	if s.direct.wd != nil {
		s.direct.wd.stop()
	}
	if s.race.timer != nil {
		s.race.timer.Stop()
	}
	if !started {
		return
	}
	now := time.Now()
	if outcome == OutcomeCanceled {
		s.recordQueued(now)
	}
	w := s.race.winner
	for _, a := range s.attempts {
		if !a.reportAt.IsZero() {
			s.obs.attemptDone(AttemptEvent{Context: s.ctx, AttemptStats: a.stats()}, a.reportAt)
		}
		if a.done {
			continue
		}
		switch {
		case a == w && outcome == OutcomeOK:
			s.end(a, AttemptWinner, nil, now, false)
		case outcome == OutcomeCanceled:
			s.end(a, AttemptCanceled, nil, now, false)
		case a == w || outcome == OutcomeTTFTTimeout:
			// A hedge the call's TTFT watchdog cut off sooner than its
			// own hedge delay, launched late in the call's TTFT budget,
			// tells nothing about its route — as in the delay sketch
			// (observeCensored) — so route health does not count it; the
			// hedges that had that long are counted, and the primary
			// always is: it had the whole budget. Timed, the primary
			// would fall short of it whenever its delay is at least the
			// timeout (a cold route's, HedgeMaxDelay) by the time between
			// the call's start and its launch (a span processor's
			// OnStart, a listener), and its route would never be ejected.
			a.uncounted = outcome == OutcomeTTFTTimeout && a.trigger != TriggerPrimary &&
				now.Sub(a.launchAt) < min(a.delay, s.p.cfg.TTFTTimeout)
			s.end(a, AttemptFailed, err, now, true)
		default:
			s.end(a, AttemptCanceled, nil, now, false)
		}
	}
	s.life.mu.Lock()
	cancel := s.life.cancel
	s.life.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if s.rec != nil {
		s.rec.end(s.stats(), err, now)
	}
	s.life.wg.Wait()
}

// recordQueued puts on their attempts' timelines the items the readers had
// queued when the caller hung up (Close, or its context), though nobody
// will read them: they arrived, and an attempt span says what its upstream
// did, so that they count as received and never delivered (wasted). Only
// what arrived by now, the call's end: a reader still running may queue
// more meanwhile (hence the bound, the queue's size). Tokens and the
// response model are not read from them: they are no part of the answer.
// A chunk a reader holds, or one taken by a Next that the hang-up
// overtook, is not recorded: Close at the instant of a chunk is a tie.
// cancelOthers does the same for the losers of a race.
func (s *Stream[T]) recordQueued(now time.Time) {
	r := &s.race
	for range len(r.pending) + cap(r.events) {
		ev, ok := r.queued()
		if !ok {
			return
		}
		s.arrived(ev, now)
	}
}

// arrived records ev, an item queued for an attempt that nobody will
// read, on the attempt's timeline if it came by now and the attempt is
// live: received, never delivered. A first content chunk is the route's
// TTFT sample like any other.
func (s *Stream[T]) arrived(ev event[T], now time.Time) {
	a := ev.a
	at := s.start.Add(ev.at)
	if a.done || ev.typ != evItem || at.After(now) {
		return
	}
	switch ev.kind {
	case Content:
		a.content++
		if a.content == 1 {
			a.first = ev.at
			s.p.delays.observe(a.route.Name, a.route.Model, ev.at-a.launch, at)
		}
		a.last = ev.at
		if a.rec != nil {
			a.rec.content(at)
		}
	case Keepalive:
		if a.rec != nil {
			a.rec.keepalive(at)
		}
	}
}

// timeoutOf builds the TimeoutError of kind for attempt a.
func (s *Stream[T]) timeoutOf(kind TimeoutKind, after time.Duration, a *attempt[T]) *TimeoutError {
	return &TimeoutError{Kind: kind, After: after, Attempt: a.idx, Route: a.route.Name, Model: a.route.Model,
		ChunksReceived: a.content, ChunksDelivered: s.out.delivered, Truncated: s.out.delivered > 0}
}

// never is a deadline that is not due.
const never = time.Duration(math.MaxInt64)

// later returns at+d, or never where the sum would overflow: a timeout or
// delay of centuries (math.MaxInt64 is a valid Config value) means "not
// yet", and must not wrap round to "at once". d is never negative.
func later(at, d time.Duration) time.Duration {
	if at > 0 && d > never-at {
		return never
	}
	return at + d
}
