package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// A late first chunk launches the hedge at the delay, and the faster
// attempt wins.
func TestHedgeLateFirstChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, 5*time.Second, 100*time.Millisecond))
		b := newUpstream("b", texts("b", 3, 300*time.Millisecond, 100*time.Millisecond))
		var hedges []HedgeEvent
		var done []AttemptEvent
		p := mustNew(t, Config{HedgeAfter: time.Second, HedgeBurst: 1},
			OnHedge(func(e HedgeEvent) { hedges = append(hedges, e) }),
			OnAttemptDone(func(e AttemptEvent) { done = append(done, e) }))
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		wantTexts(t, g, "b0", "b1", "b2")
		wantDur(t, "first chunk", g.at[0], 1300*time.Millisecond)
		if len(hedges) != 1 || hedges[0].Trigger != TriggerTTFT || hedges[0].Elapsed != time.Second || hedges[0].Delay != time.Second || hedges[0].Route != "b" {
			t.Fatalf("hedges = %+v", hedges)
		}
		st := s.Stats()
		if st.Winner != 1 || st.WinnerRoute != "b" || st.Outcome != OutcomeOK || len(st.Attempts) != 2 {
			t.Fatalf("stats = %+v", st)
		}
		wantDur(t, "TimeToFirstChunk", st.TimeToFirstChunk, 1300*time.Millisecond)
		if st.Attempts[0].Outcome != AttemptCanceled || st.Attempts[1].Outcome != AttemptWinner || st.Attempts[1].Trigger != TriggerTTFT {
			t.Fatalf("attempts = %+v", st.Attempts)
		}
		// Losers report canceled, never failed (rule 5).
		for _, e := range done {
			if e.Index == 0 && (e.Outcome != AttemptCanceled || e.Err != nil) {
				t.Fatalf("loser reported %+v", e)
			}
		}
		if c := a.closes(); len(c) != 1 || c[0] != 1 {
			t.Fatalf("primary closes = %v", c)
		}
	})
}

// The primary recovering after the hedge launched still wins if it
// delivers first.
func TestHedgePrimaryRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, 1200*time.Millisecond, 10*time.Millisecond))
		b := newUpstream("b", texts("b", 3, time.Second, 10*time.Millisecond))
		p := mustNew(t, Config{HedgeAfter: time.Second})
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		wantTexts(t, g, "a0", "a1", "a2")
		wantDur(t, "first chunk", g.at[0], 1200*time.Millisecond)
		st := s.Stats()
		if st.Winner != 0 || st.Attempts[1].Outcome != AttemptCanceled || len(st.Attempts) != 2 {
			t.Fatalf("stats = %+v", st)
		}
		if c := b.closes(); c[0] != 1 {
			t.Fatalf("hedge closes = %v", c)
		}
	})
}

// A stall before commit launches a hedge: Streaming with HoldChunks.
func TestHedgeStallBeforeCommitHoldChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append(texts("a", 2, 100*time.Millisecond, 100*time.Millisecond), content(time.Minute, "late")))
		b := newUpstream("b", texts("b", 4, 100*time.Millisecond, 100*time.Millisecond))
		var hedges []HedgeEvent
		p := mustNew(t, Config{HedgeAfter: 10 * time.Second, StallAfter: 2 * time.Second, HoldChunks: 3},
			OnHedge(func(e HedgeEvent) { hedges = append(hedges, e) }))
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		wantTexts(t, g, "b0", "b1", "b2", "b3")
		if len(hedges) != 1 || hedges[0].Trigger != TriggerStall || hedges[0].Elapsed != 2200*time.Millisecond {
			t.Fatalf("hedges = %+v", hedges)
		}
		// b commits at its third chunk, 2.2 s + 300 ms; the held chunks arrive together.
		wantDur(t, "first delivery", g.at[0], 2500*time.Millisecond)
		wantDur(t, "third delivery", g.at[2], 2500*time.Millisecond)
		wantDur(t, "fourth delivery", g.at[3], 2600*time.Millisecond)
	})
}

