package hedgeprobe

// Tests of Config.PushbackWait: an error relaunch that every route's
// Retry-After refuses waits for the first to end (docs/design.md §2 rule 3).

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// pushedBackCall sets the routes up as TestPushbackErrorHedgeNotRetried
// does — b pushed back until 4.9 s after the returned start, a until 8 s —
// and returns them with a call's primary on a failing at 1 s with a 502
// (no Retry-After), b then answering "b0" at once.
func pushedBackCall(t *testing.T, cfg Config, opts ...any) (p *Prober[chunk], a, b *upstream, start time.Time) {
	t.Helper()
	if cfg.HedgeAfter == 0 {
		cfg.HedgeAfter = time.Minute
	}
	cfg.MaxAttempts, cfg.EjectFailures = 3, NoEjection
	p = mustNew(t, cfg, opts...)
	b = newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
	a = newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})}, []step{fail(time.Second, &statusErr{code: 502})})
	pushBackNow(t, p, b, a)
	return p, a, b, time.Now()
}

// pushBackNow is pushBack with a deadline of 1 s, so that the pushing
// call does not wait for the pushback it causes.
func pushBackNow(t *testing.T, p *Prober[chunk], first, second *upstream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if g := drain(p.Stream(ctx, first.route(), second.route()), time.Now()); g.err == nil {
		t.Fatal("the call that pushes the routes back succeeded")
	}
}

// wantWaited checks how a pushedBackCall ended: with waited, the relaunch
// on b won; else the primary's 502 ended the call at the failure (1 s),
// with nothing relaunched.
func wantWaited(t *testing.T, s *Stream[chunk], g got, start time.Time, waited bool) {
	t.Helper()
	st := s.Stats()
	if waited {
		if g.err != nil || len(st.Attempts) != 2 || st.Winner != 1 {
			t.Fatalf("err %v, %d attempts, winner %d: want the relaunch on b to win", g.err, len(st.Attempts), st.Winner)
		}
		return
	}
	var se *statusErr
	if !errors.As(g.err, &se) || se.code != 502 || st.Outcome != OutcomeError || len(st.Attempts) != 1 {
		t.Fatalf("err %v, outcome %v, %d attempts: want the primary's 502 alone", g.err, st.Outcome, len(st.Attempts))
	}
	wantDur(t, "call end", time.Since(start), time.Second)
}

// The relaunch waits for b's Retry-After, launches on b the moment it ends
// and wins; the wait is counted once as a pushback refusal, also when the
// TTFT trigger's delay (2 s) passes during it: the relaunch waiting is the
// call's next attempt.
func TestPushbackWaitRelaunches(t *testing.T) {
	for _, hedgeAfter := range []time.Duration{0, 2 * time.Second} {
		t.Run(hedgeAfter.String(), func(t *testing.T) { testPushbackWaitRelaunches(t, hedgeAfter) })
	}
}

func testPushbackWaitRelaunches(t *testing.T, hedgeAfter time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		var th []ThrottleEvent
		p, a, b, start := pushedBackCall(t, Config{PushbackWait: 10 * time.Second, HedgeAfter: hedgeAfter},
			OnThrottle(func(ev ThrottleEvent) { th = append(th, ev) }))
		th = nil // the pushing call's
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err != nil {
			t.Fatalf("err %v", g.err)
		}
		wantTexts(t, g, "b0")
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Attempts[1].Route != "b" || st.Attempts[1].Trigger != TriggerError || st.Winner != 1 {
			t.Fatalf("attempts %+v, winner %d", st.Attempts, st.Winner)
		}
		wantDur(t, "relaunch", st.Attempts[1].LaunchOffset, 4900*time.Millisecond)
		if st.HedgesThrottled != 1 || len(th) != 1 || th[0].Reason != ThrottlePushback || th[0].Trigger != TriggerError {
			t.Fatalf("HedgesThrottled %d, throttle events %+v: want the one pushback refusal of the error relaunch", st.HedgesThrottled, th)
		}
	})
}

