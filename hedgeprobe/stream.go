package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

type phase uint8

const (
	phaseNew    phase = iota // Next not called yet: nothing started
	phasePre                 // attempts racing, nothing committed
	phaseBuffer              // committed: delivering the winner's buffered items
	phaseDirect              // committed with Streaming: Next reads the winner's source
	phaseDone                // ended; Err says how
)

// Stream is one hedged, watchdogged call. It is a Source: read it with
// Next and Current until Next reports false, then check Err. The call
// starts at the first Next. Close ends it early, is idempotent, may be
// called from other goroutines to unblock a Next, and happens on its own
// when Next reports false. Except for Close, a Stream is not safe for
// concurrent use; Err and Stats say when they may be read.
type Stream[T any] struct {
	p         *Prober[T]
	ctx       context.Context
	routes    []Route[T]
	classify  Classifier[T]
	streaming bool
	hold      int64
	initErr   error

	// active is 0 when no Next runs, 1 while one does, 2 once Close has
	// ended the call; whoever moves it to 2 finishes the call. A Next or
	// Close that finds the other side active waits on finished, which
	// finish closes once the call has ended (outcome set, spans ended,
	// hooks called, goroutines exited): that wait is what makes Err and
	// Stats safe to read after Next reports false or Close returns.
	active   atomic.Int32
	finished chan struct{}
	// closeReq is set by the first Close, which then cancels and releases
	// every attempt and closes closing; a later Close waits on closing.
	// (A channel, not a sync.Once: a goroutine blocked on a mutex would
	// keep a synctest bubble from advancing.)
	closeReq atomic.Bool
	closing  chan struct{}
	wg       sync.WaitGroup

	// mu guards attempts appends, closed and cancel against Close.
	mu       sync.Mutex
	closed   bool
	attempts []*attempt[T]
	cancel   context.CancelFunc

	// Owned by the goroutine driving the Stream.
	phase       phase
	cur         T
	err         error
	outcome     Outcome
	start       time.Time
	callCtx     context.Context
	events      chan event[T]
	timer       *time.Timer
	winner      *attempt[T]
	winnerEnded bool // the winner committed at its clean end: the call ends with its buffer
	src         Source[T]
	inSource    bool // the caller's goroutine is in a method of src
	bufPos      int
	ttftSpent   int
	contentSeen bool // an attempt, live or not, has produced content: the TTFT watchdog is satisfied
	throttled   int
	delivered   int64
	items       int64
	ttfc        time.Duration
	rec         *callRecorder

	// Stall watchdog after commit (Streaming). Only the time the caller
	// spends waiting inside Next counts, summed since the latest content
	// chunk: waited is that sum up to the latest item. wait is, while the
	// caller waits in Next, the stall clock's origin in ns since start
	// (the Next's entry minus waited), and while the caller is away
	// between Next calls, -1-waited. The timer is lazy: it is never reset
	// per chunk; when it fires it re-arms itself for the time left
	// (StallTimeout-waited while the caller is away). Its scheduled time
	// never exceeds the deadline origin+StallTimeout of a wait, because
	// the origin only moves forward (a Next's entry is after the item
	// that ended the previous wait) and a re-arm while the caller is away
	// is at most StallTimeout-waited from then.
	wd      *time.Timer
	wdOff   atomic.Bool
	wait    atomic.Int64
	waited  time.Duration // owned by the caller's goroutine
	fired   atomic.Bool
	firedAt atomic.Int64
}

// Stream returns a call over routes: the primary goes to routes[0], each
// hedge to the next route (round robin). Nothing starts before the first
// Next. Invalid routes (none, or one without Name or Open) make the first
// Next report false with the error in Err. ctx bounds the whole call.
func (p *Prober[T]) Stream(ctx context.Context, routes ...Route[T]) *Stream[T] {
	if ctx == nil {
		ctx = context.Background()
	}
	s := &Stream[T]{
		p:         p,
		ctx:       ctx,
		routes:    append([]Route[T](nil), routes...),
		classify:  p.classify,
		streaming: p.cfg.Delivery == Streaming,
		hold:      int64(max(p.cfg.HoldChunks, 1)),
		closing:   make(chan struct{}),
		finished:  make(chan struct{}),
		ttftSpent: -1,
	}
	s.initErr = validateRoutes(routes)
	return s
}