// A stall before commit launches a hedge: Buffered. Keepalives are not
// progress for the stall trigger (rule 2): an attempt that sends one every
// 500 ms after its content stopped at 0.5 s is hedged at the same instant.
func TestHedgeStallBuffered(t *testing.T) {
	for _, keepalives := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepalives=%v", keepalives), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				steps := texts("a", 5, 100*time.Millisecond, 100*time.Millisecond)
				if keepalives {
					for range 20 {
						steps = append(steps, keepalive(500*time.Millisecond))
					}
				}
				a := newUpstream("a", append(steps, content(time.Minute, "late")))
				b := newUpstream("b", texts("b", 3, 100*time.Millisecond, 100*time.Millisecond))
				p := mustNew(t, Config{HedgeAfter: 10 * time.Second, StallAfter: 3 * time.Second, Delivery: Buffered})
				start := time.Now()
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, start)
				if g.err != nil {
					t.Fatal(g.err)
				}
				wantTexts(t, g, "b0", "b1", "b2")
				st := s.Stats()
				if len(st.Attempts) != 2 || st.Attempts[1].Trigger != TriggerStall || st.Attempts[1].LaunchOffset != 3500*time.Millisecond {
					t.Fatalf("attempts = %+v", st.Attempts)
				}
				// Buffered: nothing before b completes at 3.5 s + 300 ms.
				wantDur(t, "first delivery", g.at[0], 3800*time.Millisecond)
				wantDur(t, "TimeToFirstChunk", st.TimeToFirstChunk, 3800*time.Millisecond)
			})
		})
	}
}

// A stall after commit never launches a hedge and ends in a stall
// timeout with Truncated.
func TestHedgeNeverAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append(texts("a", 2, 100*time.Millisecond, 100*time.Millisecond), content(time.Minute, "late")))
		b := newUpstream("b", texts("b", 3, 100*time.Millisecond, 100*time.Millisecond))
		p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: time.Second, StallTimeout: 5 * time.Second})
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		wantTexts(t, g, "a0", "a1")
		var te *TimeoutError
		if !errors.As(g.err, &te) || te.Kind != TimeoutStall || !te.Truncated || te.ChunksDelivered != 2 || te.ChunksReceived != 2 {
			t.Fatalf("err = %#v", g.err)
		}
		wantDur(t, "end", time.Since(start), 5200*time.Millisecond)
		if b.opened() != 0 || len(s.Stats().Attempts) != 1 {
			t.Fatalf("a committed stream was hedged")
		}
		if s.Stats().Outcome != OutcomeStallTimeout {
			t.Fatalf("outcome = %v", s.Stats().Outcome)
		}
	})
}

// A transient error launches the next attempt at once.
func TestHedgeTransientError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{fail(200*time.Millisecond, &statusErr{code: 503})})
		b := newUpstream("b", texts("b", 2, 300*time.Millisecond, 10*time.Millisecond))
		var done []AttemptEvent
		p := mustNew(t, Config{HedgeAfter: 10 * time.Second}, OnAttemptDone(func(e AttemptEvent) { done = append(done, e) }))
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		wantTexts(t, g, "b0", "b1")
		wantDur(t, "first chunk", g.at[0], 500*time.Millisecond)
		st := s.Stats()
		if st.Attempts[1].Trigger != TriggerError || st.Attempts[1].LaunchOffset != 200*time.Millisecond || st.Attempts[0].Outcome != AttemptFailed {
			t.Fatalf("attempts = %+v", st.Attempts)
		}
		if len(done) != 2 || done[0].Outcome != AttemptFailed || done[0].Err == nil {
			t.Fatalf("done = %+v", done)
		}
	})
}

// A fatal error ends the call with that error, no hedge.
func TestHedgeFatalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := &statusErr{code: 401}
		a := newUpstream("a", []step{fail(200*time.Millisecond, bad)})
		b := newUpstream("b", texts("b", 2, 10*time.Millisecond, 10*time.Millisecond))
		p := mustNew(t, Config{HedgeAfter: time.Second})
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if !errors.Is(g.err, bad) || IsTransient(g.err) {
			t.Fatalf("err = %v", g.err)
		}
		wantDur(t, "end", time.Since(start), 200*time.Millisecond)
		if b.opened() != 0 || s.Stats().Outcome != OutcomeError {
			t.Fatalf("hedged after a fatal error: %+v", s.Stats())
		}
	})
}

