package hedgeprobe

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"
)

// Stream is one hedged, watchdogged, resumable call. It is a Source: read
// it with Next and Current until Next reports false, then check Err. The
// call starts at the first Next. Close ends it early, is idempotent, may be
// called from other goroutines to unblock a Next, and happens on its own
// when Next reports false. Except for Close, a Stream is not safe for
// concurrent use; Err and Stats say when they may be read. A Stream comes
// from Prober.Stream; its zero value is not usable: its Next reports
// false, its Err wraps ErrInvalidConfig and its Close does nothing.
//
// The Stream is the glue of small parts, each owning its state: the
// lifecycle (who drives the call: a Next, or Close), the race of attempts
// and its trigger table (race.go, triggers.go), what is delivered to the
// caller (delivery.go), the stall watchdog of a direct read (watchdog.go),
// resume (resume.go) and the observers that record it all (observer.go).
type Stream[T any] struct {
	p       *Prober[T]
	ctx     context.Context
	routes  []Route[T]
	initErr error
	life    lifecycle

	// attempts is appended to under life.mu (Close reads it); everything
	// else below is owned by the goroutine driving the call.
	attempts []*attempt[T]

	phase   phase
	cur     T
	err     error
	outcome Outcome
	start   time.Time
	callCtx context.Context
	obs     fanout
	rec     *callRecorder
	race    race[T]
	out     delivery[T]
	direct  direct[T]
}

// A Stream is itself a Source: wrapping a call is a one-line change, and a
// Stream can be the Source of another Prober's route.
var _ Source[struct{}] = (*Stream[struct{}])(nil)

// phase is where a call is.
type phase uint8

const (
	phaseNew    phase = iota // Next not called yet: nothing started
	phaseRace                // attempts racing, nothing committed
	phaseRelay               // committed: the winner's items come through its reading goroutine, so a resume can still race it
	phaseDirect              // committed with Streaming and no resume possible: Next reads the winner's source itself
	phaseDone                // ended; Err says how
)

// lifecycle says who drives the call and makes the end of a call safe to
// observe from the goroutine that did not end it.
type lifecycle struct {
	// owner is who drives the call: ownerFree between Next calls,
	// ownerNext while a Next runs, ownerClose once Close took it. Whoever
	// moves it to ownerClose finishes the call; a Next or Close that finds
	// the other side driving waits on finished, which closes once the call
	// has ended (outcome set, spans ended, hooks called, goroutines
	// exited): that wait is what makes Err and Stats safe to read after
	// Next reports false or Close returns.
	owner    atomic.Int32
	finished chan struct{}
	// closeReq is set by the first Close before it does anything else, so
	// that an attempt's end caused by Close's cancel is never taken for a
	// failure; closing is closed once that Close has cancelled and released
	// every attempt, and a later Close waits on it. (A channel, not a
	// sync.Once: a goroutine blocked on a mutex would keep a synctest
	// bubble from advancing.)
	closeReq atomic.Bool
	closing  chan struct{}
	wg       sync.WaitGroup // the attempts' reading goroutines

	// mu guards closed and cancel, and appends to Stream.attempts, against
	// Close.
	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc
}

const (
	ownerFree int32 = iota
	ownerNext
	ownerClose
)

// Stream returns a call over routes: the primary goes to the first healthy
// route (routes[0] unless it is ejected), each hedge to the next route
// (round robin), each resume to the next route that Continues. Nothing
// starts before the first Next. Invalid routes (none, or one without Name
// or Open, or whose Name, Provider or Model is not UTF-8) make the first
// Next report false with the error in Err. ctx bounds the whole call (one
// already done when the first Next comes ends the call canceled, and no
// route is opened; nil is context.Background()), and is handed to every
// listener hook.
func (p *Prober[T]) Stream(ctx context.Context, routes ...Route[T]) *Stream[T] {
	if ctx == nil {
		ctx = context.Background()
	}
	s := &Stream[T]{p: p, ctx: ctx, routes: append([]Route[T](nil), routes...)}
	s.life.closing = make(chan struct{})
	s.life.finished = make(chan struct{})
	s.race.ttftSpent = -1
	s.initErr = validateRoutes(routes)
	if p == nil || p.health == nil {
		s.initErr = errNoProber
	}
	return s
}

// errNoProber is the error of a Stream of a nil or zero Prober, and of a
// zero Stream: made other than by New and Prober.Stream, it has neither
// the config nor the Items to run a call.
var errNoProber = fmt.Errorf("%w: the Prober was not made by New, or the Stream by Prober.Stream", ErrInvalidConfig)