// Next advances to the next item of the committed attempt, starting the
// call on the first use and waiting (racing hedges) until an attempt
// commits. It reports false at the end of the stream, on error, on
// timeout and after Close; it reports false only once the call has
// finished, also when a Close on another goroutine finishes it.
func (s *Stream[T]) Next() (ok bool) {
	if !s.active.CompareAndSwap(0, 1) {
		// Close owns the call (Next never runs concurrently with itself).
		<-s.finished
		return false
	}
	defer s.endNext(&ok)
	if s.phase == phaseDirect && !s.closeReq.Load() {
		return s.nextDirect()
	}
	return s.nextSlow()
}

// endNext gives the Stream back as Next returns, and finishes the call if
// Close came meanwhile; it runs deferred, so a panic cannot leave the
// Stream owned by a Next that is gone (Close could then never finish the
// call). A panic of the committed Source fails the call with
// ErrSourcePanic, as it would before commit; any other panic goes on to
// the caller once the Stream is given back, and Close ends the call.
func (s *Stream[T]) endNext(ok *bool) {
	if r := recover(); r != nil {
		if !s.inSource {
			s.giveBack()
			panic(r)
		}
		s.inSource = false
		*ok = false
		s.finish(sourcePanic(s.winner, r), OutcomeError)
	}
	s.giveBack()
}

// giveBack ends a Next's ownership of the Stream.
func (s *Stream[T]) giveBack() {
	s.active.Store(0)
	if s.closeReq.Load() && s.active.CompareAndSwap(0, 2) {
		s.finish(nil, OutcomeCanceled)
	}
}

// Current returns the item Next advanced to.
func (s *Stream[T]) Current() T { return s.cur }

// Err returns the error that ended the call: nil at a clean end and after
// the caller's Close, a *TimeoutError from a watchdog, the caller's
// context error, or the error of the attempt that ended the call.
//
// Err is final, and safe to call, on the goroutine that called Next once
// Next has reported false, and on a goroutine that called Close once
// Close has returned. Between Next calls it is safe only while no Close
// may be running on another goroutine (it then reports nil).
func (s *Stream[T]) Err() error { return s.err }

// Close ends the call: every attempt is cancelled and closed, and Close
// returns once the call has finished: outcome set, every span ended, every
// listener hook called and every goroutine of the call exited. When a Next
// runs on another goroutine, that Next finishes the call as it returns and
// Close waits for it. Close is idempotent, may be called from several
// goroutines at once, and always returns nil. It must not be called from a
// listener hook (the hook runs inside the Next or Close it would wait for).
func (s *Stream[T]) Close() error {
	if s.closeReq.CompareAndSwap(false, true) {
		s.mu.Lock()
		s.closed = true
		atts := s.attempts
		cancel := s.cancel
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		for _, a := range atts {
			a.release()
		}
		close(s.closing)
	} else {
		<-s.closing
	}
	if s.active.CompareAndSwap(0, 2) {
		s.finish(nil, OutcomeCanceled)
	} else {
		// A Next, or another Close, owns the call and finishes it.
		<-s.finished
	}
	s.wg.Wait()
	return nil
}

// All returns the items as an iterator: single use, it starts the call
// lazily, yields each item with a nil error, ends after yielding the
// call's error (with a zero item) if there is one, and closes the Stream
// when the loop ends.
func (s *Stream[T]) All() iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		defer s.Close()
		for s.Next() {
			if !yield(s.Current(), nil) {
				return
			}
		}
		if err := s.Err(); err != nil {
			var zero T
			yield(zero, err)
		}
	}
}

func (s *Stream[T]) since() time.Duration { return time.Since(s.start) }

