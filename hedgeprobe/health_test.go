package hedgeprobe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/semconv"
)

// down is a route that answers 503 without Retry-After, 10 ms after open.
func down(name string) *upstream {
	return newUpstream(name, []step{fail(10*time.Millisecond, &statusErr{code: 503})})
}

// Rule 11: a route is ejected after exactly EjectFailures consecutive
// transient failures; while ejected, calls start on the next route and
// hedges skip it; after the ejection one call probes it; a failed probe
// ejects it again for longer, up to EjectMax; a success restores it.
func TestHealthEjectProbeRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := down("a")
		b := newUpstream("b", texts("b", 1, 100*time.Millisecond, 0))
		var ej, rest []RouteEvent
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 2, HedgeBudget: 1, EjectFailures: 3,
			EjectBase: 10 * time.Second, EjectMax: 25 * time.Second},
			OnEject(func(e RouteEvent) { ej = append(ej, e) }), OnRestore(func(e RouteEvent) { rest = append(rest, e) }))
		call := func() Stats {
			s := p.Stream(t.Context(), a.route(), b.route())
			drain(s, time.Now())
			return s.Stats()
		}
		for i := range 3 {
			if st := call(); st.Attempts[0].Route != "a" || st.Outcome != OutcomeOK {
				t.Fatalf("call %d: %+v", i, st)
			}
		}
		if len(ej) != 1 || ej[0].Route != "a" || ej[0].For != 10*time.Second || ej[0].Reason != EjectFailures {
			t.Fatalf("ejections %+v, want one of a for 10s after the 3rd failure", ej)
		}
		// Ejected: the call starts on b, and a is not opened.
		opened := a.opened()
		if st := call(); st.Attempts[0].Route != "b" || len(st.Attempts) != 1 || a.opened() != opened {
			t.Fatalf("while ejected: %+v", st)
		}
		// 10 s later one call probes a; it fails: ejected for 20 s.
		time.Sleep(10 * time.Second)
		if st := call(); st.Attempts[0].Route != "a" {
			t.Fatalf("no probe: %+v", st)
		}
		if len(ej) != 2 || ej[1].For != 20*time.Second || ej[1].Ejections != 2 {
			t.Fatalf("ejections %+v", ej)
		}
		time.Sleep(20 * time.Second)
		call()
		if len(ej) != 3 || ej[2].For != 25*time.Second {
			t.Fatalf("backoff not capped at EjectMax: %+v", ej)
		}
		// The route comes back: the probe succeeds and restores it.
		a.scripts = [][]step{texts("a", 1, 100*time.Millisecond, 0)}
		a.srcs = nil
		time.Sleep(25 * time.Second)
		if st := call(); st.Winner != 0 || st.WinnerRoute != "a" || len(rest) != 1 || rest[0].Route != "a" {
			t.Fatalf("probe: %+v, restores %+v", st, rest)
		}
		if p.health.marked.Load() != 0 {
			t.Fatal("a restored route still has health state")
		}
	})
}

// Only its probe speaks for an ejected route. Streams already running on
// it when it was ejected neither restore it by completing during the
// ejection nor eject it again, longer, by failing; the probe after the
// ejection does restore it.
func TestHealthInFlightDuringEjection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a",
			texts("a", 2, 100*time.Millisecond, 4900*time.Millisecond),                                     // X: 0 s – 5 s
			[]step{content(100*time.Millisecond, "z"), fail(1400*time.Millisecond, &statusErr{code: 503})}, // Z: fails at 2 s
			[]step{fail(10*time.Millisecond, &statusErr{code: 503})},                                       // Y: fails at 1.01 s
			texts("a", 1, 100*time.Millisecond, 0))                                                         // the probe
		b := newUpstream("b", texts("b", 1, 100*time.Millisecond, 0))
		var mu sync.Mutex
		var ej, rest []RouteEvent
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 1, EjectFailures: 1, EjectBase: 10 * time.Second},
			OnEject(func(e RouteEvent) { mu.Lock(); ej = append(ej, e); mu.Unlock() }),
			OnRestore(func(e RouteEvent) { mu.Lock(); rest = append(rest, e); mu.Unlock() }))
		start := time.Now()
		call := func() Stats {
			s := p.Stream(t.Context(), a.route(), b.route())
			drain(s, start)
			return s.Stats()
		}
		var wg sync.WaitGroup
		for _, at := range []time.Duration{0, 500 * time.Millisecond, time.Second} { // X, Z, Y
			wg.Go(func() {
				time.Sleep(at - time.Since(start))
				call()
			})
		}
		wg.Wait() // 5 s: X completed, Z failed at 2 s, Y at 1.01 s
		mu.Lock()
		if len(ej) != 1 || ej[0].For != 10*time.Second || len(rest) != 0 {
			t.Fatalf("ejections %+v, restores %+v: want one ejection at 1.01 s and no restore", ej, rest)
		}
		mu.Unlock()
		if st := call(); st.Attempts[0].Route != "b" {
			t.Fatalf("at 5.1 s a must still be ejected: %+v", st)
		}
		time.Sleep(11010*time.Millisecond - time.Since(start))
		if st := call(); st.WinnerRoute != "a" || len(rest) != 1 {
			t.Fatalf("the probe at 11.01 s: %+v, restores %+v", st, rest)
		}
	})
}

// A Retry-After from a stream that was running when its route was ejected
// lengthens the ejection to its time, without counting as another.
func TestHealthRetryAfterDuringEjection(t *testing.T) {
	h := newHealth(Config{EjectFailures: 1, EjectBase: 10 * time.Second, EjectMax: time.Minute})
	t0 := time.Unix(1000, 0)
	before := h.epoch() // a stream launched before the ejection
	if _, ejected := h.failure("a", t0, 0, h.epoch(), false); !ejected {
		t.Fatal("not ejected")
	}
	if ev, ejected := h.failure("a", t0.Add(time.Second), 30*time.Second, before, false); ejected {
		t.Fatalf("ejected again: %+v", ev)
	}
	if ok, _ := h.admit("a", t0.Add(30*time.Second), true); ok {
		t.Fatal("admitted before the Retry-After's time (31 s)")
	}
	if ok, probe := h.admit("a", t0.Add(31*time.Second), true); !ok || !probe.probe {
		t.Fatalf("at 31 s: admitted %v, probe %v; want the probe", ok, probe)
	}
}

