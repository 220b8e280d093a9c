package hedgeprobe

import "time"

// trigger is one rule of the race: when it is due and what it does, side
// by side (docs/design.md §2 rules 2, 6 and 10). The race's deadline is
// the earliest due of the table, and when it passes every trigger whose
// time has come fires, in table order.
type trigger[T any] struct {
	name string
	// due returns when, in time since the call started, the trigger acts
	// next; ok is false when it cannot act in the call's present state.
	due func(s *Stream[T]) (at time.Duration, ok bool)
	// fire acts. It is called once due has passed, with the time since
	// the call started.
	fire func(s *Stream[T], now time.Duration)
}

// triggerTable is the table, in the order the triggers fire when several
// are due at once: the watchdogs first (a call that has timed out
// launches nothing), then the attempt launches.
func triggerTable[T any]() []trigger[T] {
	return []trigger[T]{
		{
			// TTFT watchdog: no content from any attempt, live or not, by
			// TTFTTimeout after the call started ends the call.
			name: "ttft_timeout",
			due: func(s *Stream[T]) (time.Duration, bool) {
				t := s.p.cfg.TTFTTimeout
				return t, s.phase == phaseRace && t > 0 && !s.race.contentSeen
			},
			fire: func(s *Stream[T], now time.Duration) {
				a := s.live()
				if a == nil {
					a = s.attempts[len(s.attempts)-1]
				}
				s.watchdogFired(TimeoutTTFT, a, now)
				s.finish(&TimeoutError{Kind: TimeoutTTFT, After: s.p.cfg.TTFTTimeout, Attempt: a.idx,
					Route: a.route.Name, Model: a.route.Model, ChunksReceived: a.content}, OutcomeTTFTTimeout)
			},
		},
		{
			// Stall watchdog before commit: an attempt whose content
			// stopped StallTimeout ago fails, a transient error (so the
			// error trigger may hedge it).
			name: "attempt_stall_timeout",
			due: func(s *Stream[T]) (time.Duration, bool) {
				st := s.p.cfg.StallTimeout
				at, ok := never, false
				if s.phase != phaseRace || st <= 0 {
					return at, ok
				}
				for _, a := range s.attempts {
					if due := later(a.last, st); !a.done && a.content > 0 && due < at {
						at, ok = due, true
					}
				}
				return at, ok
			},
			fire: func(s *Stream[T], now time.Duration) {
				st := s.p.cfg.StallTimeout
				for _, a := range s.attempts {
					if s.phase != phaseRace {
						return
					}
					if !a.done && a.content > 0 && now >= later(a.last, st) {
						// A Close that lands from here on finds the attempt
						// failed and the watchdog reported; one that landed
						// before finds neither. (Checked once: the report
						// must not precede a cancellation.)
						if s.stopping() {
							return
						}
						s.watchdogFired(TimeoutStall, a, now)
						s.failUnchecked(a, &TimeoutError{Kind: TimeoutStall, After: st, Attempt: a.idx,
							Route: a.route.Name, Model: a.route.Model, ChunksReceived: a.content})
					}
				}
			},
		},
		{
			// Stall watchdog after commit, while the winner's items are
			// relayed: the caller waited StallTimeout in Next since the
			// latest content chunk. (A direct read has its own watchdog.)
			name: "stall_timeout",
			due: func(s *Stream[T]) (time.Duration, bool) {
				st := s.p.cfg.StallTimeout
				return s.out.dueAfter(st, 0), s.phase == phaseRelay && st > 0 && !s.out.ready()
			},
			fire: func(s *Stream[T], now time.Duration) {
				w := s.race.winner
				s.watchdogFired(TimeoutStall, w, now)
				s.finish(s.timeoutOf(TimeoutStall, s.p.cfg.StallTimeout, w), OutcomeStallTimeout)
			},
		},
		{
			// Error: an attempt failed with a transient error before
			// commit; the next one launches at once, or, when every route
			// refuses it and PushbackWait allows, when the first takes it.
			name: "error",
			due: func(s *Stream[T]) (time.Duration, bool) {
				return s.race.errorAt, s.phase == phaseRace && s.race.errorHedge
			},
			fire: func(s *Stream[T], now time.Duration) {
				r := &s.race
				r.errorHedge = false
				if s.hedge(TriggerError, now, 0) && s.live() == nil {
					// Refused on every route with nothing in flight: wait
					// for the first route to take it, when that is soon
					// enough; else the failed attempt's error ends the
					// call, for the caller's retry to take over.
					r.errorAt, r.errorHedge = s.pushbackEnds(now)
				}
				s.endIfNoneLeft(r.lastErr)
			},
		},
		{
			// TTFT hedge: no content from any live attempt within the
			// hedge delay after the latest launch. Content from before
			// that launch does not count: a stall hedge that stays
			// silent is followed by a third attempt, as a slow TTFT
			// hedge is. Once there is content since that launch, the
			// silence is the stall trigger's (see liveContentSince).
			name: "ttft",
			due: func(s *Stream[T]) (time.Duration, bool) {
				latest := s.attempts[len(s.attempts)-1]
				// An error relaunch waiting for a route (PushbackWait) is
				// the call's next attempt: it goes where this would.
				ok := s.phase == phaseRace && s.canLaunch() && !s.liveContentSince(latest.launch) && s.race.ttftSpent != latest.idx &&
					!s.race.errorHedge
				return max(later(latest.launch, latest.delay), s.race.pushedBack), ok
			},
			fire: func(s *Stream[T], now time.Duration) {
				latest := s.attempts[len(s.attempts)-1]
				s.race.ttftSpent = latest.idx
				if s.hedge(TriggerTTFT, now, latest.delay) {
					s.race.ttftSpent = -1 // due again when the pushback ends
				}
			},
		},
		{
			// Stall hedge: the live attempt whose content came last, after
			// the latest launch, has produced none for StallAfter since
			// (once per silence; see stallWatched). It continues that
			// attempt's text when it can (a resume), else starts over.
			name: "stall",
			due: func(s *Stream[T]) (time.Duration, bool) {
				n := s.stallWatched()
				ok := s.phase == phaseRace && s.canLaunch() && s.p.cfg.StallAfter > 0 &&
					n != nil && n.stallSpent != n.last
				if !ok {
					return never, false
				}
				return max(later(n.last, s.p.cfg.StallAfter), s.race.pushedBack), true
			},
			fire: func(s *Stream[T], now time.Duration) {
				n := s.stallWatched()
				spent := n.stallSpent
				n.stallSpent = n.last
				if !s.resumeBeforeCommit(n) && s.hedge(TriggerStall, now, s.p.cfg.StallAfter) {
					n.stallSpent = spent // due again when the pushback ends
				}
			},
		},
		{
			// Resume after commit: the caller waited ResumeAfter in Next
			// since the latest content chunk or resume launch, or the
			// committed stream (or the last resume racing it) failed with a
			// transient error and no attempt is left to carry it on, or the
			// last resume racing the still silent stream failed so.
			name: "resume",
			due: func(s *Stream[T]) (time.Duration, bool) {
				r := &s.race
				// Only once the caller has everything received: the
				// continuation's prefix is what was delivered.
				if s.phase != phaseRelay || !r.resumable || s.out.ready() {
					return never, false
				}
				if r.resumeNow {
					return 0, true
				}
				return s.out.dueAfter(s.p.cfg.ResumeAfter, s.out.resumeMark), !s.race.winner.ended
			},
			fire: func(s *Stream[T], now time.Duration) {
				avoid := s.race.resumeAvoid
				s.race.resumeNow, s.race.resumeAvoid = false, nil
				mark := s.out.resumeMark
				s.out.resumeMark = s.out.silent(now, 0)
				if !s.resumeAfterCommit(avoid) && avoid != nil {
					// The resume at once after a racing resume's failure
					// launched nothing (no other route, or the budget):
					// the cadence stays that of the failed one's launch.
					s.out.resumeMark = mark
				}
				s.endIfNoneLeft(s.race.lastErr)
			},
		},
	}
}