// nextDirect is the hot path after a Streaming commit: it reads the
// winner's source on the caller's goroutine. No channel, no lock, no
// allocation; the stall watchdog costs a clock read and two atomic stores
// per content chunk (two clock reads per other item), and only when
// StallTimeout is set.
func (s *Stream[T]) nextDirect() bool {
	var from time.Duration
	if s.wd != nil {
		from = time.Since(s.start) - s.waited
		s.wait.Store(int64(from))
	}
	s.inSource = true
	if !s.src.Next() {
		s.inSource = false
		return s.endDirect()
	}
	v := s.src.Current()
	s.inSource = false
	k, err := s.classifySafe(v)
	if err != nil {
		s.finish(err, OutcomeError)
		return false
	}
	if s.fired.Load() {
		return s.endDirect()
	}
	a := s.winner
	if a.rec != nil {
		if err := s.record(a, k, v, time.Now()); err != nil {
			s.finish(err, OutcomeError)
			return false
		}
	}
	switch k {
	case Content:
		a.content++
		s.delivered++
		if s.wd != nil {
			s.waited = 0
			s.wait.Store(-1)
		}
	case Control:
		if s.p.tokens != nil {
			if err := s.countTokens(a, v); err != nil {
				s.finish(err, OutcomeError)
				return false
			}
		}
	}
	if k != Content && s.wd != nil {
		// The caller goes away with a keepalive or control item: its wait
		// so far stays on the clock, its time away does not.
		s.waited = time.Since(s.start) - from
		s.wait.Store(-1 - int64(s.waited))
	}
	s.cur = v
	s.items++
	return true
}

// record puts an item's arrival on the attempt's span. It returns the
// error of a panicking response-model function.
func (s *Stream[T]) record(a *attempt[T], k Kind, v T, at time.Time) error {
	switch k {
	case Content:
		a.rec.content(at)
	case Keepalive:
		a.rec.keepalive(at)
	}
	if s.p.model != nil && a.rec.model == "" {
		return s.responseModel(a, v)
	}
	return nil
}

// responseModel asks the WithResponseModel function about v; a panic
// becomes an error wrapping ErrExtractorPanic.
func (s *Stream[T]) responseModel(a *attempt[T], v T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: response model: %v", ErrExtractorPanic, r)
		}
	}()
	if m, ok := s.p.model(v); ok {
		a.rec.model = m
	}
	return nil
}

// countTokens asks the WithTokenCount function about v; a panic becomes
// an error wrapping ErrExtractorPanic.
func (s *Stream[T]) countTokens(a *attempt[T], v T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: token count: %v", ErrExtractorPanic, r)
		}
	}()
	if n, ok := s.p.tokens(v); ok {
		a.tokens, a.hasTokens = n, true
	}
	return nil
}

// endDirect ends the call when the winner's source stopped.
func (s *Stream[T]) endDirect() bool {
	a := s.winner
	switch {
	case s.fired.Load():
		err := &TimeoutError{
			Kind: TimeoutStall, After: s.p.cfg.StallTimeout, Attempt: a.idx,
			Route: a.route.Name, Model: a.route.Model,
			ChunksReceived: a.content, ChunksDelivered: s.delivered, Truncated: s.delivered > 0,
		}
		s.watchdogFired(TimeoutStall, a, time.Duration(s.firedAt.Load()))
		s.finish(err, OutcomeStallTimeout)
	case s.closeReq.Load():
		s.finish(nil, OutcomeCanceled)
	case s.ctx.Err() != nil:
		s.finish(s.ctx.Err(), OutcomeCanceled)
	default:
		s.inSource = true
		err := s.src.Err()
		s.inSource = false
		if err != nil {
			s.finish(err, OutcomeError)
		} else {
			s.finish(nil, OutcomeOK)
		}
	}
	return false
}

// watchdog is the stall watchdog's timer function (see Stream.wd).
func (s *Stream[T]) watchdog() {
	if s.wdOff.Load() {
		return
	}
	st := s.p.cfg.StallTimeout
	w := s.wait.Load()
	now := time.Since(s.start)
	left := time.Duration(w) + st - now
	if w < 0 { // the caller is away
		left = st - time.Duration(-1-w)
	}
	if left > 0 {
		s.wd.Reset(left)
		return
	}
	// The caller's waits add up to StallTimeout: the stall is real, even
	// when this function ran late and the caller is away by now.
	if s.fired.CompareAndSwap(false, true) {
		s.firedAt.Store(int64(now))
		s.winner.release() // unblocks the caller's Next
	}
}