// Every route ejected, the one whose ejection ends first serves: what its
// attempts, launched during the ejection, say counts as any attempt's —
// EjectFailures failures eject it again, for longer, and a success
// restores it — while an attempt launched before that new ejection is
// stale and restores nothing.
func TestHealthAttemptsLaunchedDuringEjectionCount(t *testing.T) {
	h := newHealth(Config{EjectFailures: 2, EjectBase: 10 * time.Second, EjectMax: time.Minute})
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	h.failure("a", at(0), 0, h.epoch(), false)
	if ev, ejected := h.failure("a", at(0), 0, h.epoch(), false); !ejected || ev.For != 10*time.Second {
		t.Fatalf("first ejection: %+v, %v", ev, ejected)
	}
	during := h.epoch() // attempts launched during the first ejection
	if _, ejected := h.failure("a", at(2), 0, during, false); ejected {
		t.Fatal("ejected again after one failure")
	}
	if ev, ejected := h.failure("a", at(3), 0, during, false); !ejected || ev.For != 20*time.Second || ev.Ejections != 2 {
		t.Fatalf("second ejection: %+v, %v; want 20s after EjectFailures failures", ev, ejected)
	}
	if restoredBy(h.success("a", during)) {
		t.Fatal("restored by an attempt launched before the second ejection")
	}
	if !restoredBy(h.success("a", h.epoch())) {
		t.Fatal("not restored by an attempt launched during the second ejection")
	}
	if h.marked.Load() != 0 {
		t.Fatal("a restored route still has health state")
	}
}

// A Retry-After ejects a route until its time; every route ejected still
// serves the call on the one whose ejection ends first; losers never
// count as failures.
func TestHealthRetryAfterAndAllEjected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{fail(10*time.Millisecond, &statusErr{code: 429, after: 30 * time.Second})})
		b := newUpstream("b", []step{fail(10*time.Millisecond, &statusErr{code: 429, after: 20 * time.Second})})
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 2, HedgeBudget: 1})
		s := p.Stream(t.Context(), a.route(), b.route())
		drain(s, time.Now())
		if st := s.Stats(); len(st.Attempts) != 2 || st.Outcome != OutcomeError {
			t.Fatalf("first call %+v", st)
		}
		// Both ejected; b's ends first: the call goes there.
		b.scripts = [][]step{texts("b", 1, 100*time.Millisecond, 0)}
		b.srcs = nil
		s = p.Stream(t.Context(), a.route(), b.route())
		drain(s, time.Now())
		if st := s.Stats(); st.Attempts[0].Route != "b" || st.Outcome != OutcomeOK {
			t.Fatalf("all ejected: %+v", st)
		}
		// Losers: a hanging primary that loses to a TTFT hedge 100 times
		// is never ejected.
		c := newUpstream("c", []step{hang()})
		d := newUpstream("d", texts("d", 1, 10*time.Millisecond, 0))
		q := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, HedgeBudget: 1})
		for range 100 {
			drain(q.Stream(t.Context(), c.route(), d.route()), time.Now())
		}
		if ok, _ := q.health.admit("c", time.Now(), true); !ok {
			t.Fatal("a loser was counted as a failure")
		}
	})
}

// NoEjection turns ejection off: a route that keeps failing is still the
// primary; a Retry-After only keeps hedges away.
func TestHealthOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := down("a")
		b := newUpstream("b", texts("b", 1, 10*time.Millisecond, 0))
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 2, HedgeBudget: 1, EjectFailures: NoEjection})
		for range 10 {
			s := p.Stream(t.Context(), a.route(), b.route())
			drain(s, time.Now())
			if st := s.Stats(); st.Attempts[0].Route != "a" {
				t.Fatalf("with ejection off the call started on %s", st.Attempts[0].Route)
			}
		}
	})
}

// The health table is shared by all calls of a Prober: 10,000 concurrent
// calls under -race, against a route that always fails and one that
// always answers, all succeed and the failing route ends up ejected —
// once: the first wave's 50 failures, at the same instant, are one outage.
// (The calls take 10 s; the ejection outlasts them.)
func TestHealthConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A burst large enough for the first wave's error hedges: the
		// budget is not what this test is about.
		var ejections atomic.Int32
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 2, HedgeBudget: 1, HedgeBurst: 1000, EjectBase: time.Minute},
			OnEject(func(RouteEvent) { ejections.Add(1) }))
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed := 0
		for w := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					a := down("a")
					b := newUpstream("b", texts("b", 1, time.Duration(w+1)*time.Millisecond, 0))
					s := p.Stream(t.Context(), a.route(), b.route())
					drain(s, time.Now())
					if s.Stats().Outcome != OutcomeOK {
						mu.Lock()
						failed++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if failed != 0 {
			t.Fatalf("%d calls failed", failed)
		}
		if ok, _ := p.health.admit("a", time.Now(), true); ok {
			t.Fatal("the failing route is not ejected")
		}
		if n := ejections.Load(); n != 1 {
			t.Fatalf("%d ejections, want 1", n)
		}
	})
}

