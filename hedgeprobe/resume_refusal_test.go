package hedgeprobe

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamwatch/streamwatch/semconv"
)

// A resume whose only continuing route is under pushback (Retry-After) is
// a skip, ResumeNoRoute, reported to OnResume — not a throttle: Stats and
// OnThrottle count hedges the budget or pushback refused, resumes only the
// budget refused. The route is not asked.
func TestResumeSkippedDuringPushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(time.Second, "ok")}, []step{content(time.Second, "A"), hang()})
		b := continuing("b", []step{fail(10*time.Millisecond, &statusErr{code: 429, after: time.Minute})})
		var resumes []ResumeEvent
		var throttles []ThrottleEvent
		cfg := resumeCfg()
		cfg.StallTimeout, cfg.EjectFailures = 5*time.Second, NoEjection
		p := mustNew(t, cfg, withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }),
			OnThrottle(func(e ThrottleEvent) { throttles = append(throttles, e) }))
		// Call 1: b answers 429, Retry-After 1 min; a, the next route, answers.
		if g := drain(p.Stream(t.Context(), b.route(), a.route()), time.Now()); g.err != nil || joined(g) != "ok" {
			t.Fatalf("call 1: text %q err %v", joined(g), g.err)
		}
		// Call 2: a falls silent after "A"; the resume due at 3 s has no route.
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if !errors.Is(g.err, ErrStallTimeout) || joined(g) != "A" {
			t.Fatalf("call 2: text %q err %v, want the watchdog's stall timeout", joined(g), g.err)
		}
		if len(resumes) == 0 || resumes[0].Skipped != ResumeNoRoute || resumes[0].Route != "" {
			t.Fatalf("resume events %+v, want a no_route skip", resumes)
		}
		if st := s.Stats(); st.HedgesThrottled != 0 || len(throttles) != 0 || len(b.attempts()) != 1 {
			t.Fatalf("throttled %d, throttle events %+v, b asked %d times", st.HedgesThrottled, throttles, len(b.attempts()))
		}
	})
}

// A route that refuses the continuation (a fatal error on the resume
// attempt) fails that attempt as refused, not the call; the next resume
// goes to the next route that continues, and the refusing route is not
// asked again.
func TestResumeRefusedFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()})
		b := continuing("b")
		b.openErr = &statusErr{code: 400}
		c := continuing("c", []step{content(100*time.Millisecond, "B")})
		var resumes []ResumeEvent
		p := mustNew(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		g := drain(s, time.Now())
		if joined(g) != "AB" || g.err != nil {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if len(resumes) != 3 || resumes[1].Skipped != ResumeRefused || resumes[2].Route != "c" || resumes[2].Elapsed != 5*time.Second {
			t.Fatalf("resumes %+v", resumes)
		}
		if !p.refusals.refused("b", time.Now()) {
			t.Fatal("b not remembered as refusing")
		}
		if ok, _ := p.health.admit("b", time.Now(), true); !ok {
			t.Fatal("a refusal counted against b's health")
		}
	})
}

// What cannot be continued is not resumed: a tool call in progress; the
// watchdog ends the call, and the skip is reported with its reason.
func TestResumeNotResumable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "tool:lookup("), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "x")})
		var resumes []ResumeEvent
		cfg := resumeCfg()
		cfg.StallTimeout = 5 * time.Second
		p := mustNew(t, cfg, withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if !errors.Is(g.err, ErrStallTimeout) || b.opened() != 0 {
			t.Fatalf("err %v, b opened %d", g.err, b.opened())
		}
		if len(resumes) == 0 || resumes[0].Skipped != ResumeNotResumable {
			t.Fatalf("resumes %+v", resumes)
		}
	})
}

// A dry budget throttles the resume (counted, reported) and the stall
// watchdog still ends the call at StallTimeout.
func TestResumeBudgetDry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "B")})
		cfg := resumeCfg()
		cfg.StallTimeout = 5 * time.Second
		var th []ThrottleEvent
		p := mustNew(t, cfg, withText(), OnThrottle(func(e ThrottleEvent) { th = append(th, e) }))
		p.budget.tokens = 0
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		var te *TimeoutError
		if !errors.As(g.err, &te) || te.Kind != TimeoutStall || !te.Truncated || te.ChunksDelivered != 1 {
			t.Fatalf("err %v", g.err)
		}
		wantDur(t, "watchdog", time.Since(start), 6*time.Second)
		if s.Stats().HedgesThrottled < 1 || len(th) < 1 || th[0].Trigger != TriggerResume || th[0].Reason != ThrottleBudget || b.opened() != 0 {
			t.Fatalf("throttled %d events %+v", s.Stats().HedgesThrottled, th)
		}
	})
}