// nextDeadline returns the earliest due of the trigger table.
func (s *Stream[T]) nextDeadline() (time.Duration, bool) {
	d, ok := never, false
	for i := range s.p.triggers {
		if at, due := s.p.triggers[i].due(s); due && at < d {
			d, ok = at, true
		}
	}
	return d, ok
}

// onDeadline fires every trigger whose time has come, in table order,
// each judged on the state the ones before it left. A Close or cancel
// already under way comes first: a watchdog firing after the caller hung
// up would end the call as a timeout and charge its routes with failures.
func (s *Stream[T]) onDeadline() {
	if s.stopping() {
		return
	}
	for i := range s.p.triggers {
		if s.phase == phaseDone {
			return
		}
		t := &s.p.triggers[i]
		now := s.since()
		if at, due := t.due(s); due && now >= at {
			t.fire(s, now)
		}
	}
}

// canLaunch reports whether the call may have one more attempt.
func (s *Stream[T]) canLaunch() bool { return len(s.attempts) < s.p.cfg.MaxAttempts }

// liveContentSince reports whether a live attempt has produced content
// at or after t.
//
// It and stallWatched split the call's silences between the TTFT and the
// stall trigger: while no live attempt has produced content since the
// latest launch, the silence is the TTFT trigger's; once one has, it is
// the stall trigger's.
func (s *Stream[T]) liveContentSince(t time.Duration) bool {
	for _, a := range s.attempts {
		if !a.done && a.content > 0 && a.last >= t {
			return true
		}
	}
	return false
}

