package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Regression: a hedge that lost soon after its launch was recorded as a
// censored TTFT sample at HedgeMaxDelay, though it only showed a TTFT
// above its short elapsed time: three slightly slow primaries on a route
// whose TTFT is 1s pushed its learned delay to the 10s ceiling. Now a
// censored attempt is recorded only when it ran at least the hedge delay
// in force, at max(elapsed, delay), and dropped otherwise.
func TestRegressionLosingHedgeNotCensoredAtCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeWarmup: 20, HedgeBurst: 10})
		norm := newUpstream("a", texts("a", 1, time.Second, 0))
		for range 20 {
			drain(p.Stream(t.Context(), norm.route()), time.Now())
		}
		learned := p.HedgeDelay("a", "model-a")
		if !near(learned, time.Second, 0.01) {
			t.Fatalf("learned %v after 20 calls of 1s", learned)
		}
		for range 3 {
			// The primary answers at 2s; the hedge on the same route,
			// launched at the learned delay, would answer 1s later and
			// loses within a second of its launch.
			slow := newUpstream("a", texts("a", 1, 2*time.Second, 0), texts("a", 1, time.Second, 0))
			s := p.Stream(t.Context(), slow.route())
			drain(s, time.Now())
			st := s.Stats()
			if len(st.Attempts) != 2 || st.Winner != 0 || st.Attempts[1].Outcome != AttemptCanceled {
				t.Fatalf("stats %+v", st)
			}
		}
		// 20 samples of 1s and 3 primaries of 2s; the 3 losing hedges are
		// dropped.
		n, mx := p.delays.samples("a", "model-a")
		if n != 23 || !near(time.Duration(mx*float64(time.Second)), 2*time.Second, 0.01) {
			t.Fatalf("samples n=%v max=%vs", n, mx)
		}
		if d := p.HedgeDelay("a", "model-a"); !near(d, 2*time.Second, 0.01) {
			t.Fatalf("delay %v", d)
		}
	})
}

// Regression: ten refills of HedgeBudget 0.1 added up to
// 0.9999999999999999 tokens, so the eleventh call after an empty bucket
// could not hedge: 0.1 per call bought one hedge per 11 calls.
func TestRegressionBudgetTenthsAddUp(t *testing.T) {
	var b budget
	b.init(0.1, 1)
	if !b.take(0) || b.take(0) {
		t.Fatal("a bucket of burst 1 gives one token")
	}
	for range 10 {
		b.refill()
	}
	if !b.take(0) {
		t.Fatalf("10 refills of 0.1 leave %v tokens, not one", b.tokens)
	}
}

// A hedge that stays silent does not leave the call waiting on a stalled
// attempt (rule 2). Regressions, each of which left the caller waiting for
// the stalled attempt's next chunk a minute later:
//   - content the stalled attempt produced before a silent stall hedge's
//     launch blocked the TTFT trigger: it now counts content since the
//     latest launch only, so the stall hedge is followed by a TTFT hedge,
//     as a slow TTFT hedge is;
//   - the stall hedge watched only the newest live attempt: when that was
//     a hedge still without content, an older attempt that delivered
//     after the hedge's launch and then stalled was hedged by nothing (the
//     TTFT trigger rightly quiet after that content). It now watches the
//     live attempt whose content came last.
func TestRegressionHedgeAfterSilentHedge(t *testing.T) {
	for _, c := range []struct {
		name string
		a    []step
		// The expected hedges' triggers, and when c's last chunk reaches
		// the caller.
		triggers []Trigger
		last     time.Duration
	}{
		// a stalls at 0.11 s: a stall hedge to b at 1.11 s, silent; a
		// TTFT hedge to c 1 s later, whose chunks come 0.1–0.13 s later.
		{"stall, silent stall hedge", []step{content(100*time.Millisecond, "a0"), content(10*time.Millisecond, "a1"),
			content(time.Minute, "a2")},
			[]Trigger{TriggerStall, TriggerTTFT}, 2240 * time.Millisecond},
		// a stalls at 0.11 s: a stall hedge to b at 1.11 s, silent; a
		// delivers again at 1.51 s and stalls: a stall hedge to c at
		// 2.51 s.
		{"stall, then again", []step{content(100*time.Millisecond, "a0"), content(10*time.Millisecond, "a1"),
			content(1400*time.Millisecond, "a2"), content(time.Minute, "a3")},
			[]Trigger{TriggerStall, TriggerStall}, 2640 * time.Millisecond},
		// a is slow: a TTFT hedge to b at 1 s, silent; a's content at
		// 1.5 s stalls at 1.51 s: a stall hedge to c at 2.51 s.
		{"late first chunk, then a stall", []step{content(1500*time.Millisecond, "a0"), content(10*time.Millisecond, "a1"),
			content(time.Minute, "a2"), content(time.Minute, "a3")},
			[]Trigger{TriggerTTFT, TriggerStall}, 2640 * time.Millisecond},
	} {
		for _, delivery := range []Delivery{Streaming, Buffered} {
			t.Run(c.name+"/"+delivery.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					a := newUpstream("a", c.a)
					b := newUpstream("b", []step{keepalive(10 * time.Millisecond), hang()})
					cu := newUpstream("c", texts("c", 4, 100*time.Millisecond, 10*time.Millisecond))
					p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: time.Second, HoldChunks: 4,
						Delivery: delivery, MaxAttempts: 3})
					start := time.Now()
					s := p.Stream(t.Context(), a.route(), b.route(), cu.route())
					g := drain(s, start)
					wantTexts(t, g, "c0", "c1", "c2", "c3")
					wantDur(t, "c's last chunk", g.at[len(g.at)-1], c.last)
					st := s.Stats()
					if len(st.Attempts) != 3 || st.Attempts[1].Trigger != c.triggers[0] || st.Attempts[2].Trigger != c.triggers[1] {
						t.Fatalf("attempts %+v; want hedges %v", st.Attempts, c.triggers)
					}
				})
			})
		}
	}
}