// Bad input: a continuation the route cannot build (Open returns
// ErrCannotContinue) skips the resume with the reason "build" on the call
// span, does not mark the route as refusing, and the call goes on: the
// stalled stream recovers and the caller reads it whole.
func TestResumeCannotBuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(3*time.Second, "B")})
		b := continuing("b")
		b.openErr = fmt.Errorf("unknown message shape: %w", ErrCannotContinue)
		var resumes []ResumeEvent
		p, exp := recorded(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if joined(g) != "AB" || g.err != nil || s.Stats().Outcome != OutcomeOK {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if len(resumes) != 2 || resumes[1].Skipped != ResumeBuild || p.refusals.refused("b", time.Now()) {
			t.Fatalf("resumes %+v", resumes)
		}
		var reason string
		for _, sp := range exp.GetSpans() {
			for _, ev := range sp.Events {
				if ev.Name == semconv.EventResumeSkipped {
					for _, kv := range ev.Attributes {
						if kv.Key == semconv.EventResumeReason {
							reason = kv.Value.AsString()
						}
					}
				}
			}
		}
		if reason != string(ResumeBuild) {
			t.Fatalf("call span reason %q, want %q", reason, ResumeBuild)
		}
	})
}

// A route that could not build a call's continuation is not asked again
// by that call, not even where the call lists it twice: the next resume
// goes to the stalled stream's own route, which continues it, instead of
// spending the call's last attempt on the same build failure. Another
// call still asks the route.
func TestResumeCannotBuildNotAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "Hel"), hang()}, []step{content(100*time.Millisecond, "lo")})
		b := continuing("b")
		b.openErr = fmt.Errorf("unknown message shape: %w", ErrCannotContinue)
		cfg := resumeCfg()
		cfg.StallTimeout = time.Minute
		p, _ := recorded(t, cfg, withText())
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route(), b.route())
		g := drain(s, start)
		if joined(g) != "Hello" || g.err != nil {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		var routes []string
		for _, at := range s.Stats().Attempts {
			routes = append(routes, at.Route+":"+string(at.Trigger))
		}
		if want := []string{"a:primary", "b:resume", "a:resume"}; !slices.Equal(routes, want) {
			t.Fatalf("attempts %v, want %v", routes, want)
		}
		if n := len(b.attempts()); n != 1 {
			t.Fatalf("b was asked %d times, want 1", n)
		}
		// The second resume came one ResumeAfter after the first: 1 s + 2 s + 2 s.
		if at := s.Stats().Attempts[2].LaunchOffset; at != 5*time.Second {
			t.Fatalf("second resume launched at %v, want 5s", at)
		}
		b.openErr = nil // another call: b is asked (and continues) again
		a2 := continuing("a", []step{content(time.Second, "Hel"), hang()})
		b.scripts = [][]step{{content(100*time.Millisecond, "p")}}
		if g := drain(p.Stream(t.Context(), a2.route(), b.route()), time.Now()); joined(g) != "Help" {
			t.Fatalf("second call read %q", joined(g))
		}
	})
}

// Regression: a resume skipped before any route was chosen (here the
// delivered text is past ResumeMaxText) put streamwatch.route="" on its call-span event,
// which reads as a route named "". Now the attribute is left out; a skip
// that has a route (build, refused) keeps it.
func TestRegressionResumeSkippedWithoutRoute(t *testing.T) {
	stalls := func() *upstream {
		return newUpstream("a", []step{content(time.Second, "AAA"), content(3*time.Second, "B")})
	}
	cannotBuild := func() *upstream {
		u := continuing("b")
		u.openErr = fmt.Errorf("unknown message shape: %w", ErrCannotContinue)
		return u
	}
	for _, c := range []struct {
		maxText int
		reason  ResumeSkip
		route   string
	}{
		{2, ResumeTooLong, ""},
		{0, ResumeBuild, "b"},
	} {
		synctest.Test(t, func(t *testing.T) {
			cfg := resumeCfg()
			cfg.ResumeMaxText = c.maxText
			p, exp := recorded(t, cfg, withText())
			if g := drain(p.Stream(t.Context(), stalls().route(), cannotBuild().route()), time.Now()); joined(g) != "AAAB" || g.err != nil {
				t.Fatalf("%s: text %q err %v", c.reason, joined(g), g.err)
			}
			call, _ := spansOf(t, exp)
			var skips int
			for _, ev := range call.Events {
				if ev.Name != semconv.EventResumeSkipped {
					continue
				}
				skips++
				reason, _ := attrOf(ev.Attributes, semconv.EventResumeReason)
				route, hasRoute := attrOf(ev.Attributes, semconv.EventRoute)
				if reason.AsString() != string(c.reason) || hasRoute != (c.route != "") || route.AsString() != c.route {
					t.Errorf("skipped event %v, want reason %s and route %q", ev.Attributes, c.reason, c.route)
				}
			}
			if skips != 1 {
				t.Errorf("%s: %d %s events, want 1", c.reason, skips, semconv.EventResumeSkipped)
			}
		})
	}
}

// A route that refused a continuation once and is never asked again does
// not stay for the Prober's life: the next refusal clears those that
// have ended.
func TestRefusalsForgetEnded(t *testing.T) {
	var r refusals
	now := time.Now()
	for i := range 100 {
		r.add("tenant-"+strconv.Itoa(i), now, now.Add(time.Minute))
	}
	later := now.Add(2 * time.Minute)
	r.add("new", later, later.Add(time.Minute))
	if n := len(r.until); n != 1 {
		t.Fatalf("%d refusals kept, want the one in force", n)
	}
	if !r.refused("new", later) || r.refused("tenant-1", later) {
		t.Fatal("the refusal in force must hold, the ended one not")
	}
}
