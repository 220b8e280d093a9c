package hedgeprobe

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Regression: EjectBase × ejections overflowed for a huge EjectBase into a
// negative length, which ended the second ejection at once.
func TestRegressionHugeEjectBase(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	h := newHealth(Config{EjectFailures: 1, EjectBase: huge, EjectMax: huge})
	now := time.Now()
	for i := 1; i <= 3; i++ {
		ev, ejected := h.failure("a", now, 0, h.epoch(), false)
		if !ejected || ev.For != huge {
			t.Fatalf("ejection %d: %+v, want one for %v", i, ev, huge)
		}
		now = now.Add(time.Second)
	}
}

// Regression: a probe admitted for a hedge that never launched because the
// Stream was closing (a Close at the hedge's instant) was not given back:
// the route waited for the probe's verdict for good, and no call tried it
// again unless every route was ejected.
func TestRegressionProbeGivenBackWhenClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: 1, EjectBase: time.Second})
		drain(p.Stream(t.Context(), down("b").route()), time.Now())
		time.Sleep(time.Second)
		ok, probe := p.health.admit("b", time.Now(), false) // the hedge's route choice
		if !ok || !probe.probe {
			t.Fatalf("b after its ejection: admitted %v, probe %v", ok, probe)
		}
		giveBackOnClose(t, p, probe)
		if ok, probe := p.health.admit("b", time.Now(), true); !ok || !probe.probe {
			t.Fatalf("the next call: b admitted %v, probe %v; want its probe back", ok, probe)
		}
	})
}

// TestRegressionStaleAfterRestore: a stream launched before its route's
// ejection that fails after a probe has restored the route is stale all
// the same (one outage is one ejection). The restore dropped the record of
// the ejection, so the stream's failure ejected the route again.
func TestRegressionStaleAfterRestore(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	h := newHealth(Config{EjectFailures: 1, EjectBase: 10 * time.Second, EjectMax: time.Minute})
	_, x := h.admit("a", at(0), true) // stream X, running from 0 s
	if _, ejected := h.failure("a", at(1), 0, h.epoch(), false); !ejected {
		t.Fatal("not ejected at 1 s")
	}
	ok, probe := h.admit("a", at(11), true)
	if !ok || !probe.probe || !restoredBy(h.success("a", probe.epoch)) {
		t.Fatalf("at 11 s: admitted %v, probe %+v, or not restored", ok, probe)
	}
	if ev, ejected := h.failure("a", at(30), 0, x.epoch, false); ejected {
		t.Fatalf("X's failure at 30 s ejected a again: %+v", ev)
	}
	if restoredBy(h.success("a", x.epoch)) {
		t.Fatal("X's success restored a route that is not ejected")
	}
	if ok, adm := h.admit("a", at(31), true); !ok || adm.probe {
		t.Fatalf("at 31 s: admitted %v, %+v; want a healthy route", ok, adm)
	}
	if h.marked.Load() != 0 {
		t.Fatalf("marked = %d with no route holding state", h.marked.Load())
	}
	// X's Retry-After, stale too, keeps nothing away once the route is
	// restored: it kept a away unreported, and then admitted one attempt
	// at a time, as the probe of an ejection there never was.
	if ev, ejected := h.failure("a", at(32), time.Minute, x.epoch, false); ejected {
		t.Fatalf("X's 429 at 32 s ejected a again: %+v", ev)
	}
	for range 2 {
		if ok, adm := h.admit("a", at(33), true); !ok || adm.probe {
			t.Fatalf("at 33 s: admitted %v, %+v; want a healthy route", ok, adm)
		}
	}
	if h.marked.Load() != 0 {
		t.Fatalf("marked = %d with no route holding state", h.marked.Load())
	}
}

// TestRegressionAdmittedBeforeEjection: an attempt admitted to a healthy
// route that another call ejects before the attempt launches is a stream
// of that outage: it neither ejects the route again nor restores it. The
// attempt took its epoch at launch, after the ejection, and counted.
func TestRegressionAdmittedBeforeEjection(t *testing.T) {
	for _, end := range []string{"fails", "completes"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 1, EjectFailures: 1, EjectBase: 10 * time.Second})
				p.health.failure("a", time.Now(), time.Hour, p.health.epoch(), false) // a away for an hour
				steps := texts("b", 1, 3*time.Second, 0)
				if end == "fails" {
					steps = []step{fail(3*time.Second, &statusErr{code: 503})}
				}
				s := p.Stream(t.Context(), newUpstream("a").route(), newUpstream("b", steps).route())
				ejected := false
				// The primary's route choice reports a skipped after b is
				// admitted, before the attempt launches: another call's
				// failure ejects b then.
				s.obs = append(s.obs, &onRouteSkipped{f: func(route string) {
					if route == "a" && !ejected {
						_, ejected = p.health.failure("b", time.Now(), 0, p.health.epoch(), false)
					}
				}})
				drain(s, time.Now())
				if !ejected || s.Stats().Attempts[0].Route != "b" {
					t.Fatalf("ejected %v, attempts %+v: the case was not set up", ejected, s.Stats().Attempts)
				}
				if r := p.health.routes["b"]; r == nil || r.ejections != 1 {
					t.Errorf("b: %+v; want the one ejection of 0 s", r)
				}
				if ok, _ := p.health.admit("b", time.Now(), true); ok {
					t.Error("b admitted at 3 s, inside its ejection of 10 s")
				}
			})
		})
	}
}

