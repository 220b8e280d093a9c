package hedgeprobe

import (
	"time"
)

// delivery is what the caller has been given and is about to be given:
// the committed chain's items not yet returned, the counts, the caller's
// silence clock and the text a resume would continue.
type delivery[T any] struct {
	pending []item[T]
	pos     int

	delivered int64 // content chunks returned
	items     int64 // items returned
	ttfc      time.Duration

	// The silence clock after commit, in time since the call started:
	// only the caller's waits in Next count, summed since the latest
	// content chunk (a slow consumer is not a stalled upstream). enter is
	// when the current wait began, waited the sum of earlier waits, and
	// resumeMark the sum at the latest resume launch (or skip), from which
	// the next resume is counted.
	enter      time.Duration
	waited     time.Duration
	resumeMark time.Duration

	text transcript
	// last is the latest content item returned, while a continuation may
	// need it as its answer (Items.Relabel).
	last T
}

func (d *delivery[T]) ready() bool { return d.pos < len(d.pending) }

func (d *delivery[T]) push(it item[T]) { d.pending = append(d.pending, it) }

// replace drops what is pending and queues items instead.
func (d *delivery[T]) replace(items []item[T]) {
	clear(d.pending)
	d.pending, d.pos = append(d.pending[:0], items...), 0
}

// waitFrom starts a wait of the caller at now.
func (d *delivery[T]) waitFrom(now time.Duration) { d.enter = now }

// silent returns how long the caller has waited, up to now, since the
// latest content chunk (and since mark).
func (d *delivery[T]) silent(now, mark time.Duration) time.Duration {
	return d.waited + (now - d.enter) - mark
}

// dueAfter returns when the caller's waits since the latest content chunk
// (less mark) reach after.
func (d *delivery[T]) dueAfter(after, mark time.Duration) time.Duration {
	return later(d.enter-(d.waited-mark), after)
}

// deliver returns the next pending item to the caller.
func (s *Stream[T]) deliver() bool {
	d := &s.out
	it := d.pending[d.pos]
	d.pending[d.pos] = item[T]{}
	d.pos++
	if d.pos == len(d.pending) {
		d.pending, d.pos = d.pending[:0], 0
	}
	if items := &s.p.items; (items.Relabel != nil || items.RelabelAfter != nil) && s.race.resumable {
		if a := it.from; a.trigger == TriggerResume {
			relabel := items.Relabel
			if a.follows && items.RelabelAfter != nil {
				relabel = items.RelabelAfter
			}
			// The continuation's items come after everything of the answer
			// it continues: its answer is the latest content returned.
			if a.answer == nil {
				answer := d.last
				a.answer = &answer
			}
			if relabel != nil {
				v, err := relabelSafe(relabel, *a.answer, it.v)
				if err != nil {
					s.finish(err, OutcomeError)
					return false
				}
				it.v = v
			}
		}
		if it.kind == Content {
			d.last = it.v
		}
	}
	if it.kind == Content && s.race.resumable {
		// Before anything counts the item as delivered: a panic in Text
		// ends the call, and the item never reaches the caller.
		text, ok, err := textSafe(s.p.items.Text, it.v)
		if err != nil {
			s.finish(err, OutcomeError)
			return false
		}
		d.text.appendText(text, ok)
	} else if it.kind == Control && s.race.resumable {
		d.text.closeAnswer()
	}
	s.cur = it.v
	d.items++
	now := s.since()
	if it.kind == Content {
		d.delivered++
		it.from.shown++
		if d.delivered == 1 {
			d.ttfc = now
		}
		if s.rec != nil {
			s.rec.delivered(s.start.Add(now))
		}
		d.waited, d.resumeMark = 0, 0
	} else {
		d.waited += now - d.enter
	}
	return true
}

// direct is the read of the winner's Source on the caller's goroutine
// after a Streaming commit when no resume is possible: no channel, no
// lock, no allocation per chunk.
type direct[T any] struct {
	src      Source[T]
	inSource bool // the caller's goroutine is in a method of src
	wd       *watchdog
}

// toDirect hands the winner's Source to the caller's goroutine: its
// reading goroutine stops at the handoff, and the stall watchdog, when
// StallTimeout is set, starts counting the caller's waits.
func (s *Stream[T]) toDirect() {
	w := s.race.winner
	s.phase = phaseDirect
	s.direct.src = w.source()
	close(w.handoff)
	if st := s.p.cfg.StallTimeout; st > 0 {
		s.direct.wd = newWatchdog(st, s.start, w.release)
	}
}

