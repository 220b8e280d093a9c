package hedgeprobe

import (
	"context"
	"time"
)

// Launching attempts: the primary on the first healthy route, hedges round
// robin on the routes health admits, each but the primary paid for with a
// budget token.

// begin starts the call: budget refill, call span, primary attempt.
func (s *Stream[T]) begin() bool {
	s.start = time.Now()
	if s.initErr != nil {
		// Through finish, which closes finished: a later Close or Next
		// waits on it. Nothing started, so nothing else is done.
		s.finish(s.initErr, OutcomeError)
		return false
	}
	cfg := &s.p.cfg
	s.p.budget.refill()
	ctx, rec := s.p.tel.startCall(s.ctx, s.start, s.routes[0].Model, cfg.Delivery)
	if rec != nil {
		s.rec = rec
		s.obs = append(s.obs, rec)
	}
	if s.p.hooks.any() {
		s.obs = append(s.obs, &s.p.hooks)
	}
	ctx, cancel := context.WithCancel(ctx)
	s.life.mu.Lock()
	s.callCtx, s.life.cancel = ctx, cancel
	s.life.mu.Unlock()
	r := &s.race
	r.streaming = cfg.Delivery == Streaming
	r.hold = int64(max(cfg.HoldChunks, 1))
	r.resumable = cfg.ResumeAfter > 0 && s.p.items.Text != nil && cfg.MaxAttempts > 1 && anyContinues(s.routes)
	// Four queued events per attempt let the reading goroutines run a
	// little ahead of the race; the queue is allocated with every call, and
	// past three attempts (a primary, a hedge, a resume) a call seldom has
	// more live at once, so it stops growing there.
	r.events = make(chan event[T], 4*min(cfg.MaxAttempts, 3))
	s.out.text.max = cfg.ResumeMaxText
	s.phase = phaseRace
	if err := s.ctx.Err(); err != nil {
		// The caller gave up before the call began: no upstream is asked
		// (Route.Open with a dead context would send nothing, but would
		// still count as an attempt, take a route's probe, and end a span).
		s.finish(err, OutcomeCanceled)
		return false
	}
	if !s.launch(launch[T]{trigger: TriggerPrimary, route: s.primary()}) {
		s.finish(nil, OutcomeCanceled)
		return false
	}
	return true
}

// primary picks the route of the primary attempt: the first healthy one in
// the caller's order, or, when every route is ejected, the one whose
// ejection ends first (a call never fails for lack of a healthy route).
func (s *Stream[T]) primary() int {
	now := time.Now()
	for i := range s.routes {
		if s.admit(s.routes[i].Name, now, true) {
			s.skipped(now, i, i)
			return i
		}
	}
	// Every route is ejected: the one whose ejection ends first is used,
	// so it is not one the call passed over.
	use, adm := s.p.health.soonest(func(i int) string { return s.routes[i].Name }, len(s.routes))
	s.race.admitted = adm
	s.skipped(now, use, len(s.routes))
	return use
}

// admit reports whether route health lets an attempt go to the route name
// now (primary: as the call's first); the admission granted is the next
// launch's. A route whose entry admitting it forgot as idle, ejected, is
// restored without a probe: the listener hears it, and this call's span
// does not, as no stream of it restored the route.
func (s *Stream[T]) admit(name string, now time.Time, primary bool) bool {
	ok, adm := s.p.health.admit(name, now, primary)
	if adm.restored != 0 {
		s.p.hooks.restore(RouteEvent{Context: s.ctx, Route: name, Seq: adm.restored}, now)
	}
	if ok {
		s.race.admitted = adm
	}
	return ok
}

// skipped reports the routes before end, but use, as passed over.
func (s *Stream[T]) skipped(now time.Time, use, end int) {
	for j := range end {
		if j != use {
			s.obs.routeSkipped(s.routes[j].Name, now)
		}
	}
}

// launch describes an attempt to start.
type launch[T any] struct {
	trigger Trigger
	route   int // index in Stream.routes
	// Resume only: the stalled attempt continued; before commit, the
	// part of its items that comes first (parent); the text; the chunks
	// delivered.
	of            *attempt[T]
	parent        *attempt[T]
	parentItems   int
	parentContent int64
	prefix        string
	delivered     int64
}