// While a route is ejected, hedges skip it too (a TTFT hedge from the
// primary goes to the next healthy route, not back to the ejected one),
// the call span records the skip, and Close and the caller's cancel end
// such a call as they end any other.
func TestHealthHedgesSkipEjectedAndSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{hang()})
		b := down("b")
		c := newUpstream("c", texts("c", 1, 10*time.Millisecond, 0))
		p, exp := recorded(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, HedgeBudget: 1, EjectFailures: 1})
		// b fails once as a primary: ejected (EjectFailures 1).
		drain(p.Stream(t.Context(), b.route(), c.route()), time.Now())
		if ok, _ := p.health.admit("b", time.Now(), true); ok {
			t.Fatal("b not ejected")
		}
		exp.Reset()
		// a hangs; its TTFT hedge would go to b, the next route, but b is
		// ejected: it goes to c.
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		drain(s, time.Now())
		if st := s.Stats(); len(st.Attempts) != 2 || st.Attempts[1].Route != "c" || st.WinnerRoute != "c" {
			t.Fatalf("stats %+v", st)
		}
		// A call listing b first starts on the next route and says so.
		s = p.Stream(t.Context(), b.route(), c.route())
		drain(s, time.Now())
		skipped := false
		for _, sp := range exp.GetSpans() {
			for _, ev := range sp.Events {
				if ev.Name == semconv.EventRouteSkipped {
					v, _ := attrOf(ev.Attributes, semconv.EventRoute)
					skipped = skipped || v.AsString() == "b"
				}
			}
		}
		if st := s.Stats(); st.Attempts[0].Route != "c" || !skipped {
			t.Fatalf("stats %+v, skip event %v", st, skipped)
		}
		// Close and cancel are unaffected by an ejected route.
		for _, how := range []string{"close", "cancel"} {
			ctx, cancel := context.WithCancel(t.Context())
			s := p.Stream(ctx, b.route(), a.route())
			time.AfterFunc(500*time.Millisecond, func() {
				if how == "close" {
					s.Close()
				} else {
					cancel()
				}
			})
			drain(s, time.Now())
			s.Close()
			cancel()
			if st := s.Stats(); st.Outcome != OutcomeCanceled || st.Attempts[0].Outcome != AttemptCanceled || st.Attempts[0].Route != "a" {
				t.Fatalf("%s: %+v", how, st)
			}
		}
	})
}

// A stall timeout of a committed stream and a TTFT timeout count against
// the route's health like errors do (docs/design.md §2 rule 11).
func TestHealthTimeoutsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stall := newUpstream("s", []step{content(100*time.Millisecond, "x"), hang()})
		p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: time.Second, EjectFailures: 2})
		for range 2 {
			drain(p.Stream(t.Context(), stall.route()), time.Now())
		}
		if ok, _ := p.health.admit("s", time.Now(), true); ok {
			t.Fatal("two stall timeouts did not eject the route")
		}
		slow := newUpstream("f", []step{hang()})
		q := mustNew(t, Config{MaxAttempts: 1, TTFTTimeout: time.Second, EjectFailures: 2})
		for range 2 {
			drain(q.Stream(t.Context(), slow.route()), time.Now())
		}
		if ok, _ := q.health.admit("f", time.Now(), true); ok {
			t.Fatal("two TTFT timeouts did not eject the route")
		}
	})
}

// When every route is ejected the call starts on the one whose ejection
// ends first: the call span reports the others skipped, not the route it
// used.
func TestRegressionAllEjectedSkipsOthersOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, exp := recorded(t, Config{MaxAttempts: 1, EjectFailures: 1, EjectBase: 10 * time.Second})
		drain(p.Stream(t.Context(), down("a").route()), time.Now())
		time.Sleep(time.Second)
		drain(p.Stream(t.Context(), down("b").route()), time.Now())
		exp.Reset()
		// a's ejection ends first: the call uses a and passes over b.
		s := p.Stream(t.Context(), newUpstream("a", texts("a", 1, 10*time.Millisecond, 0)).route(),
			newUpstream("b", texts("b", 1, 10*time.Millisecond, 0)).route())
		drain(s, time.Now())
		var skipped []string
		for _, sp := range exp.GetSpans() {
			for _, ev := range sp.Events {
				if ev.Name == semconv.EventRouteSkipped {
					v, _ := attrOf(ev.Attributes, semconv.EventRoute)
					skipped = append(skipped, v.AsString())
				}
			}
		}
		if st := s.Stats(); st.Attempts[0].Route != "a" || fmt.Sprint(skipped) != "[b]" {
			t.Fatalf("first attempt on %s, routes reported skipped %v: want a used and only b skipped", st.Attempts[0].Route, skipped)
		}
	})
}

// A committed stream silent for two minutes with its resumes used up is
// skipped every ResumeAfter (240 times here): the call span records the
// skip once, so the SDK's limit of 128 events per span, which drops the
// oldest, keeps the ejection, the hedge and the commit that the connector
// counts. It recorded every repeat, and the ejection was lost.
func TestRegressionRepeatedSkipsKeepEjection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		skips := 0
		p, exp := recorded(t, Config{HedgeAfter: 10 * time.Second, MaxAttempts: 2, EjectFailures: 1,
			ResumeAfter: 500 * time.Millisecond}, withText(), OnResume(func(e ResumeEvent) {
			if e.Skipped != "" {
				skips++
			}
		}))
		a := continuing("a", []step{fail(10*time.Millisecond, &statusErr{code: 503})})
		b := continuing("b", []step{content(100*time.Millisecond, "w0"), hang()})
		s := p.Stream(t.Context(), a.route(), b.route())
		if !s.Next() {
			t.Fatal(s.Err())
		}
		time.AfterFunc(120*time.Second, func() { s.Close() })
		for s.Next() {
		}
		counts := map[string]int{}
		call, _ := spansOf(t, exp)
		for _, ev := range call.Events {
			counts[ev.Name]++
		}
		if skips < 200 {
			t.Fatalf("OnResume saw %d skips: the hook must see every one", skips)
		}
		if counts[semconv.EventRouteEjected] != 1 || counts[semconv.EventHedge] != 1 || counts[semconv.EventCommit] != 1 ||
			counts[semconv.EventResumeSkipped] != 1 || call.DroppedEvents != 0 {
			t.Fatalf("call span events %v, %d dropped: want the ejection, hedge and commit kept and one skip", counts, call.DroppedEvents)
		}
	})
}

// The same for a resume the budget refuses every ResumeAfter: one
// throttle event on the span, every throttle counted in
// streamwatch.hedges.throttled and seen by OnThrottle.
func TestRegressionRepeatedThrottlesOneEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		throttles := 0
		p, exp := recorded(t, Config{HedgeAfter: time.Hour, ResumeAfter: 500 * time.Millisecond, MaxAttempts: 3},
			withText(), OnThrottle(func(ThrottleEvent) { throttles++ }))
		p.budget.tokens = 0
		s := p.Stream(t.Context(), continuing("a", []step{content(time.Second, "A"), hang()}).route(),
			continuing("b", []step{content(100*time.Millisecond, "B")}).route())
		time.AfterFunc(time.Minute, func() { s.Close() })
		drain(s, time.Now())
		call, _ := spansOf(t, exp)
		events := 0
		for _, ev := range call.Events {
			if ev.Name == semconv.EventHedgeThrottled {
				events++
			}
		}
		n := mustAttr(t, call, semconv.HedgesThrottled).AsInt64()
		if events != 1 || throttles < 100 || n != int64(throttles) {
			t.Fatalf("%d throttle events on the span, %d throttles seen by the hook, %d counted: want 1 event and every throttle counted", events, throttles, n)
		}
	})
}

