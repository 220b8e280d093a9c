package hedgeprobe

import "time"

// race is the state of the attempts of a call: the events their reading
// goroutines send, the deadline timer of the trigger table, and who has
// won. The goroutine driving the call owns it.
type race[T any] struct {
	events chan event[T]
	// pending holds events taken from events ahead of their turn (see
	// cancelOthers): they are handled before the channel's.
	pending []event[T]
	timer   *time.Timer
	winner  *attempt[T]
	// next is the index in Stream.routes of the route the next hedge
	// tries first.
	next int
	// resumable: resume is possible for this call (Items.Text, a route
	// that Continues, ResumeAfter on, more than one attempt): after commit
	// the winner's reader relays every item, so a resume can race it.
	resumable   bool
	streaming   bool
	hold        int64
	contentSeen bool // an attempt, live or not, has produced content: the TTFT watchdog is satisfied
	ttftSpent   int  // index of the latest attempt the TTFT trigger fired for; −1 none
	// pushedBack is when a TTFT or stall hedge that pushback refused (every
	// route's Retry-After or ejection kept hedges away) is due again: the
	// trigger stays armed, as the route is avoided only until then.
	pushedBack time.Duration
	// unknownEnd: the latest refusal found no end to wait for (a probe in
	// flight held every route), and re-armed the trigger after its own
	// delay; the retries of such a run are not counted again.
	unknownEnd bool
	errorHedge bool // a transient failure asks for the next attempt at once
	resumeNow  bool // the committed stream, or the last resume racing it, failed: resume at once
	// resumeAvoid is the route of the resume that failed while the
	// stream it raced is still silent: the resume at once goes elsewhere.
	resumeAvoid *Route[T]
	lastErr     error
	throttled   int
	admitted    admission // health's grant for the route just picked: the next attempt's epoch, and whether it probes
	// cannotBuild holds the names of the routes whose Open could not build
	// this call's continuation (ErrCannotContinue): the conversation stays
	// what it is, so asking again would only spend an attempt and a token.
	// By name, as health and refusals are: a route listed twice is one.
	cannotBuild map[string]bool
	// errorAt is when the error relaunch is due: 0, at once, unless every
	// route refused it and the call waits for the first to take it
	// (Config.PushbackWait); errorSince is when the failure that asked
	// for it came, from which the wait is counted.
	errorAt, errorSince time.Duration
}