// An Open error is an attempt error like any other.
func TestHedgeOpenError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a")
		a.openErr = &statusErr{code: 500}
		a.openDelay = 50 * time.Millisecond
		b := newUpstream("b", texts("b", 1, 10*time.Millisecond, 0))
		p := mustNew(t, Config{HedgeAfter: time.Second})
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if g.err != nil {
			t.Fatal(g.err)
		}
		wantTexts(t, g, "b0")
	})
}

// The budget runs dry during an outage and hedges stop, counted as
// throttled.
func TestHedgeBudgetRunsDry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append([]step{content(2*time.Second, "a0")}, texts("a", 1, 10*time.Millisecond, 0)...))
		b := newUpstream("b", []step{hang()})
		var throttles []ThrottleEvent
		p := mustNew(t, Config{HedgeAfter: time.Second, HedgeBudget: 0.1, HedgeBurst: 2, MaxAttempts: 2},
			OnThrottle(func(e ThrottleEvent) { throttles = append(throttles, e) }))
		var hedged, throttled int
		for range 20 {
			s := p.Stream(t.Context(), a.route(), b.route())
			drain(s, time.Now())
			st := s.Stats()
			hedged += len(st.Attempts) - 1
			throttled += st.HedgesThrottled
		}
		// Burst 2 (full at start), +0.1 per call, and a TTFT hedge leaves
		// half the burst (1 token): call 1 hedges (2 → 1), calls 2-10
		// have 1.1-1.9 and are throttled, call 11 has 2 and hedges, 12-20
		// are throttled.
		if hedged != 2 || throttled != 18 || len(throttles) != 18 || throttles[0].Reason != ThrottleBudget {
			t.Fatalf("hedged %d throttled %d events %d", hedged, throttled, len(throttles))
		}
	})
}

// A full bucket of any burst of at least 1 admits a TTFT hedge: the
// reserve is the whole tokens of half the burst, and a burst below 1
// (shadow mode) admits nothing. From full, TTFT hedges take the tokens
// above the reserve and the other rescues the rest.
func TestBudgetReserveByBurst(t *testing.T) {
	for _, tc := range []struct {
		burst         float64
		ttft, rescues int
	}{
		{0.5, 0, 0}, {1, 1, 0}, {2, 1, 1}, {3, 2, 1}, {4, 2, 2}, {10, 5, 5}, {10.5, 5, 5},
	} {
		var b budget
		b.init(0, tc.burst)
		ttft, rescues := 0, 0
		for b.take(b.reserve) {
			ttft++
		}
		for b.take(0) {
			rescues++
		}
		if ttft != tc.ttft || rescues != tc.rescues {
			t.Errorf("burst %v: %d TTFT hedges then %d rescues from a full bucket, want %d and %d", tc.burst, ttft, rescues, tc.ttft, tc.rescues)
		}
	}
}