// Regression, found by a review of the fix above: a newer attempt whose
// own stall was hedged already hid an older attempt from the stall
// trigger, so an older attempt that delivered after that hedge's launch
// and then stalled was hedged by nothing.
//
//	a: a0 at 0.1 s, stalls: a stall hedge to b at 1.1 s
//	b: b0 at 1.3 s, stalls: a stall hedge to c at 2.3 s, silent
//	a: a1 at 2.5 s, after c's launch, stalls: a stall hedge to d at 3.5 s
func TestRegressionStallHiddenByStalledNewerAttempt(t *testing.T) {
	for _, delivery := range []Delivery{Streaming, Buffered} {
		t.Run(delivery.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(100*time.Millisecond, "a0"), content(2400*time.Millisecond, "a1"),
					content(time.Minute, "a2")})
				b := newUpstream("b", []step{content(200*time.Millisecond, "b0"), hang()})
				c := newUpstream("c", []step{keepalive(10 * time.Millisecond), hang()})
				d := newUpstream("d", texts("d", 4, 100*time.Millisecond, 10*time.Millisecond))
				p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: time.Second, HoldChunks: 4,
					Delivery: delivery, MaxAttempts: 4})
				start := time.Now()
				s := p.Stream(t.Context(), a.route(), b.route(), c.route(), d.route())
				g := drain(s, start)
				wantTexts(t, g, "d0", "d1", "d2", "d3")
				wantDur(t, "d's last chunk", g.at[len(g.at)-1], 3630*time.Millisecond)
				wantLaunches(t, s.Stats(), "0s primary, 1.1s stall, 2.3s stall, 3.5s stall")
			})
		})
	}
}