// The bound is counted from the failure (1 s): b's end at 4.9 s is 3.9 s
// after it, so 3.9 s of PushbackWait waits and a nanosecond less ends the
// call at once with the failure's own error.
func TestPushbackWaitBound(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		ok   bool
	}{{3900 * time.Millisecond, true}, {3900*time.Millisecond - 1, false}} {
		t.Run(tc.wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, a, b, start := pushedBackCall(t, Config{PushbackWait: tc.wait})
				s := p.Stream(t.Context(), a.route(), b.route())
				wantWaited(t, s, drain(s, start), start, tc.ok)
			})
		})
	}
}

// A wait the caller's deadline or the TTFT watchdog would cut short is not
// begun: the call ends at the failure with the upstream's error, not with
// a timeout later. With room for the wait, it is begun.
func TestPushbackWaitDeadlines(t *testing.T) {
	cases := []struct {
		name     string
		deadline time.Duration // after start; 0: none
		ttft     time.Duration
		ok       bool
	}{
		{"deadline at the end", 4900 * time.Millisecond, 0, false},
		{"deadline after it", 6 * time.Second, 0, true},
		{"TTFT timeout at the end", 0, 4900 * time.Millisecond, false},
		{"TTFT timeout after it", 0, 6 * time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, a, b, start := pushedBackCall(t, Config{PushbackWait: 10 * time.Second, TTFTTimeout: tc.ttft})
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, start.Add(tc.deadline))
					defer cancel()
				}
				s := p.Stream(ctx, a.route(), b.route())
				wantWaited(t, s, drain(s, start), start, tc.ok)
			})
		})
	}
}

// Another call takes b again just before the wait ends (its 503 pushes b
// back to 7.5 s): the relaunch is refused once more, and waits again only
// while the first end to come is within PushbackWait of the failure.
func TestPushbackWaitRefusedAgain(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		ok   bool
	}{{6500 * time.Millisecond, true}, {6 * time.Second, false}} {
		t.Run(tc.wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{HedgeAfter: time.Minute, MaxAttempts: 3, EjectFailures: NoEjection, PushbackWait: tc.wait}
				p := mustNew(t, cfg)
				b := newUpstream("b",
					[]step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})},
					[]step{fail(100*time.Millisecond, &statusErr{code: 503, after: 3 * time.Second})},
					texts("b", 1, 10*time.Millisecond, 0))
				a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})},
					[]step{fail(time.Second, &statusErr{code: 502})})
				pushBackNow(t, p, b, a)
				start := time.Now()
				go func() {
					time.Sleep(4400 * time.Millisecond)
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					drain(p.Stream(ctx, b.route()), time.Now())
				}()
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, start)
				st := s.Stats()
				if !tc.ok {
					if g.err == nil || len(st.Attempts) != 1 || st.HedgesThrottled != 2 {
						t.Fatalf("err %v, %d attempts, %d refusals: want the 502 after two refusals", g.err, len(st.Attempts), st.HedgesThrottled)
					}
					wantDur(t, "call end", time.Since(start), 4900*time.Millisecond)
					return
				}
				if g.err != nil || len(st.Attempts) != 2 || st.HedgesThrottled != 2 {
					t.Fatalf("err %v, %d attempts, %d refusals: want b's relaunch to win after two refusals", g.err, len(st.Attempts), st.HedgesThrottled)
				}
				wantDur(t, "relaunch", st.Attempts[1].LaunchOffset, 7500*time.Millisecond)
			})
		})
	}
}

// The caller's Close during the wait ends the call canceled, with nothing
// launched and nothing left running.
func TestPushbackWaitClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, a, b, start := pushedBackCall(t, Config{PushbackWait: 10 * time.Second})
		s := p.Stream(t.Context(), a.route(), b.route())
		go func() {
			time.Sleep(2 * time.Second)
			s.Close()
		}()
		g := drain(s, start)
		synctest.Wait()
		st := s.Stats()
		if g.err != nil || st.Outcome != OutcomeCanceled || len(st.Attempts) != 1 {
			t.Fatalf("err %v, outcome %v, %d attempts: want canceled at the Close, no relaunch", g.err, st.Outcome, len(st.Attempts))
		}
		wantDur(t, "call end", time.Since(start), 2*time.Second)
	})
}