// A bucket at half its burst or below refuses a TTFT hedge and still
// admits an error relaunch and a resume: the tokens left go to the
// rescues without which a call fails or waits out a silence.
func TestHedgeBudgetReserveForRescues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := newUpstream("a", append([]step{content(2*time.Second, "a0")}, texts("a", 1, 10*time.Millisecond, 0)...))
		hung := newUpstream("b", []step{hang()})
		var throttles []ThrottleEvent
		// Burst 4: a TTFT hedge leaves 2 tokens. The refills (1e-6 a
		// call) are too small to matter.
		p := mustNew(t, Config{HedgeAfter: time.Second, HedgeBudget: 1e-6, HedgeBurst: 4, MaxAttempts: 2}, withText(),
			OnThrottle(func(e ThrottleEvent) { throttles = append(throttles, e) }))
		for i, wantHedge := range []bool{true, true, false} { // 4 → 3 → 2 tokens, then refused
			s := p.Stream(t.Context(), slow.route(), hung.route())
			if g := drain(s, time.Now()); g.err != nil {
				t.Fatalf("call %d: %v", i, g.err)
			}
			if got := len(s.Stats().Attempts) == 2; got != wantHedge {
				t.Fatalf("call %d (TTFT): hedged %v, want %v", i, got, wantHedge)
			}
		}
		if len(throttles) != 1 || throttles[0].Trigger != TriggerTTFT || throttles[0].Reason != ThrottleBudget {
			t.Fatalf("throttles %+v, want one TTFT hedge refused by the budget", throttles)
		}
		// The same 2 tokens launch the next attempt after an error.
		failing := newUpstream("a")
		failing.openErr = &statusErr{code: 500}
		ok := newUpstream("b", texts("b", 1, 10*time.Millisecond, 0))
		s := p.Stream(t.Context(), failing.route(), ok.route())
		g := drain(s, time.Now())
		if g.err != nil {
			t.Fatalf("error relaunch: %v (throttles %+v)", g.err, throttles[1:])
		}
		wantTexts(t, g, "b0")
		if st := s.Stats(); len(st.Attempts) != 2 || st.Attempts[1].Trigger != TriggerError {
			t.Fatalf("attempts %+v, want the primary and an error relaunch", st.Attempts)
		}
		// The last token resumes a stream that falls silent.
		stalls := continuing("a", []step{content(500*time.Millisecond, "Hel"), content(10*time.Millisecond, "lo"), hang()})
		goesOn := continuing("b", []step{content(100*time.Millisecond, " wor"), content(10*time.Millisecond, "ld")})
		s = p.Stream(t.Context(), stalls.route(), goesOn.route())
		if g := drain(s, time.Now()); g.err != nil || joined(g) != "Hello world" {
			t.Fatalf("resume: text %q, err %v (throttles %+v)", joined(g), g.err, throttles[1:])
		}
		if st := s.Stats(); len(st.Attempts) != 2 || st.Attempts[1].Trigger != TriggerResume || p.budget.tokens >= 1 {
			t.Fatalf("attempts %+v, %v tokens left; want the primary and a resume on the last token", st.Attempts, p.budget.tokens)
		}
	})
}

// Retry-After keeps hedges off a route.
func TestHedgeRetryAfterPushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 1, 2*time.Second, 0))
		b := newUpstream("b", []step{fail(10*time.Millisecond, &statusErr{code: 429, after: 30 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		p := mustNew(t, Config{HedgeAfter: time.Second, HedgeBurst: 5, HedgeBudget: 1, MaxAttempts: 2})
		run := func() Stats {
			s := p.Stream(t.Context(), a.route(), b.route())
			drain(s, time.Now())
			return s.Stats()
		}
		st := run() // hedge to b gets 429 Retry-After 30 s; a wins at 2 s
		if len(st.Attempts) != 2 || st.Attempts[1].Outcome != AttemptFailed || st.Winner != 0 {
			t.Fatalf("call 1: %+v", st)
		}
		st = run() // b is pushed back: the hedge skips to the next route, a
		if len(st.Attempts) != 2 || st.Attempts[1].Route != "a" || st.HedgesThrottled != 0 {
			t.Fatalf("call 2: %+v", st)
		}
		time.Sleep(30 * time.Second)
		st = run() // pushback over: the hedge goes to b again, which now answers
		if len(st.Attempts) != 2 || st.Attempts[1].Route != "b" || st.Winner != 1 {
			t.Fatalf("call 3: %+v", st)
		}
	})
}

// With a single route under pushback, the hedge is throttled.
func TestHedgePushbackSingleRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{fail(10*time.Millisecond, &statusErr{code: 503, after: time.Minute})}, texts("a", 1, 10*time.Millisecond, 0))
		var th []ThrottleEvent
		p := mustNew(t, Config{HedgeAfter: time.Second}, OnThrottle(func(e ThrottleEvent) { th = append(th, e) }))
		s := p.Stream(t.Context(), a.route())
		g := drain(s, time.Now())
		var se *statusErr
		if !errors.As(g.err, &se) || se.code != 503 {
			t.Fatalf("err = %v", g.err)
		}
		if len(th) != 1 || th[0].Reason != ThrottlePushback || th[0].Trigger != TriggerError || s.Stats().HedgesThrottled != 1 {
			t.Fatalf("throttles = %+v", th)
		}
	})
}

// MaxAttempts caps attempts.
func TestHedgeMaxAttempts(t *testing.T) {
	for _, n := range []int{1, 3, 5, 9} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", texts("a", 1, time.Minute, 0))
				p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: n, HedgeBurst: 10})
				start := time.Now()
				s := p.Stream(t.Context(), a.route())
				g := drain(s, start)
				want := min(n, MaxAttemptsLimit)
				if got := len(s.Stats().Attempts); got != want || a.opened() != want {
					t.Fatalf("attempts = %d, want %d", got, want)
				}
				// Each hedge reuses the single route; the first attempt wins.
				wantDur(t, "first chunk", g.at[0], time.Minute)
				for i, at := range s.Stats().Attempts {
					wantDur(t, "launch", at.LaunchOffset, time.Duration(i)*time.Second)
				}
			})
		})
	}
}