// throttleEvents returns the streamwatch.hedge.throttled events of a call
// span, each as its trigger and reason.
func throttleEvents(call tracetest.SpanStub) []string {
	var evs []string
	for _, ev := range call.Events {
		if ev.Name != semconv.EventHedgeThrottled {
			continue
		}
		var trig, reason string
		for _, kv := range ev.Attributes {
			switch kv.Key {
			case semconv.EventTrigger:
				trig = kv.Value.AsString()
			case semconv.EventThrottleReason:
				reason = kv.Value.AsString()
			}
		}
		evs = append(evs, trig+"/"+reason)
	}
	return evs
}

// Before commit, each silence of an attempt is a rescue of its own: two
// silences of one Buffered (or held) attempt, each refused a stall hedge by
// the budget, with content received and not delivered between them, are
// two throttle events, as they are two refusals.
func TestRegressionEachSilenceBeforeCommitRecordsItsThrottle(t *testing.T) {
	for _, d := range []Delivery{Buffered, Streaming} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(100*time.Millisecond, "x"), content(3*time.Second, "y"),
					content(3*time.Second, "z"), content(100*time.Millisecond, "w")})
				b := newUpstream("b", []step{content(100*time.Millisecond, "b")})
				cfg := Config{HedgeAfter: 10 * time.Second, StallAfter: time.Second, HedgeBurst: 1, Delivery: d}
				if d == Streaming {
					cfg.HoldChunks = 10
				}
				p, exp := recorded(t, cfg)
				p.budget.tokens = 0
				s := p.Stream(t.Context(), a.route(), b.route())
				drain(s, time.Now())
				st := s.Stats()
				call, _ := spansOf(t, exp)
				evs := throttleEvents(call)
				if st.HedgesThrottled != 2 || !slices.Equal(evs, []string{"stall/budget", "stall/budget"}) {
					t.Fatalf("%d refusals, throttle events %v: want 2 and two stall/budget events", st.HedgesThrottled, evs)
				}
			})
		})
	}
}

// A failure calls for a rescue of its own: two attempts that fail in turn,
// each refused an error hedge by the budget with no launch between them,
// are two throttle events, though each reads as the other (the same
// trigger, the same next route and index). The TTFT hedge due 1 s after
// the hedge's launch is refused too: three refusals, three events.
func TestRegressionEachFailureRecordsItsThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{fail(2500*time.Millisecond, &statusErr{code: 503})})
		b := newUpstream("b", []step{fail(3*time.Second, &statusErr{code: 503})})
		p, exp := recorded(t, Config{HedgeAfter: time.Second, HedgeBurst: 1, EjectFailures: NoEjection})
		p.budget.tokens, p.budget.reserve = 1, 0 // the TTFT hedge takes the only token
		s := p.Stream(t.Context(), a.route(), b.route())
		drain(s, time.Now())
		st := s.Stats()
		call, _ := spansOf(t, exp)
		evs := throttleEvents(call)
		if len(st.Attempts) != 2 || st.HedgesThrottled != 3 || !slices.Equal(evs, []string{"ttft/budget", "error/budget", "error/budget"}) {
			t.Fatalf("%d attempts, %d refusals, throttle events %v: want 2, 3 and ttft/budget then two error/budget events",
				len(st.Attempts), st.HedgesThrottled, evs)
		}
	})
}

// Repeats are a set, not the latest alone: refusals that alternate are
// one event each, whatever their order, until a launch, failure or
// content chunk makes them news again; and a call writes at most
// maxNotedEvents of them.
func TestNotedIsASet(t *testing.T) {
	var r callRecorder
	x := notedEvent{attempt: 1, trigger: TriggerTTFT, reason: string(ThrottlePushback)}
	y := notedEvent{attempt: 1, trigger: TriggerTTFT, reason: string(ThrottleBudget)}
	skip := notedEvent{skip: true, attempt: 1, route: "b", reason: string(ResumeNoRoute)}
	for i, want := range []struct {
		e    notedEvent
		news bool
	}{{x, true}, {y, true}, {x, false}, {y, false}, {skip, true}, {skip, false}} {
		if got := r.news(want.e); got != want.news {
			t.Errorf("%d: news(%+v) = %v, want %v", i, want.e, got, want.news)
		}
	}
	r.forget()
	if !r.news(y) || !r.news(x) || r.news(y) {
		t.Error("after forget, each is news once again")
	}
	written := 5 // so far
	for range 2 * maxNotedEvents {
		r.forget()
		if r.news(x) {
			written++
		}
	}
	if written != maxNotedEvents {
		t.Errorf("%d events written, want at most %d", written, maxNotedEvents)
	}
}

// One silence of the committed stream is one rescue, however the budget's
// refusals of its resume read: the route they name moves as other calls'
// refusals take routes out of the rotation (b, then b and c, refused for
// a while), and each refusal named the route the rotation pointed at.
func TestRegressionOneSilenceOneThrottleWhereverTheRotationPoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, exp := recorded(t, Config{HedgeAfter: time.Hour, ResumeAfter: 500 * time.Millisecond, MaxAttempts: 3,
			ResumeRefusedFor: 2 * time.Second}, withText())
		p.budget.tokens = 0
		a := continuing("a", []step{content(100*time.Millisecond, "A"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "B")})
		c := continuing("c", []step{content(100*time.Millisecond, "C")})
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		go func() { // other calls' refused continuations
			for i := range 10 {
				time.Sleep(3 * time.Second)
				now := time.Now()
				p.refusals.add("b", now, now.Add(2*time.Second))
				if i%2 == 1 {
					p.refusals.add("c", now, now.Add(2*time.Second))
				}
			}
		}()
		time.AfterFunc(time.Minute, func() { s.Close() })
		drain(s, time.Now())
		st := s.Stats()
		call, _ := spansOf(t, exp)
		routes := map[string]bool{}
		for _, ev := range call.Events {
			if ev.Name != semconv.EventHedgeThrottled {
				continue
			}
			for _, kv := range ev.Attributes {
				if kv.Key == semconv.EventRoute {
					routes[kv.Value.AsString()] = true
				}
			}
		}
		if evs := throttleEvents(call); !slices.Equal(evs, []string{"resume/budget"}) || st.HedgesThrottled < 100 {
			t.Fatalf("throttle events %v (routes %v), %d refusals: want one resume/budget event for the ~118 refusals", evs, routes, st.HedgesThrottled)
		}
	})
}