// Regression, found by the same review: the first fix above let the stall
// trigger watch an attempt whose content came before the latest launch —
// a silence the TTFT or an error hedge had answered already — so one
// silence of the call was hedged twice.
func TestRegressionOneSilenceOneHedge(t *testing.T) {
	silent := func(name string) *upstream {
		return newUpstream(name, []step{keepalive(10 * time.Millisecond), hang()})
	}
	for _, c := range []struct {
		name      string
		a, b      []step
		stall     time.Duration
		launches  string
		lastChunk time.Duration
	}{
		// a is silent, then fails at 1.2 s; b (TTFT hedge at 1 s) has b0
		// at 1.1 s and stalls. Each silence since a launch is the TTFT
		// trigger's: the error hedge to c at 1.2 s, TTFT hedges at 2.2
		// and 3.2 s. No stall hedge for b's silence, which began before
		// c's launch.
		{"after an error hedge", []step{fail(1200*time.Millisecond, &statusErr{code: 503})},
			[]step{content(100*time.Millisecond, "b0"), hang()}, 1500 * time.Millisecond,
			"0s primary, 1s ttft, 1.2s error, 2.2s ttft, 3.2s ttft", 3330 * time.Millisecond},
		// b (TTFT hedge at 1 s) has b0 at 1.1 s, a has a0 at 1.2 s; both
		// stall: the call's content stopped at 1.2 s, a stall hedge to c
		// at 3.2 s. b fails at 3.5 s: an error hedge to d, and no stall
		// hedge beside it for a's silence, which began before c's launch;
		// a TTFT hedge 1 s later.
		{"beside an error hedge", []step{content(1200*time.Millisecond, "a0"), content(time.Minute, "a1")},
			[]step{content(100*time.Millisecond, "b0"), fail(2400*time.Millisecond, &statusErr{code: 503})}, 2 * time.Second,
			"0s primary, 1s ttft, 3.2s stall, 3.5s error, 4.5s ttft", 4630 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := newUpstream("a", c.a), newUpstream("b", c.b)
				e := newUpstream("e", texts("e", 4, 100*time.Millisecond, 10*time.Millisecond))
				p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: c.stall, HoldChunks: 4,
					Delivery: Buffered, MaxAttempts: 5})
				start := time.Now()
				s := p.Stream(t.Context(), a.route(), b.route(), silent("c").route(), silent("d").route(), e.route())
				g := drain(s, start)
				wantTexts(t, g, "e0", "e1", "e2", "e3")
				wantDur(t, "e's last chunk", g.at[len(g.at)-1], c.lastChunk)
				wantLaunches(t, s.Stats(), c.launches)
			})
		})
	}
}

// wantLaunches checks a call's attempts: when each launched and why, as
// "OFFSET TRIGGER" joined by ", ".
func wantLaunches(t *testing.T, st Stats, want string) {
	t.Helper()
	got := make([]string, len(st.Attempts))
	for i, a := range st.Attempts {
		got[i] = fmt.Sprintf("%v %s", a.LaunchOffset, a.Trigger)
	}
	if g := strings.Join(got, ", "); g != want {
		t.Fatalf("attempts launched %s\nwant %s", g, want)
	}
}

// Regression (rule 10; ResumeRefused: "the call goes on"): the committed
// stream fails mid-answer with a transient error and the resume it asks
// for at once goes to b, which refuses the continuation (400). c can
// continue and MaxAttempts allows a third attempt, so the call goes on
// there, as it does when b fails with a transient error instead. It used
// to end with the committed stream's error: only a transient failure
// asked for the next resume at once.
func TestRegressionRefusedResumeGoesOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		bErr error
	}{
		{"b fails transiently", &statusErr{code: 503}},
		{"b refuses", &statusErr{code: 400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(time.Second, "A"), fail(500*time.Millisecond, &statusErr{code: 502})})
				b := continuing("b")
				b.openErr = tc.bErr
				c := continuing("c", []step{content(100*time.Millisecond, " B")})
				var resumes []ResumeEvent
				p := mustNew(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
				s := p.Stream(t.Context(), a.route(), b.route(), c.route())
				g := drain(s, time.Now())
				if g.err != nil || joined(g) != "A B" {
					t.Fatalf("caller read %q, err %v; want \"A B\" from a resume on c (c opened %d times; resume events %+v)",
						joined(g), g.err, c.opened(), resumes)
				}
			})
		})
	}
}

// Regression (ErrNilSource: "it is fatal"): a resume attempt whose Open
// returned neither a Source nor an error was taken for the route refusing
// continuations — the call went on and the route was not asked to
// continue for ResumeRefusedFor. Like a panic, it is a bug in the route's
// code, not the route's answer, so it ends the call.
func TestRegressionNilSourceOnResumeIsFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(3*time.Second, "B")})
		var resumes []ResumeEvent
		b := Route[chunk]{Name: "b", Continues: true, Open: func(ctx context.Context, at Attempt) (Source[chunk], error) {
			return nil, nil
		}}
		p := mustNew(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		s := p.Stream(t.Context(), a.route(), b)
		g := drain(s, time.Now())
		if !errors.Is(g.err, ErrNilSource) {
			t.Fatalf("caller read %q, err %v, resume events %+v; want the call failed with ErrNilSource",
				joined(g), g.err, resumes)
		}
	})
}