// The context canceled during the wait ends the call canceled, with its
// error, and nothing relaunched.
func TestPushbackWaitCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, a, b, start := pushedBackCall(t, Config{PushbackWait: 10 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		s := p.Stream(ctx, a.route(), b.route())
		time.AfterFunc(2*time.Second, cancel)
		g := drain(s, start)
		st := s.Stats()
		if !errors.Is(g.err, context.Canceled) || st.Outcome != OutcomeCanceled || len(st.Attempts) != 1 {
			t.Fatalf("err %v, outcome %v, %d attempts: want canceled at 2 s, no relaunch", g.err, st.Outcome, len(st.Attempts))
		}
		wantDur(t, "call end", time.Since(start), 2*time.Second)
	})
}

// An empty budget does not stop the wait (calls that start meanwhile may
// refill it); still empty at the end, it refuses the relaunch, counted as
// such, and the failure ends the call there.
func TestPushbackWaitEmptyBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The pushing call's error relaunch takes the bucket's one token;
		// this call adds a hundredth.
		var th []ThrottleEvent
		p, a, b, start := pushedBackCall(t, Config{PushbackWait: 10 * time.Second, HedgeBudget: 0.01, HedgeBurst: 1},
			OnThrottle(func(ev ThrottleEvent) { th = append(th, ev) }))
		th = nil // the pushing call's
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		var se *statusErr
		if !errors.As(g.err, &se) || se.code != 502 || len(s.Stats().Attempts) != 1 {
			t.Fatalf("err %v, %d attempts: want the primary's 502 alone", g.err, len(s.Stats().Attempts))
		}
		wantDur(t, "call end", time.Since(start), 4900*time.Millisecond)
		if len(th) != 2 || th[0].Reason != ThrottlePushback || th[1].Reason != ThrottleBudget {
			t.Fatalf("throttle events %+v: want the wait's pushback, then the budget's refusal at its end", th)
		}
	})
}

// A call with an attempt still live does not wait: the error relaunch
// refused on every route ends there, as without PushbackWait, and the
// live attempt's TTFT trigger hedges when the pushback ends. The primary
// on a is slow (first chunk at 20 s); the TTFT hedge, refused at 2 s, goes
// to b at 4.9 s and fails at 5 s with a Retry-After of 3 s, while a is
// pushed back until 8 s.
func TestPushbackWaitNotWhileLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: 2 * time.Second, MaxAttempts: 3, EjectFailures: NoEjection, PushbackWait: 10 * time.Second})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})},
			[]step{fail(100*time.Millisecond, &statusErr{code: 503, after: 3 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})},
			[]step{content(20*time.Second, "a0")}, texts("a", 1, 10*time.Millisecond, 0))
		pushBackNow(t, p, b, a)
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		if g := drain(s, start); g.err != nil {
			t.Fatalf("err %v", g.err)
		}
		st := s.Stats()
		if len(st.Attempts) != 3 || st.Attempts[1].Trigger != TriggerTTFT || st.Attempts[2].Trigger != TriggerTTFT {
			t.Fatalf("attempts %+v: want the primary, then two TTFT hedges", st.Attempts)
		}
		wantDur(t, "first hedge", st.Attempts[1].LaunchOffset, 4900*time.Millisecond)
		wantDur(t, "second hedge", st.Attempts[2].LaunchOffset, 8*time.Second)
	})
}

// TTFTTimeout bounds the wait only before the first content: a Buffered
// call whose primary delivered a chunk before failing waits past it.
func TestPushbackWaitAfterContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{HedgeAfter: time.Minute, MaxAttempts: 3, EjectFailures: NoEjection, PushbackWait: 10 * time.Second,
			TTFTTimeout: 3 * time.Second, Delivery: Buffered}
		p := mustNew(t, cfg)
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})},
			[]step{content(500*time.Millisecond, "a0"), fail(500*time.Millisecond, &statusErr{code: 502})})
		pushBackNow(t, p, b, a)
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		st := s.Stats()
		if g.err != nil || len(st.Attempts) != 2 || st.Winner != 1 {
			t.Fatalf("err %v, attempts %+v: want the relaunch on b to win", g.err, st.Attempts)
		}
		wantDur(t, "relaunch", st.Attempts[1].LaunchOffset, 4900*time.Millisecond)
		wantTexts(t, g, "b0")
	})
}
