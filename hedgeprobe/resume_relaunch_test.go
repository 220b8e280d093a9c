package hedgeprobe

import (
	"net"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// launches returns each attempt's route, trigger and launch offset.
func launches(s *Stream[chunk]) []string {
	var out []string
	for _, a := range s.Stats().Attempts {
		out = append(out, a.Route+":"+string(a.Trigger)+"@"+a.LaunchOffset.String())
	}
	return out
}

// readAndLaunched drains s and fails t unless the caller read text, with
// no error, from attempts launched as want lists them (launches).
func readAndLaunched(t *testing.T, s *Stream[chunk], text string, want ...string) got {
	t.Helper()
	g := drain(s, time.Now())
	if joined(g) != text || g.err != nil {
		t.Fatalf("text %q err %v, want %q", joined(g), g.err, text)
	}
	if l := launches(s); !slices.Equal(l, want) {
		t.Fatalf("attempts %v, want %v", l, want)
	}
	return g
}

// The last resume racing a silent committed stream fails with a transient
// error: the caller has already waited ResumeAfter through this silence,
// so the next continuation goes at once (3.1 s), not a ResumeAfter after
// the failed one's launch (5 s).
func TestResumeRelaunchedWhenRacerFails(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"503", &statusErr{code: 503}},
		{"429", &statusErr{code: 429}},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(time.Second, "A"), hang()})
				b := continuing("b", []step{fail(100*time.Millisecond, c.err)})
				d := continuing("c", []step{content(100*time.Millisecond, "B")})
				cfg := resumeCfg()
				cfg.EjectFailures = NoEjection
				p := mustNew(t, cfg, withText())
				s := p.Stream(t.Context(), a.route(), b.route(), d.route())
				g := readAndLaunched(t, s, "AB", "a:primary@0s", "b:resume@3s", "c:resume@3.1s")
				wantDur(t, "the continuation", g.at[1], 3200*time.Millisecond)
			})
		})
	}
}

// A racing resume that fails while another resume still races calls for
// no new one: the other carries the answer on, and the next resume comes
// a ResumeAfter after the latest launch (7 s, on the route after c's), not
// at the failure (5.5 s).
func TestResumeRacerFailsWhileAnotherRaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()})
		b := continuing("b", []step{fail(2500*time.Millisecond, &statusErr{code: 503})}, []step{content(100*time.Millisecond, "B")})
		c := continuing("c", []step{hang()})
		cfg := resumeCfg()
		cfg.MaxAttempts, cfg.EjectFailures = 4, NoEjection
		p := mustNew(t, cfg, withText())
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		readAndLaunched(t, s, "AB", "a:primary@0s", "b:resume@3s", "c:resume@5s", "b:resume@7s")
	})
}

// A refusal (a 400 on the prefill) does not hurry the next resume: the
// call falls back to the watchdog and the usual cadence (5 s).
func TestResumeRacerRefusedKeepsTheCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()})
		b := continuing("b", []step{fail(100*time.Millisecond, &statusErr{code: 400})})
		c := continuing("c", []step{content(100*time.Millisecond, "B")})
		p := mustNew(t, resumeCfg(), withText())
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		readAndLaunched(t, s, "AB", "a:primary@0s", "b:resume@3s", "c:resume@5s")
	})
}

// A silent stream that sent an item during the race (its finish reason)
// is ending: when the racing resume fails, that item goes to the caller
// and no continuation is launched at the failure (4 s).
func TestResumeRacerFailsWhileStreamHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), control(2500*time.Millisecond, "fin"), hang()})
		b := continuing("b", []step{fail(time.Second, &statusErr{code: 503})})
		c := continuing("c", []step{content(100*time.Millisecond, "B")})
		cfg := resumeCfg()
		cfg.EjectFailures = NoEjection
		p := mustNew(t, cfg, withText())
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		time.AfterFunc(10*time.Second, func() { s.Close() })
		g := drain(s, time.Now())
		if len(g.texts) < 2 || g.texts[1] != "fin" {
			t.Fatalf("caller read %q, want A then the held fin", g.texts)
		}
		wantDur(t, "the held fin", g.at[1], 4*time.Second)
		for _, l := range launches(s)[2:] {
			if l == "c:resume@4s" {
				t.Fatalf("attempts %v: a continuation launched at the failure", launches(s))
			}
		}
	})
}

// The resume at once does not go back to the route that just failed: with
// two routes it goes to the stalled stream's own route (3.05 s), where
// asking the failing one again would send it request after request (three
// in 100 ms before ejection).
func TestResumeRelaunchAvoidsTheFailedRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()}, []step{content(100*time.Millisecond, "B")})
		b := continuing("b", []step{fail(50*time.Millisecond, &statusErr{code: 429})})
		cfg := resumeCfg()
		cfg.MaxAttempts, cfg.EjectFailures = 5, NoEjection
		p := mustNew(t, cfg, withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		readAndLaunched(t, s, "AB", "a:primary@0s", "b:resume@3s", "a:resume@3.05s")
	})
}

// With no route but the failed one to continue on, nothing is launched or
// reported at the failure: the next resume asks it again at the usual
// cadence, a ResumeAfter after the failed one's launch (5 s).
func TestResumeRelaunchWithNoOtherRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(time.Second, "A"), hang()}) // cannot continue
		b := continuing("b", []step{fail(50*time.Millisecond, &statusErr{code: 503})}, []step{content(100*time.Millisecond, "B")})
		var resumes []ResumeEvent
		cfg := resumeCfg()
		cfg.EjectFailures = NoEjection
		p := mustNew(t, cfg, withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		s := p.Stream(t.Context(), a.route(), b.route())
		readAndLaunched(t, s, "AB", "a:primary@0s", "b:resume@3s", "b:resume@5s")
		for _, e := range resumes {
			if e.Skipped != "" {
				t.Fatalf("resume events %+v: a skip reported", resumes)
			}
		}
	})
}

// A resume at once that the budget refuses is counted, and leaves the
// cadence as it was: the next resume comes a ResumeAfter after the failed
// one's launch (5 s), not after the refusal (6 s).
func TestResumeRelaunchRefusedKeepsTheCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()})
		b := continuing("b", []step{fail(time.Second, &statusErr{code: 503})})
		c := continuing("c", []step{content(100*time.Millisecond, "B")})
		var th []ThrottleEvent
		cfg := resumeCfg()
		cfg.EjectFailures, cfg.HedgeBurst = NoEjection, 1
		p := mustNew(t, cfg, withText(), OnThrottle(func(e ThrottleEvent) { th = append(th, e) }))
		p.budget.mu.Lock()
		p.budget.tokens, p.budget.reserve = 1, 0 // b takes it
		p.budget.mu.Unlock()
		time.AfterFunc(4500*time.Millisecond, func() { // after the refusal at 4 s
			p.budget.mu.Lock()
			p.budget.tokens = 1
			p.budget.mu.Unlock()
		})
		s := p.Stream(t.Context(), a.route(), b.route(), c.route())
		readAndLaunched(t, s, "AB", "a:primary@0s", "b:resume@3s", "c:resume@5s")
		if len(th) != 1 || th[0].Trigger != TriggerResume || th[0].Reason != ThrottleBudget || th[0].Elapsed != 4*time.Second {
			t.Fatalf("throttles %+v, want the budget's refusal of the resume at once, at 4s", th)
		}
	})
}