// Next advances to the next item of the committed attempt, starting the
// call on the first use and waiting (racing hedges and resumes) until an
// attempt commits. It reports false at the end of the stream, on error,
// on timeout and after Close; it reports false only once the call has
// finished, also when a Close on another goroutine finishes it.
func (s *Stream[T]) Next() (ok bool) {
	if s.life.closing == nil { // a zero Stream
		return false
	}
	if !s.life.owner.CompareAndSwap(ownerFree, ownerNext) {
		// Close owns the call (Next never runs concurrently with itself).
		<-s.life.finished
		return false
	}
	defer s.endNext(&ok)
	// A Close or a cancel of the caller's context ends the call at the
	// next Next on either path (nextSlow checks both): a source with items
	// already buffered, as an SSE decoder has, would otherwise hand them
	// out until it next waits on I/O.
	if s.phase == phaseDirect && !s.life.closeReq.Load() && s.ctx.Err() == nil {
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
		if !s.direct.inSource {
			s.giveBack()
			panic(r)
		}
		s.direct.inSource = false
		*ok = false
		s.finish(sourcePanic(s.race.winner, r), OutcomeError)
	}
	s.giveBack()
}

// giveBack ends a Next's ownership of the Stream.
func (s *Stream[T]) giveBack() {
	s.life.owner.Store(ownerFree)
	if s.life.closeReq.Load() && s.life.owner.CompareAndSwap(ownerFree, ownerClose) {
		s.finish(nil, OutcomeCanceled)
	}
}

// Current returns the item Next advanced to.
func (s *Stream[T]) Current() T { return s.cur }

// Err returns the error that ended the call: nil at a clean end and after
// the caller's Close, a *TimeoutError from a watchdog, the caller's
// context error, or the error of the attempt that ended the call. A
// watchdog that fell due at the very instant of Close may have ended the
// call first: Err is then its *TimeoutError.
//
// Err is final, and safe to call, on the goroutine that called Next once
// Next has reported false, and on a goroutine that called Close once
// Close has returned. Between Next calls it is safe only while no Close
// may be running on another goroutine (it then reports nil).
func (s *Stream[T]) Err() error {
	if s.life.closing == nil {
		return errNoProber
	}
	return s.err
}

// Close ends the call: every attempt is cancelled and closed, and Close
// returns once the call has finished: outcome set, every span ended, every
// listener hook called and every goroutine of the call exited. When a Next
// runs on another goroutine, that Next finishes the call as it returns and
// Close waits for it. Close is idempotent, may be called from several
// goroutines at once, and always returns nil. It must not be called from a
// listener hook, nor from what the call itself runs — Route.Open, a Source
// method, an Items function: each runs inside the Next or Close, or on the
// attempt goroutine, that Close would wait for, and the call deadlocks.
// From there, cancel the call's context instead. Close waits, too, for a
// Route.Open or a Source method that ignores its cancel: the attempts'
// goroutines have all returned when it does. A Close before the first
// Next, which starts the call, opens no route and records no span: Stats
// then reports OutcomeCanceled and no attempt, Err nil, Next false.
func (s *Stream[T]) Close() error {
	if s.life.closing == nil { // a zero Stream: nothing to close
		return nil
	}
	if s.life.closeReq.CompareAndSwap(false, true) {
		s.life.mu.Lock()
		s.life.closed = true
		atts := s.attempts
		cancel := s.life.cancel
		s.life.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		for _, a := range atts {
			a.release()
		}
		close(s.life.closing)
	} else {
		<-s.life.closing
	}
	if s.life.owner.CompareAndSwap(ownerFree, ownerClose) {
		s.finish(nil, OutcomeCanceled)
	} else {
		// A Next, or another Close, owns the call and finishes it.
		<-s.life.finished
	}
	s.life.wg.Wait()
	return nil
}

// All returns the items as an iterator: single use, it starts the call
// lazily, yields each item with a nil error, ends after yielding the
// call's error (with a zero item) if there is one, and closes the Stream
// when the loop ends. Ranging over it again yields no item, only that
// error again, as Err keeps returning it.
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

// stopping reports whether the caller ended the call (Close, or its
// context), and if so finishes it as canceled: an attempt's end that the
// caller's cancel caused is never an upstream failure.
func (s *Stream[T]) stopping() bool {
	switch {
	case s.life.closeReq.Load():
		s.finish(nil, OutcomeCanceled)
	case s.ctx.Err() != nil:
		s.finish(s.ctx.Err(), OutcomeCanceled)
	default:
		return false
	}
	return true
}

// nextSlow is Next everywhere but on the direct hot path: it starts the
// call, runs the race, delivers what is pending and switches to the
// direct read when it can.
func (s *Stream[T]) nextSlow() bool {
	switch s.phase {
	case phaseDone:
		return false
	case phaseNew:
		if !s.begin() {
			return false
		}
	}
	if s.stopping() {
		return false
	}
	if s.phase == phaseDirect {
		return s.nextDirect()
	}
	s.out.waitFrom(s.since())
	for {
		if s.out.ready() {
			return s.deliver()
		}
		if s.phase == phaseRelay {
			w := s.race.winner
			switch {
			case w.ended:
				s.finish(nil, OutcomeOK)
				return false
			case w.handoff != nil && !w.done:
				s.toDirect()
				return s.nextDirect()
			}
		}
		if s.phase == phaseDone || !s.step() {
			return false
		}
	}
}