// A failure that calls for no rescue leaves a run of repeats as it is; one
// that calls for a rescue starts a new one. A resume races the silent
// committed stream and fails (503 at 3.6 s), and the budget refuses every
// resume after the first tokens. While another resume still races, the
// failure calls for none: the refusals before and after it are one event.
// As the last resume racing, it calls for the next at once: that refusal
// is a second event, however alike it reads.
func TestRegressionRacingResumeFailureAndTheRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tokens   float64 // the first resumes take them all
		attempts int
		events   []string
	}{
		{"another resume races", 2, 3, []string{"resume/budget"}},
		{"the last resume racing", 1, 2, []string{"resume/budget", "resume/budget"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, exp := recorded(t, Config{HedgeAfter: time.Hour, ResumeAfter: 500 * time.Millisecond, MaxAttempts: 4,
					HedgeBurst: tc.tokens, EjectFailures: NoEjection}, withText())
				p.budget.tokens, p.budget.reserve = tc.tokens, 0
				a := continuing("a", []step{content(100*time.Millisecond, "A"), hang()})
				b := continuing("b", []step{fail(3*time.Second, &statusErr{code: 503})})
				c := continuing("c", []step{hang()})
				s := p.Stream(t.Context(), a.route(), b.route(), c.route())
				time.AfterFunc(20*time.Second, func() { s.Close() })
				drain(s, time.Now())
				st := s.Stats()
				call, _ := spansOf(t, exp)
				if evs := throttleEvents(call); len(st.Attempts) != tc.attempts || !slices.Equal(evs, tc.events) || st.HedgesThrottled < 30 {
					t.Fatalf("%d attempts, throttle events %v, %d refusals: want %d attempts and %v for the ~37 refusals",
						len(st.Attempts), evs, st.HedgesThrottled, tc.attempts, tc.events)
				}
			})
		})
	}
}

// A stream refused a rescue at every pause writes at most maxNotedEvents
// throttle events, so the call's first events stay on its span: a
// Buffered call whose TTFT hedge took the only token streams 150 chunks
// 2.5 s apart, each pause a stall hedge the budget refuses.
func TestRegressionManyRefusalsKeepTheFirstEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []step{content(100*time.Millisecond, "b0")}
		for range 150 {
			steps = append(steps, content(2500*time.Millisecond, "b"))
		}
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", steps)
		p, exp := recorded(t, Config{HedgeAfter: time.Second, StallAfter: 2 * time.Second, HedgeBurst: 1, Delivery: Buffered})
		p.budget.tokens, p.budget.reserve = 1, 0
		s := p.Stream(t.Context(), a.route(), b.route())
		drain(s, time.Now())
		st := s.Stats()
		call, _ := spansOf(t, exp)
		counts := map[string]int{}
		for _, ev := range call.Events {
			counts[ev.Name]++
		}
		if st.HedgesThrottled != 150 || counts[semconv.EventHedgeThrottled] != maxNotedEvents ||
			counts[semconv.EventHedge] != 1 || counts[semconv.EventCommit] != 1 || call.DroppedEvents != 0 {
			t.Fatalf("%d refusals, events %v, %d dropped: want 150 refusals, %d throttle events, the hedge and the commit kept",
				st.HedgesThrottled, counts, call.DroppedEvents, maxNotedEvents)
		}
	})
}

// Each silence records its skip anew: two silences of the committed
// stream, its resumes used up, give two skip events (the repeats within
// each are one).
func TestRegressionEachSilenceRecordsItsSkip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, exp := recorded(t, Config{HedgeAfter: 10 * time.Second, MaxAttempts: 2, ResumeAfter: 500 * time.Millisecond}, withText())
		a := continuing("a", []step{fail(10*time.Millisecond, &statusErr{code: 503})})
		b := continuing("b", []step{content(100*time.Millisecond, "w0"), content(3*time.Second, "w1"),
			content(3*time.Second, "w2")})
		drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
		call, _ := spansOf(t, exp)
		skips := 0
		for _, ev := range call.Events {
			if ev.Name == semconv.EventResumeSkipped {
				skips++
			}
		}
		if skips != 2 {
			t.Fatalf("%d skip events, want one per silence: 2", skips)
		}
	})
}

// A probe that outlives its ejection — the route restored by another
// attempt and ejected again while it ran — is stale like any attempt
// launched before the latest ejection: completing does not restore the
// route, failing does not eject it again, and neither releases the
// claim of the probe the new ejection admits.
func TestRegressionStaleProbe(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	for _, end := range []string{"completes", "fails", "is abandoned"} {
		t.Run(end, func(t *testing.T) {
			h := newHealth(Config{EjectFailures: 1, EjectBase: time.Second, EjectMax: time.Minute})
			h.failure("a", at(0), 0, h.epoch(), false) // ejected until 1 s
			ok, probe := h.admit("a", at(1), true)
			if !ok || !probe.probe {
				t.Fatalf("at 1 s: admitted %v, probe %v", ok, probe)
			}
			oldProbe := probe.epoch // the epoch the probe launches with: its claim's
			// Every route ejected: another attempt served, completed and
			// restored the route; a third failed with Retry-After 5 s.
			if !restoredBy(h.success("a", h.epoch())) {
				t.Fatal("not restored")
			}
			h.failure("a", at(1.5), 5*time.Second, h.epoch(), false) // until 6.5 s
			switch end {
			case "completes":
				if restoredBy(h.success("a", oldProbe)) {
					t.Fatal("the stale probe restored the route")
				}
			case "fails":
				if ev, ejected := h.failure("a", at(2), 0, oldProbe, true); ejected {
					t.Fatalf("the stale probe ejected the route again: %+v", ev)
				}
			case "is abandoned":
				h.abandon("a", oldProbe)
			}
			if ok, _ := h.admit("a", at(3), true); ok {
				t.Fatal("admitted at 3 s, inside the Retry-After ejection")
			}
			if ok, probe := h.admit("a", at(6.5), true); !ok || !probe.probe {
				t.Fatalf("at 6.5 s: admitted %v, probe %v; want the new probe", ok, probe)
			}
			h.abandon("a", oldProbe)
			if ok, _ := h.admit("a", at(6.6), true); ok {
				t.Fatal("the stale probe released the new probe's claim: a second probe admitted")
			}
		})
	}
}