func (s *Stream[T]) nextSlow() bool {
	switch s.phase {
	case phaseDone:
		return false
	case phaseNew:
		if !s.begin() {
			return false
		}
	}
	if s.closeReq.Load() {
		s.finish(nil, OutcomeCanceled)
		return false
	}
	if s.phase == phasePre && !s.await() {
		return false
	}
	switch s.phase {
	case phaseBuffer:
		return s.nextBuffered()
	case phaseDirect:
		return s.nextDirect()
	}
	return false
}

// begin starts the call: budget refill, call span, primary attempt.
func (s *Stream[T]) begin() bool {
	s.start = time.Now()
	if s.initErr != nil {
		s.phase = phaseDone
		s.err, s.outcome = s.initErr, OutcomeError
		return false
	}
	s.p.budget.refill()
	ctx, rec := s.p.tel.startCall(s.ctx, s.start, s.routes[0].Model, s.p.cfg.Delivery)
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.callCtx, s.cancel = ctx, cancel
	s.mu.Unlock()
	s.rec = rec
	s.events = make(chan event[T], 4*s.p.cfg.MaxAttempts)
	s.phase = phasePre
	if !s.launch(TriggerPrimary) {
		s.finish(nil, OutcomeCanceled)
		return false
	}
	return true
}

// launch starts the next attempt; false when it was throttled or the
// Stream is closing.
func (s *Stream[T]) launch(trigger Trigger) bool {
	if s.closeReq.Load() {
		return false
	}
	n := len(s.attempts)
	now := time.Now()
	route := &s.routes[n%len(s.routes)]
	if trigger != TriggerPrimary {
		route = nil
		for i := range s.routes {
			r := &s.routes[(n+i)%len(s.routes)]
			if !s.p.pushback.blocked(r.Name, now) {
				route = r
				break
			}
		}
		if route == nil {
			s.throttle(trigger, s.routes[n%len(s.routes)].Name, ThrottlePushback)
			return false
		}
	}
	a, refused := s.add(n, route, trigger, now)
	if refused {
		s.throttle(trigger, route.Name, ThrottleBudget)
		return false
	}
	if a == nil {
		return false
	}
	go s.run(a)
	if trigger != TriggerPrimary {
		if s.rec != nil {
			s.rec.hedge(a.idx, trigger, route.Name, s.attempts[n-1].delay, now)
		}
		if f := s.p.opts.onHedge; f != nil {
			notify(f, HedgeEvent{Attempt: a.idx, Route: route.Name, Provider: route.Provider, Model: route.Model,
				Trigger: trigger, Delay: s.attempts[n-1].delay, Elapsed: a.launch})
		}
	}
	return true
}

// add creates attempt n on route and adds it to the call. It holds mu
// throughout, so a Close either comes first, and then no budget token is
// taken and no attempt span started, or sees the attempt and releases it.
// It returns nil when the Stream is closing or, with refused, when the
// budget refused a hedge.
func (s *Stream[T]) add(n int, route *Route[T], trigger Trigger, now time.Time) (a *attempt[T], refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock() // deferred: a span processor may panic in Start
	if s.closed {
		return nil, false
	}
	if trigger != TriggerPrimary && !s.p.budget.take() {
		return nil, true
	}
	a = &attempt[T]{
		idx: n, route: route, trigger: trigger,
		launchAt: now, launch: now.Sub(s.start), stallSpent: -1, closed: make(chan struct{}),
	}
	if s.p.cfg.HedgeAfter > 0 {
		a.delay = s.p.cfg.HedgeAfter
	} else {
		a.delay = s.p.delays.delay(route.Name, route.Model, now)
	}
	ctx := s.callCtx
	if s.rec != nil {
		ctx, a.rec = s.rec.attempt(ctx, a.idx, &routeNames{route.Name, route.Provider, route.Model}, trigger, a.launch, now)
	}
	a.ctx, a.cancel = context.WithCancel(ctx)
	if s.streaming {
		a.handoff = make(chan struct{})
	}
	s.attempts = append(s.attempts, a)
	s.wg.Add(1)
	return a, false
}

func (s *Stream[T]) throttle(trigger Trigger, route string, reason ThrottleReason) {
	s.throttled++
	now := time.Now()
	if s.rec != nil {
		s.rec.throttled(len(s.attempts), trigger, route, reason, now)
	}
	if f := s.p.opts.onThrottle; f != nil {
		notify(f, ThrottleEvent{Attempt: len(s.attempts), Route: route, Trigger: trigger, Reason: reason, Elapsed: now.Sub(s.start)})
	}
}