// onRouteSkipped is a listener that calls f for every route a call passes
// over.
type onRouteSkipped struct {
	hooks
	f func(route string)
}

func (o *onRouteSkipped) routeSkipped(route string, _ time.Time) { o.f(route) }

// giveBackOnClose hands claim, a probe of route b, to a hedge on a Stream
// its caller has closed: the hedge never launches, and gives it back.
func giveBackOnClose(t *testing.T, p *Prober[chunk], claim admission) {
	t.Helper()
	s := p.Stream(t.Context(), newUpstream("a").route(), down("b").route())
	s.race.admitted = claim
	s.Close()
	if s.launch(launch[chunk]{trigger: TriggerTTFT, route: 1}) {
		t.Fatal("an attempt launched on a closed Stream")
	}
}

// Regression: a probe's attempt took its epoch when it launched, after
// admit had granted the claim. Another call's attempt (launched while
// every route was ejected) could eject the route again in between, which
// revoked the claim; the probe then carried the new epoch, was not stale,
// and when it ended — abandoned, or failed — it released (or re-ejected
// over) the claim of the next probe, admitted when the new ejection
// ended: two probes at once, or a restored route ejected by an old one.
// A probe now launches at its claim's epoch.
func TestRegressionRevokedProbeClaim(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	setup := func(t *testing.T) (h *health, old admission) {
		h = newHealth(Config{EjectFailures: 1, EjectBase: time.Second, EjectMax: time.Minute})
		h.failure("a", at(0), 0, h.epoch(), false) // ejected until 1 s
		during := h.epoch()                        // another call's attempt, every route ejected
		ok, old := h.admit("a", at(1), true)
		if !ok || !old.probe {
			t.Fatalf("at 1 s: admitted %v, probe %+v", ok, old)
		}
		// Before the probe launches, the other attempt fails with a
		// Retry-After of 2 s: ejected again, the claim revoked.
		if _, ejected := h.failure("a", at(1), 2*time.Second, during, false); !ejected {
			t.Fatal("not ejected again")
		}
		if ok, next := h.admit("a", at(3), true); !ok || !next.probe {
			t.Fatalf("at 3 s: admitted %v, probe %+v; want the next probe", ok, next)
		}
		return h, old
	}
	t.Run("abandoned", func(t *testing.T) {
		h, old := setup(t)
		h.abandon("a", old.epoch)
		if ok, _ := h.admit("a", at(3.1), true); ok {
			t.Fatal("the revoked probe's abandon released the next probe's claim: two probes at once")
		}
	})
	t.Run("failed", func(t *testing.T) {
		h, old := setup(t)
		if ev, ejected := h.failure("a", at(3.1), 0, old.epoch, true); ejected {
			t.Fatalf("the revoked probe's failure ejected the route again: %+v", ev)
		}
		if ok, _ := h.admit("a", at(3.2), true); ok {
			t.Fatal("the revoked probe's failure released the next probe's claim")
		}
	})
	// Through a Stream: the primary takes b's probe; before it launches,
	// another call's attempt (launched while every route was ejected)
	// ejects b again with a Retry-After of 2 s. At 2.5 s another call
	// takes the next probe; at 3 s the primary fails: stale, it neither
	// ejects b again nor releases the next probe's claim.
	t.Run("launched", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 1, EjectFailures: 1, EjectBase: time.Second})
			p.health.failure("a", time.Now(), time.Hour, p.health.epoch(), false) // a away for an hour
			p.health.failure("b", time.Now(), 0, p.health.epoch(), false)         // b ejected for 1 s
			during := p.health.epoch()
			time.Sleep(time.Second)
			s := p.Stream(t.Context(), newUpstream("a").route(),
				newUpstream("b", []step{fail(3*time.Second, &statusErr{code: 503})}).route())
			revoked := false
			// The primary's route choice reports a skipped before it
			// launches on b: the window between grant and launch.
			s.obs = append(s.obs, &onRouteSkipped{f: func(route string) {
				if route == "a" && !revoked {
					revoked = true
					p.health.failure("b", time.Now(), 2*time.Second, during, false)
				}
			}})
			go func() {
				time.Sleep(2500 * time.Millisecond)
				if ok, next := p.health.admit("b", time.Now(), true); !ok || !next.probe {
					t.Errorf("2.5 s into the call: b admitted %v, probe %+v; want the next probe", ok, next)
				}
			}()
			if g := drain(s, time.Now()); !revoked || g.err == nil {
				t.Fatalf("revoked %v, err %v: the case was not set up", revoked, g.err)
			}
			if ok, _ := p.health.admit("b", time.Now(), true); ok {
				t.Error("the revoked probe's failure released the next probe's claim")
			}
			if r := p.health.routes["b"]; r == nil || r.ejections != 2 {
				t.Errorf("b: %+v; want 2 ejections (the revoked probe's failure is stale)", r)
			}
		})
	})
	// A hedge whose probe was granted and then revoked never launches
	// (the caller closed); giving it back must not release the next
	// probe's claim.
	t.Run("given back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, EjectFailures: 1, EjectBase: time.Second})
			drain(p.Stream(t.Context(), down("b").route()), time.Now()) // b ejected for 1 s
			during := p.health.epoch()
			time.Sleep(time.Second)
			ok, old := p.health.admit("b", time.Now(), false)
			if !ok || !old.probe {
				t.Fatalf("b after its ejection: admitted %v, probe %+v", ok, old)
			}
			p.health.failure("b", time.Now(), 2*time.Second, during, false) // revokes it
			time.Sleep(2 * time.Second)
			if ok, next := p.health.admit("b", time.Now(), true); !ok || !next.probe {
				t.Fatalf("b after its second ejection: admitted %v, probe %+v", ok, next)
			}
			giveBackOnClose(t, p, old)
			if ok, _ := p.health.admit("b", time.Now(), true); ok {
				t.Fatal("the revoked probe, given back, released the next probe's claim")
			}
		})
	})
}