// step waits for one event or the next deadline of the trigger table and
// acts on it. It reports false when the call ended.
//
// Events and the deadline are taken in the order they happened, by the
// events' arrival times: when the driver was busy, select finds queued
// events and an expired timer ready together and picks one at random, and
// a chunk that arrived in time must not lose to a stale timer (nor a
// chunk that came late win against it).
func (s *Stream[T]) step() bool {
	r := &s.race
	d, due := s.nextDeadline()
	if len(r.pending) > 0 {
		ev, _ := r.queued()
		s.take(ev, d, due)
		return s.phase != phaseDone
	}
	var tc <-chan time.Time
	if due {
		wait := max(d-s.since(), 0)
		if r.timer == nil {
			r.timer = time.NewTimer(wait)
		} else {
			r.timer.Reset(wait)
		}
		tc = r.timer.C
	}
	select {
	case ev := <-r.events:
		s.take(ev, d, due)
	case <-tc:
		s.drain(d)
	case <-s.ctx.Done():
		s.finish(s.ctx.Err(), OutcomeCanceled)
	case <-s.life.closing:
		s.finish(nil, OutcomeCanceled)
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	return s.phase != phaseDone
}

// take handles ev; when the deadline d had passed before ev arrived, it
// acts on the deadline first.
func (s *Stream[T]) take(ev event[T], d time.Duration, due bool) {
	if due && ev.at > d {
		s.onDeadline()
		if s.phase == phaseDone {
			return
		}
	}
	s.handle(ev)
}

// drain runs when the timer of the deadline d fired: it first handles the
// events readers queued before d, without blocking, then acts on the
// deadline unless one of them ended the call.
func (s *Stream[T]) drain(d time.Duration) {
	for s.phase != phaseDone {
		ev, ok := s.race.queued()
		if !ok {
			s.onDeadline()
			return
		}
		if ev.at > d {
			s.take(ev, d, true)
			return
		}
		s.handle(ev)
		if s.out.ready() {
			// The caller has an item to read: it goes first, before a
			// later event (a failure) can end the call; the deadline is
			// judged again at the next step, on the state this left.
			return
		}
	}
}

// queued returns, without waiting, the next event the readers queued:
// those taken ahead of their turn first.
func (r *race[T]) queued() (event[T], bool) {
	if len(r.pending) > 0 {
		ev := r.pending[0]
		r.pending[0] = event[T]{} // the item, for the GC
		r.pending = r.pending[1:]
		return ev, true
	}
	select {
	case ev := <-r.events:
		return ev, true
	default:
		return event[T]{}, false
	}
}

// handle takes one event from a reading goroutine.
func (s *Stream[T]) handle(ev event[T]) {
	a := ev.a
	if a.done {
		return // a cancelled or failed attempt: discarded, never revived
	}
	if s.stopping() {
		return
	}
	if ev.typ == evEnd {
		a.readerEnded = true
		if ev.err != nil {
			s.fail(a, ev.err)
			return
		}
		a.ended = true
		switch {
		case s.phase == phaseRace:
			s.commit(a)
		case a == s.race.winner:
			s.cancelOthers(a) // the committed stream completed: no resume is needed
			s.releaseHeld(a)
		default:
			// A continuation that ended without content: the answer was
			// complete at the prefix, and this attempt says so first.
			s.switchTo(a)
		}
		return
	}
	a.buf = append(a.buf, item[T]{v: ev.v, kind: ev.kind, from: a})
	// The Items functions first: one that panics fails the attempt, whose
	// item then counts neither as content, nor on the span's timeline,
	// nor towards the route's TTFT sketch.
	if ev.kind != Keepalive && s.p.items.OutputTokens != nil {
		if err := s.countTokens(a, ev.v); err != nil {
			s.fail(a, err)
			return
		}
	}
	opens := false
	if ev.kind == Control && a.openAsked && a.content == 0 {
		var err error
		if opens, err = openingSafe(s.p.items.Opening, ev.v); err != nil {
			s.fail(a, err)
			return
		}
		a.buf[len(a.buf)-1].opens = opens
	}
	if a.askFollow && ev.kind != Keepalive {
		// Does the continuation carry the answer's text on, or begin
		// something that follows it (Anthropic: a first block that is
		// not text)? Asked up to its first content, past what closes
		// before it (a server's early usage); what the caller reads of
		// it depends on the answer (continuation, Stream.deliver).
		follows, err := followsSafe(s.p.items.Follows, ev.v)
		if err != nil {
			s.fail(a, err)
			return
		}
		if follows {
			a.follows, a.followAt = true, len(a.buf)-1
		}
		if follows || ev.kind == Content {
			a.askFollow = false
		}
	}
	if a.rec != nil {
		if err := s.record(a, ev.kind, ev.v, s.start.Add(ev.at)); err != nil {
			s.fail(a, err)
			return
		}
	}
	if ev.kind == Content {
		a.content++
		a.last = ev.at
		s.race.contentSeen = true
		if s.rec != nil {
			s.rec.forget() // a new silence reports its skips and throttles anew
		}
		if a.content == 1 {
			a.first, a.firstItem = ev.at, len(a.buf)-1
			for _, it := range a.buf[:a.firstItem] {
				if it.kind == Control {
					a.opening++
				}
			}
			s.p.delays.observe(a.route.Name, a.route.Model, ev.at-a.launch, s.start.Add(ev.at))
		}
	}
	switch {
	case s.phase == phaseRace:
		if s.race.streaming && ev.kind == Content && a.chainContent() >= s.race.hold {
			s.commit(a)
		}
	case a == s.race.winner:
		racing := s.othersLive(a)
		if racing && ev.kind != Content && (ev.kind == Control || len(a.buf) > 1) {
			// A resume races the stalled stream, and only content decides
			// the race (rule 10): a control item (a usage chunk, a
			// finish reason) waits in a.buf for the decision — the
			// stream's next content or its end — and what comes after it,
			// in order. Should the resume win, the caller never sees them.
			return
		}
		if racing && ev.kind == Content {
			// The stalled stream spoke first: every resume racing it loses.
			s.cancelOthers(a)
		}
		s.releaseHeld(a)
	case ev.kind == Content:
		s.switchTo(a)
	}
}

// releaseHeld queues for the caller the items the committed stream a
// holds: its latest, or what it sent while a resume raced it and no
// content had decided the race.
func (s *Stream[T]) releaseHeld(a *attempt[T]) {
	for i := range a.buf {
		s.out.push(a.buf[i])
	}
	clear(a.buf)
	a.buf = a.buf[:0]
}

// commit makes a the winner: every other attempt is cancelled and closed
// for good, and its chain's items are queued for the caller.
func (s *Stream[T]) commit(a *attempt[T]) {
	now := time.Now()
	s.race.winner = a
	s.phase = phaseRelay
	s.obs.commit(CommitEvent{Context: s.ctx, Attempt: a.idx, Route: a.route.Name, Provider: a.route.Provider,
		Model: a.route.Model, Elapsed: now.Sub(s.start)})
	s.cancelOthers(a)
	s.out.replace(chainItems(a))
	a.buf = a.buf[:0]
}

// switchTo makes the resume attempt a the winner after commit: it
// delivered its first content chunk, or ended without content, before the
// stalled stream spoke again (docs/design.md §2 rule 10). The stalled
// stream is cancelled; what it still had pending (keepalives, and control
// items held for the race's decision: its content would have won) is
// dropped.
func (s *Stream[T]) switchTo(a *attempt[T]) {
	now := time.Now()
	s.race.winner = a
	s.obs.commit(CommitEvent{Context: s.ctx, Attempt: a.idx, Route: a.route.Name, Provider: a.route.Provider,
		Model: a.route.Model, Elapsed: now.Sub(s.start)})
	s.cancelOthers(a)
	s.out.replace(continuation(a))
	a.buf = a.buf[:0]
}

// othersLive reports a live attempt other than keep.
func (s *Stream[T]) othersLive(keep *attempt[T]) bool {
	for _, b := range s.attempts {
		if b != keep && !b.done {
			return true
		}
	}
	return false
}

// takeQueued moves what the readers queued to pending, without waiting. A
// reader the queue had blocked may queue again meanwhile: the queue's size
// bounds the taking.
func (r *race[T]) takeQueued() {
	for range cap(r.events) {
		select {
		case ev := <-r.events:
			r.pending = append(r.pending, ev)
		default:
			return
		}
	}
}

// cancelOthers cancels every live attempt but keep: it lost a race.
//
// The losers' items that their readers queued before now arrived before
// the race was decided, though the driver gets to them only now (it runs
// when the caller calls Next): they are recorded first, as received and
// never delivered, as at a hang-up (recordQueued), so a loser's span and
// Stats say what its upstream sent. What keep queued waits its turn. With
// no live loser — the committed stream's every chunk comes here — the
// queue is left alone: taking from it would let keep's reader run ahead
// of the caller without bound.
func (s *Stream[T]) cancelOthers(keep *attempt[T]) {
	if !s.othersLive(keep) {
		return
	}
	now := time.Now()
	r := &s.race
	r.takeQueued()
	kept := r.pending[:0]
	for _, ev := range r.pending {
		if ev.a == keep {
			kept = append(kept, ev)
		} else {
			s.arrived(ev, now)
		}
	}
	clear(r.pending[len(kept):]) // the items, for the GC
	r.pending = kept
	for _, b := range s.attempts {
		if b == keep || b.done {
			continue
		}
		s.end(b, AttemptCanceled, nil, now, true)
	}
}