// The TTFT trigger counts from the latest launch: a slow hedge is
// followed by a third attempt on the next route, round robin.
func TestHedgeThirdAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", []step{hang()})
		c := newUpstream("c", texts("c", 1, 100*time.Millisecond, 0))
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 3})
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		g := drain(s, start)
		wantTexts(t, g, "c0")
		wantDur(t, "first chunk", g.at[0], 2100*time.Millisecond)
		st := s.Stats()
		if st.Winner != 2 || st.Attempts[2].LaunchOffset != 2*time.Second || st.Attempts[2].Trigger != TriggerTTFT {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// Caller cancel ends every attempt.
func TestHedgeCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", []step{hang()})
		ctx, cancel := context.WithCancel(t.Context())
		p := mustNew(t, Config{HedgeAfter: time.Second})
		time.AfterFunc(1500*time.Millisecond, cancel)
		start := time.Now()
		s := p.Stream(ctx, a.route(), b.route())
		g := drain(s, start)
		if !errors.Is(g.err, context.Canceled) || s.Stats().Outcome != OutcomeCanceled {
			t.Fatalf("err = %v outcome %v", g.err, s.Stats().Outcome)
		}
		wantDur(t, "end", time.Since(start), 1500*time.Millisecond)
		for _, at := range s.Stats().Attempts {
			if at.Outcome != AttemptCanceled {
				t.Fatalf("attempt %+v", at)
			}
		}
		if a.closes()[0] != 1 || b.closes()[0] != 1 {
			t.Fatalf("closes %v %v", a.closes(), b.closes())
		}
	})
}

// Regression (outside review): a TTFT hedge that pushback refused was
// never launched in that call — the trigger was spent — though the routes
// are avoided only until their Retry-After; the caller waited out a dead
// primary. It is due again when the first pushback ends, and each refusal
// is counted.
func TestHedgeAfterPushbackEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var th []ThrottleEvent
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: NoEjection},
			OnThrottle(func(e ThrottleEvent) { th = append(th, e) }))
		// Call 1 pushes both routes back, b for 5 s and a for 8 s.
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})}, []step{content(20*time.Second, "late")})
		pushBack(t, p, b, a)
		// Call 2 starts on a, whose first chunk takes 20 s; its TTFT hedge,
		// due at 1 s, is refused until b's pushback ends, 4.9 s in.
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Attempts[1].Route != "b" || st.Winner != 1 {
			t.Fatalf("launches %+v: want the hedge on b once its pushback ended", st.Attempts)
		}
		wantDur(t, "hedge launch", st.Attempts[1].LaunchOffset, 4900*time.Millisecond)
		wantTexts(t, g, "b0")
		if len(th) != 1 || th[0].Reason != ThrottlePushback || th[0].Trigger != TriggerTTFT || st.HedgesThrottled != 1 {
			t.Fatalf("throttles %+v, HedgesThrottled %d: want the one refusal at 1 s", th, st.HedgesThrottled)
		}
	})
}

// The same for a stall hedge: due again when the pushback ends, once.
func TestStallHedgeAfterPushbackEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Minute, StallAfter: time.Second, MaxAttempts: 2, EjectFailures: NoEjection,
			Delivery: Buffered})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 429, after: 5 * time.Second})}, texts("b", 2, 10*time.Millisecond, 10*time.Millisecond))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 429, after: 8 * time.Second})},
			[]step{content(100*time.Millisecond, "a0"), content(30*time.Second, "a1")})
		pushBack(t, p, b, a)
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Attempts[1].Trigger != TriggerStall || st.Winner != 1 || st.HedgesThrottled != 1 {
			t.Fatalf("attempts %+v, throttled %d: want one stall hedge on b once its pushback ended", st.Attempts, st.HedgesThrottled)
		}
		wantDur(t, "hedge launch", st.Attempts[1].LaunchOffset, 4900*time.Millisecond)
		wantTexts(t, g, "b0", "b1")
	})
}