// A Retry-After shorter than the ejection in force (from an attempt made
// while every route was ejected) does not cut it short; a longer one
// ejects the route until its time. Found by an independent pass: a 20 ms
// hint ended a 1 s ejection.
func TestRegressionShortRetryAfterKeepsLongerEjection(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	h := newHealth(Config{EjectFailures: 2, EjectBase: time.Second, EjectMax: time.Minute})
	h.failure("a", at(0), 0, h.epoch(), false)
	h.failure("a", at(0), 0, h.epoch(), false) // ejected until 1 s
	// Every route ejected: an attempt launched now fails with a 20 ms hint
	// (one failure, below EjectFailures).
	if ev, ejected := h.failure("a", at(0.1), 20*time.Millisecond, h.epoch(), false); ejected {
		t.Fatalf("a 20 ms Retry-After replaced a 1 s ejection: %+v", ev)
	}
	if ok, _ := h.admit("a", at(0.5), true); ok {
		t.Fatal("admitted at 0.5 s, inside the 1 s ejection")
	}
	ev, ejected := h.failure("a", at(0.5), 5*time.Second, h.epoch(), false)
	if !ejected || ev.For != 5*time.Second || ev.Reason != EjectRetryAfter || ev.Ejections != 2 {
		t.Fatalf("a 5 s Retry-After: %+v, %v; want ejected until 5.5 s", ev, ejected)
	}
	if ok, _ := h.admit("a", at(5.4), true); ok {
		t.Fatal("admitted at 5.4 s, inside the Retry-After")
	}
	if ok, probe := h.admit("a", at(5.5), true); !ok || !probe.probe {
		t.Fatalf("at 5.5 s: admitted %v, probe %v; want the probe", ok, probe)
	}
}

// Each route name ever ejected used to keep its latest ejection for the
// Prober's life (~100 B a name). Past ejectedKept names, an ejection is
// forgotten once every stream admitted before it has ended: 2,000 calls,
// each on a route name of its own that answers 503, keep at most
// ejectedKept + 2 of them (the old code kept 2,000), and counting the
// admissions leaves no count behind.
func TestHealthEjectedRoutesForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ejections int
		p := mustNew(t, Config{EjectFailures: 1, MaxAttempts: 1}, OnEject(func(RouteEvent) { ejections++ }))
		for i := range 2000 {
			s := p.Stream(t.Context(), down(fmt.Sprintf("route-%d", i)).route())
			drain(s, time.Now())
		}
		h := p.health
		h.mu.Lock()
		kept := len(h.ejectedSeq)
		h.mu.Unlock()
		if ejections != 2000 || kept > ejectedKept+2 {
			t.Errorf("%d ejections, %d kept; want 2000, at most %d", ejections, kept, ejectedKept+2)
		}
		if n := h.live[0].Load() + h.live[1].Load(); n != 0 {
			t.Errorf("%d admissions still counted after every call ended", n)
		}
	})
}

// An ejection is not forgotten while a stream admitted before it runs:
// that stream stays stale however many other routes are ejected (and
// their ejections forgotten) meanwhile, so its failure after its route
// was restored does not eject the route again; once it has ended, the
// next ejection forgets the route's.
func TestHealthEjectionKeptWhileStaleStreamRuns(t *testing.T) {
	h := newHealth(Config{EjectFailures: 1, EjectBase: time.Second, EjectMax: time.Minute})
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	// admitFail is an attempt on name, not ejected, admitted at s, that
	// fails at once.
	admitFail := func(name string, s float64) (ejected bool) {
		ok, adm := h.admit(name, at(s), true)
		if !ok {
			t.Fatalf("%s not admitted", name)
		}
		_, ejected = h.failure(name, at(s), 0, adm.epoch, adm.probe)
		h.leave(&adm)
		return ejected
	}
	ok, old := h.admit("a", at(0), true) // a long stream on a
	if !ok {
		t.Fatal("a not admitted")
	}
	if !admitFail("a", 0) {
		t.Fatal("a not ejected")
	}
	// a's probe succeeds: a is restored.
	ok, probe := h.admit("a", at(2), true)
	if !ok || !probe.probe || !restoredBy(h.success("a", probe.epoch)) {
		t.Fatal("a not probed and restored")
	}
	h.leave(&probe)
	for i := range 3 * ejectedKept {
		if !admitFail(fmt.Sprintf("other-%d", i), 3) {
			t.Fatalf("other-%d not ejected", i)
		}
	}
	if ev, ejected := h.failure("a", at(4), 0, old.epoch, old.probe); ejected {
		t.Fatalf("the stream admitted before a's ejection ejected it again: %+v", ev)
	}
	h.mu.Lock()
	kept := len(h.ejectedSeq)
	h.mu.Unlock()
	if kept != 3*ejectedKept+1 {
		t.Fatalf("%d ejections kept while a stream admitted before them runs; want all %d", kept, 3*ejectedKept+1)
	}
	h.leave(&old)
	admitFail("last-1", 5) // ends the grace period the old stream held up
	admitFail("last-2", 5)
	h.mu.Lock()
	_, aKept := h.ejectedSeq["a"]
	kept = len(h.ejectedSeq)
	h.mu.Unlock()
	if aKept || kept > ejectedKept+2 {
		t.Fatalf("after the stream ended: a kept %v, %d kept", aKept, kept)
	}
}

