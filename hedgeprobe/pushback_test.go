package hedgeprobe

// Tests of a hedge that pushback refused, from an outside review of its
// retry when the pushback ends (docs/design.md §2 rule 3).

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// pushBack runs the call that pushes routes back: it starts on first,
// whose scripted 429 or 503 with Retry-After fails it, hedges to second,
// which fails the same way, and so must fail.
func pushBack(t *testing.T, p *Prober[chunk], first, second *upstream) {
	t.Helper()
	if g := drain(p.Stream(t.Context(), first.route(), second.route()), time.Now()); g.err == nil {
		t.Fatal("the call that pushes the routes back succeeded")
	}
}

// Pushback extended again (by another call) just before the retry: the
// retry is refused too, counted once more, and the hedge launches when the
// extended pushback ends.
func TestPushbackExtendedAtRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: NoEjection})
		b := newUpstream("b",
			[]step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})},
			[]step{fail(100*time.Millisecond, &statusErr{code: 503, after: 3 * time.Second})},
			texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})}, []step{content(20*time.Second, "late")})
		pushBack(t, p, b, a)
		start := time.Now() // b pushed back to 4.9 s, a to 8 s
		go func() {
			time.Sleep(4400 * time.Millisecond)
			drain(p.Stream(context.Background(), b.route()), time.Now()) // b now until 7.5 s
		}()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Attempts[1].Route != "b" || st.Winner != 1 {
			t.Fatalf("attempts %+v", st.Attempts)
		}
		wantDur(t, "hedge launch", st.Attempts[1].LaunchOffset, 7500*time.Millisecond)
		wantTexts(t, g, "b0")
		if st.HedgesThrottled != 2 {
			t.Fatalf("HedgesThrottled %d, want 2", st.HedgesThrottled)
		}
	})
}

// Ejection on; both routes' probes are in flight (a's is this call's
// primary, b's another call's): no route has an end known, so the retry
// comes every HedgeAfter, and is not counted again.
func TestPushbackProbeInFlightNoSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: 1, EjectBase: time.Second, EjectMax: time.Minute})
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503})}, []step{content(30*time.Second, "a0")})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503})}, []step{content(60*time.Second, "b0")}, texts("b", 1, 10*time.Millisecond, 0))
		if g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now()); g.err == nil {
			t.Fatal("call 1 succeeded")
		}
		time.Sleep(1500 * time.Millisecond) // both ejections over
		done := make(chan struct{})
		go func() { defer close(done); drain(p.Stream(context.Background(), b.route()), time.Now()) }() // b's probe, 60 s
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route()) // a's probe, first chunk at 30 s
		g := drain(s, start)
		st := s.Stats()
		// One refusal, counted once: the retries while the probes run (every
		// HedgeAfter, no end being known) are not counted again.
		if st.HedgesThrottled != 1 || len(st.Attempts) != 1 {
			t.Fatalf("attempts %d, throttled %d, content %v: want one refusal", len(st.Attempts), st.HedgesThrottled, g.texts)
		}
		<-done
	})
}

// The primary produces content during the pushback: the retry must not
// launch.
func TestPushbackContentDuringPushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: NoEjection, Delivery: Buffered})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})},
			[]step{content(3*time.Second, "a0"), content(500*time.Millisecond, "a1"), content(500*time.Millisecond, "a2"), content(500*time.Millisecond, "a3"), content(500*time.Millisecond, "a4")})
		pushBack(t, p, b, a)
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		st := s.Stats()
		if len(st.Attempts) != 1 || st.HedgesThrottled != 1 {
			t.Fatalf("attempts %+v throttled %d: want the primary alone", st.Attempts, st.HedgesThrottled)
		}
		wantTexts(t, g, "a0", "a1", "a2", "a3", "a4")
	})
}

// Close while the refused hedge waits for the pushback's end: nothing
// launches, Next ends, no goroutine left (synctest would report it).
func TestPushbackCloseDuringPushbackWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: NoEjection})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})}, []step{content(20*time.Second, "late")})
		pushBack(t, p, b, a)
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		go func() { time.Sleep(3 * time.Second); _ = s.Close() }()
		g := drain(s, start)
		if n := len(g.at); n != 0 {
			t.Fatalf("got %d items", n)
		}
		wantDur(t, "Next returned", time.Since(start), 3*time.Second)
		time.Sleep(10 * time.Second)
		if st := s.Stats(); len(st.Attempts) != 1 || b.opened() != 1 {
			t.Fatalf("attempts %+v, b opened %d: a hedge launched after Close", st.Attempts, b.opened())
		}
	})
}

// Stall hedge refused; the primary keeps producing through the pushback's
// end: the stall hedge for the old silence must not fire.
func TestPushbackStallOldSilenceNotRefired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Minute, StallAfter: time.Second, MaxAttempts: 2, EjectFailures: NoEjection, Delivery: Buffered})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 429, after: 5 * time.Second})}, texts("b", 2, 10*time.Millisecond, 10*time.Millisecond))
		steps := []step{content(100*time.Millisecond, "a0"), content(2*time.Second, "a1")} // stall 0.1→2.1 refused at 1.1
		for i := 2; i < 20; i++ {
			steps = append(steps, content(500*time.Millisecond, "x"))
		}
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 429, after: 8 * time.Second})}, steps)
		pushBack(t, p, b, a)
		s := p.Stream(t.Context(), a.route(), b.route())
		drain(s, time.Now())
		st := s.Stats()
		if len(st.Attempts) != 1 || st.HedgesThrottled != 1 {
			t.Fatalf("attempts %+v throttled %d", st.Attempts, st.HedgesThrottled)
		}
	})
}

// One route, ejection on: the call's own primary is the route's probe, so
// no hedge can be admitted until it ends. The refused TTFT hedge re-arms
// every delay, and was counted every time (59 with HedgeAfter 1 s, 599
// with 100 ms): it is counted once.
func TestPushbackOwnProbeThrottleCount(t *testing.T) {
	for _, after := range []time.Duration{time.Second, 100 * time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := mustNew(t, Config{HedgeAfter: after, MaxAttempts: 2, EjectFailures: 1, EjectBase: time.Second, EjectMax: time.Minute})
				b := newUpstream("b", []step{fail(50*time.Millisecond, &statusErr{code: 503})}, []step{content(60*time.Second, "b0")})
				if g := drain(p.Stream(t.Context(), b.route()), time.Now()); g.err == nil {
					t.Fatal("call 1 succeeded")
				}
				time.Sleep(1500 * time.Millisecond) // ejection over: the next attempt is the probe
				s := p.Stream(t.Context(), b.route())
				drain(s, time.Now())
				st := s.Stats()
				if st.HedgesThrottled != 1 {
					t.Errorf("HedgeAfter %v: one refused hedge counted %d times (attempts %d)", after, st.HedgesThrottled, len(st.Attempts))
				}
			})
		})
	}
}

// The error trigger is not retried: refused by pushback, the call ends with
// the failed attempt's error at once.
func TestPushbackErrorHedgeNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Minute, MaxAttempts: 2, EjectFailures: NoEjection})
		b := newUpstream("b", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 5 * time.Second})}, texts("b", 1, 10*time.Millisecond, 0))
		a := newUpstream("a", []step{fail(100*time.Millisecond, &statusErr{code: 503, after: 8 * time.Second})}, []step{fail(time.Second, &statusErr{code: 502})})
		pushBack(t, p, b, a)
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err == nil || len(s.Stats().Attempts) != 1 {
			t.Fatalf("err %v attempts %d", g.err, len(s.Stats().Attempts))
		}
		wantDur(t, "call end", time.Since(start), time.Second)
	})
}