// nextDirect is the hot path after a Streaming commit: it reads the
// winner's source on the caller's goroutine. The stall watchdog costs a
// clock read, an atomic load and two compare-and-swaps per content chunk
// (two clock reads per other item), and only when StallTimeout is set.
func (s *Stream[T]) nextDirect() bool {
	dr := &s.direct
	var from time.Duration
	if dr.wd != nil {
		from = dr.wd.enter()
	}
	dr.inSource = true
	if !dr.src.Next() {
		dr.inSource = false
		return s.endDirect()
	}
	v := dr.src.Current()
	dr.inSource = false
	k, err := s.classifySafe(v)
	if err != nil {
		s.finish(err, OutcomeError)
		return false
	}
	// The item and the watchdog race for the wait it ends: an item that
	// lost was not on time, and the stall stands.
	if dr.wd != nil {
		onTime := false
		if k == Content {
			onTime = dr.wd.content(from)
		} else {
			onTime = dr.wd.away(from)
		}
		if !onTime {
			return s.endDirect()
		}
	}
	a := s.race.winner
	// The Items functions first: one that panics fails the call, and an
	// item the caller never gets must count neither as delivered nor on
	// the span's timeline.
	if k != Keepalive && s.p.items.OutputTokens != nil {
		if err := s.countTokens(a, v); err != nil {
			s.finish(err, OutcomeError)
			return false
		}
	}
	if a.rec != nil {
		if err := s.record(a, k, v, time.Now()); err != nil {
			s.finish(err, OutcomeError)
			return false
		}
	}
	if k == Content {
		a.content++
		a.shown++
		s.out.delivered++
		if s.rec != nil {
			s.rec.delivered(time.Now())
		}
	}
	s.cur = v
	s.out.items++
	return true
}

// endDirect ends the call when the winner's source stopped.
func (s *Stream[T]) endDirect() bool {
	a := s.race.winner
	dr := &s.direct
	switch {
	case s.stopping():
		// A Close or cancel under way comes first, as in the race.
	case dr.wd != nil && dr.wd.fired():
		err := &TimeoutError{
			Kind: TimeoutStall, After: s.p.cfg.StallTimeout, Attempt: a.idx,
			Route: a.route.Name, Model: a.route.Model,
			ChunksReceived: a.content, ChunksDelivered: s.out.delivered, Truncated: s.out.delivered > 0,
		}
		s.watchdogFired(TimeoutStall, a, dr.wd.firedAfter())
		s.finish(err, OutcomeStallTimeout)
	default:
		dr.inSource = true
		err := dr.src.Err()
		dr.inSource = false
		if err = vetError(a.route.Name, err); err != nil {
			// As on the relay and before commit: a Source that is itself a
			// Stream can end with its own TimeoutError.
			s.finish(err, outcomeOf(err))
		} else {
			s.finish(nil, OutcomeOK)
		}
	}
	return false
}

// record puts an item's arrival on the attempt's span, after asking the
// Items functions that describe the response about it: one that panics
// fails the attempt, and its item stays off the timeline as it stays out
// of the chunk count.
func (s *Stream[T]) record(a *attempt[T], k Kind, v T, at time.Time) error {
	it := &s.p.items
	if it.ResponseModel != nil && a.rec.model == "" || it.ResponseID != nil && a.rec.id == "" ||
		k != Keepalive && (it.InputTokens != nil || it.FinishReasons != nil) {
		if err := s.describe(a, k, v); err != nil {
			return err
		}
	}
	switch k {
	case Content:
		a.rec.content(at)
	case Keepalive:
		a.rec.keepalive(at)
	}
	return nil
}

// describe asks the Items functions that feed the attempt span alone
// about v: ResponseModel and ResponseID until they report ok,
// InputTokens and FinishReasons on every item but a keepalive. A panic
// becomes an error wrapping ErrExtractorPanic.
func (s *Stream[T]) describe(a *attempt[T], k Kind, v T) (err error) {
	var asking string
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrExtractorPanic, asking, r)
		}
	}()
	it, rec := &s.p.items, a.rec
	if it.ResponseModel != nil && rec.model == "" {
		asking = "response model"
		if m, ok := it.ResponseModel(v); ok {
			rec.model = m
		}
	}
	if it.ResponseID != nil && rec.id == "" {
		asking = "response id"
		if id, ok := it.ResponseID(v); ok {
			rec.id = id
		}
	}
	if k == Keepalive {
		return nil
	}
	if it.InputTokens != nil {
		asking = "input tokens"
		if n, ok := it.InputTokens(v); ok {
			rec.inTokens, rec.hasIn = n, true
		}
	}
	if it.FinishReasons != nil {
		asking = "finish reasons"
		if rec.onFinish == nil {
			rec.onFinish = rec.finished // one closure per attempt
		}
		it.FinishReasons(v, rec.onFinish)
	}
	return nil
}

// countTokens asks Items.OutputTokens about v; a panic becomes an error
// wrapping ErrExtractorPanic.
func (s *Stream[T]) countTokens(a *attempt[T], v T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrExtractorPanic, "token count", r)
		}
	}()
	if n, ok := s.p.items.OutputTokens(v); ok {
		a.tokens, a.hasTokens = n, true
		if a.rec != nil {
			a.rec.tokens, a.rec.hasTokens = n, true
		}
	}
	return nil
}