// Regression: attempts launched at the same clock reading as their route's
// ejection counted as launched after it, so one wave of calls failing at
// once (every Open answering 503 at one instant, as virtual time makes
// them, and a coarse clock can) ejected the route once per EjectFailures
// of them, each time for longer. Launches are ordered by the ejection
// count now, not by the clock.
func TestRegressionOneInstantWaveOneEjection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls = 30
		var ejections atomic.Int32
		p := mustNew(t, Config{HedgeAfter: time.Hour, MaxAttempts: 2, HedgeBudget: 1, HedgeBurst: 1000, EjectBase: 10 * time.Second},
			OnEject(func(RouteEvent) { ejections.Add(1) }))
		// Every call opens the failing route before any failure counts.
		var entered atomic.Int32
		all := make(chan struct{})
		failing := Route[chunk]{Name: "a", Provider: "prov-a", Model: "model-a", Open: func(context.Context, Attempt) (Source[chunk], error) {
			if entered.Add(1) == calls {
				close(all)
			}
			<-all
			return nil, &statusErr{code: 503}
		}}
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				drain(p.Stream(t.Context(), failing, newUpstream("b", texts("b", 1, 100*time.Millisecond, 0)).route()), time.Now())
			})
		}
		wg.Wait()
		if n := ejections.Load(); n != 1 {
			t.Fatalf("%d calls failing at one instant: %d ejections, want 1", calls, n)
		}
	})
}

// A probe of an ejected route that the call's TTFT timeout cut off before
// its hedge delay gives no verdict (the failure is not counted), so it
// must give the probe back, as any probe without a verdict does: else no
// later attempt could probe the route, and it would never return.
func TestRegressionUncountedProbeGivesTheProbeBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: 9900 * time.Millisecond, TTFTTimeout: 10 * time.Second, MaxAttempts: 2,
			EjectFailures: 1, EjectBase: 10 * time.Second})
		b := newUpstream("b", []step{fail(10*time.Millisecond, &statusErr{code: 503})},
			texts("b", 1, 500*time.Millisecond, 0), texts("b", 1, 500*time.Millisecond, 0))
		c := newUpstream("c", texts("c", 1, 100*time.Millisecond, 0))
		// b fails: ejected for 10 s; c answers.
		drain(p.Stream(t.Context(), b.route(), c.route()), time.Now())
		time.Sleep(10 * time.Second)
		// b's ejection is over: the hedge to it, 100 ms before the call's
		// TTFT timeout, is its probe.
		a := newUpstream("a", []step{hang()})
		s := p.Stream(t.Context(), a.route(), b.route())
		if g := drain(s, time.Now()); !errors.Is(g.err, ErrTTFTTimeout) || len(s.Stats().Attempts) != 2 {
			t.Fatalf("err %v, %d attempts; want a TTFT timeout after a hedge to b", g.err, len(s.Stats().Attempts))
		}
		// The probe is free again: the next call probes b first.
		s = p.Stream(t.Context(), b.route(), c.route())
		drain(s, time.Now())
		if st := s.Stats(); st.Attempts[0].Route != "b" || st.WinnerRoute != "b" {
			t.Fatalf("the next call started on %s, won by %s: b's probe was never given back", st.Attempts[0].Route, st.WinnerRoute)
		}
	})
}