// A route's health entry is forgotten when the route has had no failure,
// no ejection in force and no probe for EjectMax: 2,000 calls, 10 ms
// each, on route names of their own that answer 503 once (ejected, their
// ejection then ends unprobed) or, with EjectFailures 3, fail once and
// are never asked again, keep the entries of the last few seconds only
// (the old code kept 2,000 of each).
func TestHealthIdleRoutesForgotten(t *testing.T) {
	for _, failures := range []int{1, 3} {
		t.Run(fmt.Sprintf("EjectFailures=%d", failures), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := mustNew(t, Config{EjectFailures: failures, EjectBase: time.Second, EjectMax: time.Second, MaxAttempts: 1})
				for i := range 2000 {
					drain(p.Stream(t.Context(), down(fmt.Sprintf("route-%d", i)).route()), time.Now())
				}
				h := p.health
				h.mu.Lock()
				kept := len(h.routes)
				h.mu.Unlock()
				// A sweep at most once a second forgets what has been idle
				// for a second after its failure and its ejection's end:
				// about the last 3 s of names, 100 a second.
				if kept > 400 || int(h.marked.Load()) != kept {
					t.Errorf("%d entries kept, %d marked; want at most 400, equal", kept, h.marked.Load())
				}
			})
		})
	}
}

// A route forgotten that way starts afresh: its failure before is not
// counted towards the next ejection, and its next ejection is EjectBase
// long, not the second one's 2 × EjectBase.
func TestHealthIdleRouteStartsAfresh(t *testing.T) {
	h := newHealth(Config{EjectFailures: 2, EjectBase: 10 * time.Second, EjectMax: time.Minute})
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	h.failure("a", at(0), 0, h.epoch(), false)
	if _, ejected := h.failure("a", at(0), 0, h.epoch(), false); !ejected {
		t.Fatal("a not ejected")
	}
	h.failure("e", at(0), 0, h.epoch(), false) // e fails once
	// a's ejection ends at 10 s, unprobed; at 80 s, more than EjectMax
	// after it and after e's failure, b's first failure makes an entry,
	// which sweeps.
	h.failure("b", at(80), 0, h.epoch(), false)
	if _, ejected := h.failure("e", at(81), 0, h.epoch(), false); ejected {
		t.Fatal("e ejected after one failure: its entry was not forgotten")
	}
	h.failure("a", at(81), 0, h.epoch(), false)
	ev, ejected := h.failure("a", at(82), 0, h.epoch(), false)
	if !ejected || ev.For != 10*time.Second || ev.Ejections != 1 {
		t.Fatalf("a's next ejection: %+v, %v; want a first one, 10s", ev, ejected)
	}
	// A route in its ejection or being probed is not forgotten.
	h.failure("c", at(200), 0, h.epoch(), false)
	h.failure("c", at(200), 0, h.epoch(), false) // c ejected until 210 s
	ok, probe := h.admit("c", at(210), true)
	if !ok || !probe.probe {
		t.Fatal("c not probed")
	}
	h.failure("f", at(300), 10*time.Minute, h.epoch(), false) // f away until 900 s
	h.failure("d", at(400), 0, h.epoch(), false)              // sweeps: c is probing, f away
	if !restoredBy(h.success("c", probe.epoch)) {
		t.Fatal("c's probe restored nothing: its entry was forgotten while it probed")
	}
	if ok, _ := h.admit("f", at(500), true); ok {
		t.Fatal("f admitted at 500 s: its Retry-After (900 s) was forgotten")
	}
}

// A route forgotten while ejected (its ejection ended, it was not asked
// for EjectMax) is restored without a probe, and the listener hears it,
// so a listener counting ejected routes from OnEject and OnRestore does
// not count it for good; the call whose failure found it records no
// restore on its span, as none of its streams restored the route.
func TestHealthForgottenEjectionRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ejected, restored []string
		p := mustNew(t, Config{EjectFailures: 1, EjectBase: time.Second, EjectMax: time.Second, MaxAttempts: 1},
			OnEject(func(e RouteEvent) { ejected = append(ejected, fmt.Sprint(e.Route, e.Seq)) }),
			OnRestore(func(e RouteEvent) {
				if e.Context == nil {
					t.Error("restore without a Context")
				}
				restored = append(restored, fmt.Sprint(e.Route, e.Seq))
			}))
		drain(p.Stream(t.Context(), down("a").route()), time.Now())
		time.Sleep(5 * time.Second) // a's ejection ended 4 s ago, unprobed
		drain(p.Stream(t.Context(), down("b").route()), time.Now())
		// Seq: b's failure forgot a (restored) before it ejected b.
		if fmt.Sprint(ejected) != "[a1 b3]" || fmt.Sprint(restored) != "[a2]" {
			t.Fatalf("ejected %v, restored %v (route and Seq); want [a1 b3], [a2]", ejected, restored)
		}
	})
}