// launch starts an attempt; false when the Stream is closing or the
// budget refused it (then counted and reported).
func (s *Stream[T]) launch(l launch[T]) bool {
	route := &s.routes[l.route]
	var a *attempt[T]
	refused := false
	// An admission whose attempt never started (the Stream is closing, the
	// budget refused it, or a span processor panicked in add) is given
	// back: a probe's, else the route would wait for its verdict for good,
	// and its place in health's count, else no grace period would end.
	defer func() {
		if a == nil {
			if s.race.admitted.probe {
				s.p.health.abandon(route.Name, s.race.admitted.epoch)
			}
			s.p.health.leave(&s.race.admitted)
		}
		s.race.admitted = admission{}
	}()
	if !s.life.closeReq.Load() {
		a, refused = s.add(l, route, time.Now())
	}
	if refused {
		s.throttle(l.trigger, route.Name, ThrottleBudget)
		return false
	}
	if a == nil {
		return false
	}
	s.race.next = (l.route + 1) % len(s.routes)
	go s.run(a)
	n := len(s.attempts)
	switch l.trigger {
	case TriggerPrimary:
	case TriggerResume:
		s.obs.resume(ResumeEvent{Context: s.ctx, Attempt: a.idx, Of: l.of.idx, Route: route.Name,
			DeliveredChunks: l.delivered, Elapsed: a.launch})
	default:
		delay := s.attempts[n-2].delay
		s.obs.hedge(HedgeEvent{Context: s.ctx, Attempt: a.idx, Route: route.Name, Provider: route.Provider,
			Model: route.Model, Trigger: l.trigger, Delay: delay, Elapsed: a.launch})
	}
	return true
}

// add creates the attempt and adds it to the call. It holds life.mu
// throughout, so a Close either comes first, and then no budget token is
// taken and no attempt span started, or sees the attempt and releases it.
// It returns nil when the Stream is closing or, with refused, when the
// budget refused a hedge or resume.
func (s *Stream[T]) add(l launch[T], route *Route[T], now time.Time) (a *attempt[T], refused bool) {
	s.life.mu.Lock()
	defer s.life.mu.Unlock() // deferred: a span processor may panic in Start
	if s.life.closed {
		return nil, false
	}
	started := false
	if l.trigger != TriggerPrimary {
		var keep float64
		if l.trigger == TriggerTTFT {
			keep = s.p.budget.reserve
		}
		if !s.p.budget.take(keep) {
			return nil, true
		}
		// A span processor that panics in Start below launches nothing:
		// the token goes back, as the admission does (see launch).
		defer func() {
			if !started {
				s.p.budget.giveBack()
			}
		}()
	}
	a = &attempt[T]{
		idx: len(s.attempts), route: route, trigger: l.trigger,
		launchAt: now, adm: s.race.admitted,
		launch: now.Sub(s.start), stallSpent: -1, closed: make(chan struct{}),
		prefix: l.prefix, of: l.of, parent: l.parent, parentItems: l.parentItems, parentContent: l.parentContent,
		delivered: l.delivered, firstItem: -1,
		openAsked: l.trigger == TriggerResume && s.p.items.Opening != nil,
		// Follows needs Opening: it is asked while the items open.
		askFollow: l.trigger == TriggerResume && s.p.items.Opening != nil && s.p.items.Follows != nil,
	}
	if s.p.cfg.HedgeAfter > 0 {
		a.delay = s.p.cfg.HedgeAfter
	} else {
		a.delay = s.p.delays.delay(route.Name, route.Model, now)
	}
	ctx := s.callCtx
	if s.rec != nil {
		ctx, a.rec = s.rec.attempt(ctx, a.idx, &routeNames{route.Name, route.Provider, route.Model, route.ServerAddress, route.ServerPort}, l.trigger, a.launch, l.delivered, now)
	}
	a.ctx, a.cancel = context.WithCancel(context.WithValue(ctx, attemptKey{}, a.idx))
	if s.race.streaming && !s.race.resumable {
		a.handoff = make(chan struct{})
	}
	// The epoch is the admission's, not now's: an attempt admitted before
	// an ejection that came before its launch is stale (see admission).
	// The attempt holds it from here; not before, as Start above may
	// panic, and launch gives it back then.
	s.race.admitted = admission{}
	s.attempts = append(s.attempts, a)
	s.life.wg.Add(1)
	started = true
	return a, false
}

func (s *Stream[T]) throttle(trigger Trigger, route string, reason ThrottleReason) {
	s.race.throttled++
	s.obs.throttle(ThrottleEvent{Context: s.ctx, Attempt: len(s.attempts), Route: route, Trigger: trigger,
		Reason: reason, Elapsed: s.since()})
}

// hedgeRoute returns the route for a hedge: the next one, round robin,
// that health admits; ok false when none does (the caller counts the
// throttle).
func (s *Stream[T]) hedgeRoute() (int, bool) {
	now := time.Now()
	for i := range s.routes {
		j := (s.race.next + i) % len(s.routes)
		if s.admit(s.routes[j].Name, now, false) {
			return j, true
		}
	}
	return 0, false
}