// await runs the race until an attempt commits or the call ends.
//
// Events and the deadline are taken in the order they happened, by the
// events' arrival times: when the driver was busy, select finds queued
// events and an expired timer ready together and picks one at random, and
// a chunk that arrived in time must not lose to a stale timer (nor a
// chunk that came late win against it).
func (s *Stream[T]) await() bool {
	for s.phase == phasePre {
		var tc <-chan time.Time
		d, due := s.nextDeadline()
		if due {
			wait := max(d-s.since(), 0)
			if s.timer == nil {
				s.timer = time.NewTimer(wait)
			} else {
				s.timer.Reset(wait)
			}
			tc = s.timer.C
		}
		select {
		case ev := <-s.events:
			s.take(ev, d, due)
		case <-tc:
			s.drain(d)
		case <-s.ctx.Done():
			s.finish(s.ctx.Err(), OutcomeCanceled)
		case <-s.closing:
			s.finish(nil, OutcomeCanceled)
		}
	}
	return s.phase != phaseDone
}

// take handles ev; when the deadline d had passed before ev arrived, it
// acts on the deadline first.
func (s *Stream[T]) take(ev event[T], d time.Duration, due bool) {
	if due && ev.at > d {
		s.onDeadline()
		if s.phase != phasePre {
			return
		}
	}
	s.handle(ev)
}

// drain runs when the timer of the deadline d fired: it first handles the
// events readers queued before d, without blocking, then acts on the
// deadline unless one of them committed or ended the call.
func (s *Stream[T]) drain(d time.Duration) {
	for s.phase == phasePre {
		select {
		case ev := <-s.events:
			if ev.at > d {
				s.take(ev, d, true)
				return
			}
			s.handle(ev)
		default:
			s.onDeadline()
			return
		}
	}
}

// liveContent reports whether a live attempt has produced content.
func (s *Stream[T]) liveContent() bool {
	for _, a := range s.attempts {
		if !a.done && a.content > 0 {
			return true
		}
	}
	return false
}

// newestLive returns the most recently launched live attempt, or nil.
func (s *Stream[T]) newestLive() *attempt[T] {
	for i := len(s.attempts) - 1; i >= 0; i-- {
		if !s.attempts[i].done {
			return s.attempts[i]
		}
	}
	return nil
}

// nextDeadline returns the earliest time, since call start, at which a
// trigger or watchdog may act before commit.
func (s *Stream[T]) nextDeadline() (time.Duration, bool) {
	cfg := &s.p.cfg
	d, ok := time.Duration(math.MaxInt64), false
	at := func(t time.Duration) {
		if t < d {
			d, ok = t, true
		}
	}
	if cfg.TTFTTimeout > 0 && !s.contentSeen {
		at(cfg.TTFTTimeout)
	}
	live := s.liveContent()
	canHedge := len(s.attempts) < cfg.MaxAttempts
	if latest := s.attempts[len(s.attempts)-1]; canHedge && !live && s.ttftSpent != latest.idx {
		at(latest.launch + latest.delay)
	}
	if n := s.newestLive(); canHedge && cfg.StallAfter > 0 && n != nil && n.content > 0 && n.stallSpent != n.last {
		at(n.last + cfg.StallAfter)
	}
	if cfg.StallTimeout > 0 {
		for _, a := range s.attempts {
			if !a.done && a.content > 0 {
				at(a.last + cfg.StallTimeout)
			}
		}
	}
	return d, ok
}