// A route's own entry, idle, is forgotten when the route next fails or is
// next asked, not only when another route's first failure sweeps: its
// failures long past no longer count towards an ejection, and an ejection
// that ended long ago unprobed is not the one its next ejection follows.
func TestHealthIdleEntryForgottenByItsRoute(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	t.Run("failure", func(t *testing.T) {
		h := newHealth(Config{EjectFailures: 2, EjectBase: 10 * time.Second, EjectMax: 10 * time.Second})
		h.failure("a", at(0), 0, h.epoch(), false)
		if _, ejected := h.failure("a", at(30), 0, h.epoch(), false); ejected {
			t.Fatal("a ejected by failures 30 s apart, EjectMax 10 s")
		}
		if _, ejected := h.failure("a", at(31), 0, h.epoch(), false); !ejected {
			t.Fatal("a not ejected by two failures 1 s apart")
		}
		// Ejected until 41 s; unprobed, it fails again (a stream admitted
		// after the ejection) at 60 s: afresh, a first failure.
		if _, ejected := h.failure("a", at(60), 0, h.epoch(), false); ejected {
			t.Fatal("a ejected again by one failure 19 s after its ejection ended")
		}
		if got := h.takeForgotten(); len(got) != 1 || got[0].Route != "a" {
			t.Fatalf("forgotten %v, want [a]: its ejection ended unprobed", got)
		}
		markedExact(t, h)
	})
	t.Run("admission", func(t *testing.T) {
		h := newHealth(Config{EjectFailures: 1, EjectBase: time.Second, EjectMax: 5 * time.Second})
		h.failure("a", at(0), 0, h.epoch(), false) // ejected until 1 s
		ok, adm := h.admit("a", at(3600), true)
		if !ok || adm.probe || adm.restored == 0 {
			t.Fatalf("a asked an hour later: ok %v, %+v; want admitted afresh, no probe, restored", ok, adm)
		}
		ev, ejected := h.failure("a", at(3600), 0, adm.epoch, adm.probe)
		if !ejected || ev.Ejections != 1 || ev.For != time.Second {
			t.Fatalf("a's next ejection: %+v, %v; want a first one, 1s", ev, ejected)
		}
		if ok, adm := h.admit("a", at(3600.5), true); ok || adm.restored != 0 {
			t.Fatalf("a admitted during its new ejection: %v, %+v", ok, adm)
		}
		h.leave(&adm)
		markedExact(t, h)
		h.failure("b", at(3700), 0, h.epoch(), false) // ejected until 3701 s
		if ok, adm := h.admit("b", at(7200), true); !ok || adm.restored == 0 {
			t.Fatalf("b asked an hour later: %v, %+v", ok, adm)
		}
		markedExact(t, h)
	})
	// The listener hears the restore before the ejection that follows it,
	// so one that tracks each route's state ends with the route ejected:
	// asked for after an hour, and failing after a stream that outlived
	// its ejection by more than EjectMax (every route ejected, it was the
	// one to use).
	for name, second := range map[string]step{
		"asked":  fail(10*time.Millisecond, &statusErr{code: 503}),
		"failed": fail(10*time.Second, &statusErr{code: 503}),
	} {
		t.Run("listener/"+name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var events []string
				p := mustNew(t, Config{EjectFailures: 1, EjectBase: time.Second, EjectMax: 5 * time.Second, MaxAttempts: 1},
					OnEject(func(e RouteEvent) {
						events = append(events, fmt.Sprintf("eject %s %v #%d seq %d", e.Route, e.For, e.Ejections, e.Seq))
					}),
					OnRestore(func(e RouteEvent) { events = append(events, fmt.Sprintf("restore %s seq %d", e.Route, e.Seq)) }))
				a := newUpstream("a", []step{fail(10*time.Millisecond, &statusErr{code: 503})}, []step{second})
				drain(p.Stream(t.Context(), a.route()), time.Now())
				if name == "asked" {
					time.Sleep(time.Hour)
				}
				drain(p.Stream(t.Context(), a.route()), time.Now())
				if want := "[eject a 1s #1 seq 1 restore a seq 2 eject a 1s #1 seq 3]"; fmt.Sprint(events) != want {
					t.Fatalf("listener heard %v, want %s", events, want)
				}
				markedExact(t, p.health)
			})
		})
	}
}

// Each call reports its route events on its own goroutine, after the
// change: a restore whose listener is slow reaches it after an ejection
// that came later from another call. RouteEvent.Seq keeps the order of the
// changes, so a listener keeping the event with the largest Seq ends with
// the route's state.
func TestHealthEventSeqOrdersConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a",
			[]step{fail(10*time.Millisecond, &statusErr{code: 503})},
			texts("a", 2, 10*time.Millisecond, 10*time.Millisecond),
			[]step{fail(10*time.Millisecond, &statusErr{code: 503})})
		var heard []string
		latest := map[string]RouteEvent{}
		hear := func(what string, e RouteEvent) {
			heard = append(heard, fmt.Sprintf("%s#%d", what, e.Seq))
			if e.Seq > latest[e.Route].Seq {
				latest[e.Route] = e
			}
		}
		release := make(chan struct{})
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 1, EjectFailures: 1, EjectBase: time.Second,
			EjectMax: time.Minute},
			OnEject(func(e RouteEvent) { hear("eject", e) }),
			OnRestore(func(e RouteEvent) { <-release; hear("restore", e) }))
		call := func() Stats {
			s := p.Stream(t.Context(), a.route())
			drain(s, time.Now())
			return s.Stats()
		}
		call() // a fails: ejected for 1 s
		time.Sleep(2 * time.Second)
		probed := make(chan Stats)
		go func() { probed <- call() }() // the probe completes: a restored, its listener slow
		time.Sleep(time.Second)
		if st := call(); st.Outcome != OutcomeError { // admitted, fails: a ejected again
			t.Fatalf("second failure: %+v", st)
		}
		close(release)
		if st := <-probed; st.Outcome != OutcomeOK {
			t.Fatalf("probe: %+v", st)
		}
		if got := strings.Join(heard, " "); got != "eject#1 eject#3 restore#2" {
			t.Fatalf("heard %s, want eject#1 eject#3 restore#2: the slow restore last, its Seq between", got)
		}
		if e := latest["a"]; e.Ejections != 1 || e.Seq != 3 {
			t.Fatalf("latest event of a %+v, want the second ejection", e)
		}
		if ok, adm := p.health.admit("a", time.Now(), true); ok {
			p.health.leave(&adm)
			t.Fatal("a admitted: the health table does not have it ejected")
		}
	})
}

// restoredBy is the restored result of health.success, for conditions.
func restoredBy(_ RouteEvent, restored bool) bool { return restored }

// markedExact fails t unless marked counts exactly the entries in routes:
// admit's lock-free path takes marked 0 for no entry at all.
func markedExact(t *testing.T, h *health) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if got, want := int(h.marked.Load()), len(h.routes); got != want {
		t.Errorf("marked %d, %d entries", got, want)
	}
}

// A stale stream's Retry-After lengthens an ejection in force only: once
// the ejection has ended, the probe decides, and the route is not kept
// away unreported.
func TestHealthStaleRetryAfterOnceEjectionEnded(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	h := newHealth(Config{EjectFailures: 1, EjectBase: 10 * time.Second, EjectMax: time.Minute})
	old := h.epoch() // a stream running on a before its ejection
	h.failure("a", at(1), 0, h.epoch(), false)
	h.failure("a", at(5), 20*time.Second, old, false) // in force: until 25 s
	if ok, _ := h.admit("a", at(24), true); ok {
		t.Fatal("a admitted at 24 s: a Retry-After during its ejection was dropped")
	}
	h.failure("a", at(30), 30*time.Second, old, false) // ended at 25 s
	ok, adm := h.admit("a", at(31), true)
	if !ok || !adm.probe {
		t.Fatalf("a at 31 s: ok %v, probe %v; want probed, a stale Retry-After after the ejection ignored", ok, adm.probe)
	}
	h.leave(&adm)
	markedExact(t, h)
}