// stallWatched returns the attempt the stall hedge watches: the live
// attempt whose content came last, when it came after the latest launch,
// else nil (the silence since that launch is the TTFT trigger's). Not
// simply the newest attempt: an older one that delivers after a newer
// one's launch and then stalls needs a hedge of its own, whether or not
// the newer one has content; and not an attempt whose content predates
// the latest launch, or one silence would be hedged twice, once by each
// trigger (or by this one beside an error hedge, when a newer attempt
// ends and an older one's overdue stall came into view).
func (s *Stream[T]) stallWatched() *attempt[T] {
	var w *attempt[T]
	for _, a := range s.attempts {
		if !a.done && a.content > 0 && (w == nil || a.last >= w.last) {
			w = a
		}
	}
	if w == nil || w.last < s.attempts[len(s.attempts)-1].launch {
		return nil
	}
	return w
}

// pushbackEnds returns when the first route's pushback or ejection ends,
// in time since the call started, and whether the call waits for it: only
// when that end is known and comes within PushbackWait of the failure —
// counted from the failure, not from this refusal, so that calls refused
// again at each end, by others taking the route first, still end —, and
// the relaunch could start before the context's deadline and, while no
// content has come, before TTFTTimeout: a relaunch that cannot even start
// by then would only trade the upstream's error for a timeout. (One that
// starts before them may still meet them: how long its first chunk takes
// is not known.) An empty budget does not stop the wait: calls that start
// meanwhile refill it, and under the simulation's rate limit skipping
// those waits failed a quarter more of the storm's calls than taking the
// chance (docs/decisions.md). An end is unknown when another call's probe
// holds every route that would take the relaunch: the call does not wait
// then.
func (s *Stream[T]) pushbackEnds(now time.Duration) (time.Duration, bool) {
	wait := s.p.cfg.PushbackWait
	if wait <= 0 {
		return 0, false
	}
	at, known := s.p.health.hedgesAdmittedAt(func(i int) string { return s.routes[i].Name }, len(s.routes))
	if !known {
		return 0, false
	}
	end := max(at.Sub(s.start), now+time.Millisecond)
	if end-s.race.errorSince > wait {
		return 0, false
	}
	if dl, ok := s.ctx.Deadline(); ok && !dl.After(s.start.Add(end)) {
		return 0, false
	}
	if t := s.p.cfg.TTFTTimeout; t > 0 && !s.race.contentSeen && end >= t {
		return 0, false
	}
	return end, true
}

// hedge launches a hedge with trigger on the next route health admits. When
// none does (pushback: every route's Retry-After or ejection keeps hedges
// away) it reports pushedBack and sets when the trigger is due again: the
// end of the first route's pushback, or, when no end is known, retry after
// now.
func (s *Stream[T]) hedge(trigger Trigger, now, retry time.Duration) (pushedBack bool) {
	i, ok := s.hedgeRoute()
	if ok {
		s.race.unknownEnd = false
		s.launch(launch[T]{trigger: trigger, route: i})
		return false
	}
	at, known := s.p.health.hedgesAdmittedAt(func(i int) string { return s.routes[i].Name }, len(s.routes))
	// Counted once per pushback: again when a new end is waited for, not
	// at each retry while a probe in flight holds the routes. (An error
	// hedge, never retried, always counts.)
	if retry <= 0 || known || !s.race.unknownEnd {
		s.throttle(trigger, s.routes[s.race.next].Name, ThrottlePushback)
	}
	if retry <= 0 {
		return true // not retried (the error trigger): nothing to schedule
	}
	// Due again when the first route's pushback or ejection ends; a probe
	// in flight holds a route for a time no one knows, so retry after the
	// trigger's own delay.
	s.race.unknownEnd = !known
	s.race.pushedBack = later(now, max(retry, time.Millisecond))
	if known {
		s.race.pushedBack = max(at.Sub(s.start), now+time.Millisecond)
	}
	return true
}