// onDeadline acts on every trigger or watchdog whose time has come.
func (s *Stream[T]) onDeadline() {
	cfg := &s.p.cfg
	now := s.since()
	if cfg.TTFTTimeout > 0 && !s.contentSeen && now >= cfg.TTFTTimeout {
		a := s.newestLive()
		if a == nil {
			a = s.attempts[len(s.attempts)-1]
		}
		s.watchdogFired(TimeoutTTFT, a, now)
		s.finish(&TimeoutError{Kind: TimeoutTTFT, After: cfg.TTFTTimeout, Attempt: a.idx,
			Route: a.route.Name, Model: a.route.Model, ChunksReceived: a.content}, OutcomeTTFTTimeout)
		return
	}
	if cfg.StallTimeout > 0 {
		for _, a := range s.attempts {
			if !a.done && a.content > 0 && now >= a.last+cfg.StallTimeout {
				s.watchdogFired(TimeoutStall, a, now)
				s.fail(a, &TimeoutError{Kind: TimeoutStall, After: cfg.StallTimeout, Attempt: a.idx,
					Route: a.route.Name, Model: a.route.Model, ChunksReceived: a.content})
				if s.phase != phasePre {
					return
				}
			}
		}
	}
	canHedge := len(s.attempts) < cfg.MaxAttempts
	if latest := s.attempts[len(s.attempts)-1]; canHedge && !s.liveContent() && s.ttftSpent != latest.idx && now >= latest.launch+latest.delay {
		s.ttftSpent = latest.idx
		s.launch(TriggerTTFT)
		return
	}
	if n := s.newestLive(); canHedge && cfg.StallAfter > 0 && n != nil && n.content > 0 && n.stallSpent != n.last && now >= n.last+cfg.StallAfter {
		n.stallSpent = n.last
		s.launch(TriggerStall)
	}
}

// handle takes one event from a reading goroutine.
func (s *Stream[T]) handle(ev event[T]) {
	a := ev.a
	if a.done {
		return // a cancelled or failed attempt: discarded, never revived
	}
	if ev.typ == evEnd {
		if ev.err == nil {
			s.winnerEnded = true
			s.commit(a)
			return
		}
		s.fail(a, ev.err)
		return
	}
	a.buf = append(a.buf, item[T]{v: ev.v, kind: ev.kind})
	if a.rec != nil {
		if err := s.record(a, ev.kind, ev.v, s.start.Add(ev.at)); err != nil {
			s.fail(a, err)
			return
		}
	}
	switch ev.kind {
	case Content:
		a.content++
		a.last = ev.at
		s.contentSeen = true
		if a.content == 1 {
			a.first = ev.at
			s.p.delays.observe(a.route.Name, a.route.Model, ev.at-a.launch, s.start.Add(ev.at))
		}
	case Control:
		if s.p.tokens != nil {
			if err := s.countTokens(a, ev.v); err != nil {
				s.fail(a, err)
				return
			}
		}
	}
	if ev.ready {
		s.commit(a)
	}
}

// fail ends attempt a with err before commit: a transient error launches
// the next attempt at once, a fatal one ends the call.
func (s *Stream[T]) fail(a *attempt[T], err error) {
	if s.ctx.Err() != nil {
		s.finish(s.ctx.Err(), OutcomeCanceled)
		return
	}
	now := time.Now()
	a.done, a.outcome, a.err, a.ended = true, AttemptFailed, err, now.Sub(s.start)
	a.release()
	if ra := retryAfter(err); ra > 0 {
		s.p.pushback.set(a.route.Name, now.Add(ra))
	}
	s.attemptDone(a)
	if !IsTransient(err) {
		s.finish(err, outcomeOf(err))
		return
	}
	if len(s.attempts) < s.p.cfg.MaxAttempts {
		s.launch(TriggerError)
	}
	if s.newestLive() == nil {
		s.finish(err, outcomeOf(err))
	}
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

// commit makes a the winner: every other attempt is cancelled and closed
// for good, and with Streaming the caller's Next takes over a's source.
func (s *Stream[T]) commit(a *attempt[T]) {
	now := time.Now()
	s.winner = a
	s.phase = phaseBuffer
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.rec != nil {
		s.rec.commit(a.idx, now)
	}
	if f := s.p.opts.onCommit; f != nil {
		notify(f, CommitEvent{Attempt: a.idx, Route: a.route.Name, Provider: a.route.Provider, Model: a.route.Model, Elapsed: now.Sub(s.start)})
	}
	for _, b := range s.attempts {
		if b == a || b.done {
			continue
		}
		b.done, b.outcome, b.ended = true, AttemptCanceled, now.Sub(s.start)
		b.release()
		if b.content == 0 {
			s.p.delays.observeCensored(b.route.Name, b.route.Model, now.Sub(b.launchAt), b.delay, now)
		}
		if s.rec != nil {
			s.rec.canceled(b.idx, now)
		}
		s.attemptDone(b)
	}
	if !s.winnerEnded {
		s.src = a.source()
		close(a.handoff)
	}
}

// nextBuffered delivers the winner's buffered items, then switches to
// reading its source directly (Streaming) or ends the call.
func (s *Stream[T]) nextBuffered() bool {
	w := s.winner
	if s.bufPos < len(w.buf) {
		it := w.buf[s.bufPos]
		w.buf[s.bufPos] = item[T]{}
		s.bufPos++
		s.cur = it.v
		s.items++
		if it.kind == Content {
			s.delivered++
			if s.delivered == 1 {
				s.ttfc = s.since()
			}
		}
		return true
	}
	w.buf = nil
	if s.winnerEnded {
		s.finish(nil, OutcomeOK)
		return false
	}
	s.phase = phaseDirect
	if st := s.p.cfg.StallTimeout; st > 0 {
		// The clock starts afresh when the caller reaches the source:
		// nextDirect's entry begins the first wait.
		s.waited = 0
		s.wait.Store(-1)
		// Armed after the assignment: the timer function reads s.wd.
		s.wd = time.AfterFunc(time.Duration(math.MaxInt64), s.watchdog)
		s.wd.Reset(st)
	}
	return s.nextDirect()
}

func (s *Stream[T]) watchdogFired(kind TimeoutKind, a *attempt[T], at time.Duration) {
	timeout := s.p.cfg.StallTimeout
	if kind == TimeoutTTFT {
		timeout = s.p.cfg.TTFTTimeout
	}
	if s.rec != nil {
		s.rec.watchdog(kind, timeout, a.idx, s.start.Add(at))
	}
	if f := s.p.opts.onWatchdog; f != nil {
		notify(f, WatchdogEvent{Kind: kind, Timeout: timeout, Attempt: a.idx, Route: a.route.Name, Elapsed: at})
	}
}

func (s *Stream[T]) attemptDone(a *attempt[T]) {
	if a.rec != nil {
		a.rec.end(a.outcome, a.err, a.content, a.tokens, a.hasTokens, s.start.Add(a.ended))
	}
	if f := s.p.opts.onAttemptDone; f != nil {
		var ttft time.Duration
		if a.content > 0 {
			ttft = a.first - a.launch
		}
		notify(f, AttemptEvent{Attempt: a.idx, Route: a.route.Name, Provider: a.route.Provider, Model: a.route.Model,
			Trigger: a.trigger, Outcome: a.outcome, Err: a.err, ContentChunks: a.content, TTFT: ttft,
			Duration: a.ended - a.launch})
	}
}

// finish ends the call with err and outcome: every live attempt gets its
// outcome and is released, timers stop, spans end, and finish waits for
// every reading goroutine; then it closes finished. Only the goroutine
// driving the Stream (or Close, once it owns the Stream) calls it.
func (s *Stream[T]) finish(err error, outcome Outcome) {
	if s.phase == phaseDone {
		return
	}
	defer close(s.finished)
	started := s.phase != phaseNew
	s.phase = phaseDone
	s.err, s.outcome = err, outcome
	s.wdOff.Store(true)
	if s.wd != nil {
		s.wd.Stop()
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if !started {
		return
	}
	now := time.Now()
	for _, a := range s.attempts {
		if a.done {
			continue
		}
		a.done, a.ended = true, now.Sub(s.start)
		switch {
		case a == s.winner && outcome == OutcomeOK:
			a.outcome = AttemptWinner
		case outcome == OutcomeCanceled:
			a.outcome = AttemptCanceled
		case a == s.winner || outcome == OutcomeTTFTTimeout:
			a.outcome, a.err = AttemptFailed, err
			if a.content == 0 {
				s.p.delays.observeCensored(a.route.Name, a.route.Model, now.Sub(a.launchAt), a.delay, now)
			}
		default:
			a.outcome = AttemptCanceled
		}
		a.release()
		if a.outcome == AttemptCanceled && a != s.winner && s.rec != nil {
			s.rec.canceled(a.idx, now)
		}
		s.attemptDone(a)
	}
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if s.rec != nil {
		s.rec.end(s.stats(), err, now)
	}
	s.wg.Wait()
}
