package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/semconv"
)

// resumeCfg is the policy of the resume tests: no TTFT hedge in the way.
func resumeCfg() Config {
	return Config{HedgeAfter: time.Hour, ResumeAfter: 2 * time.Second, MaxAttempts: 3}
}

func continuing(name string, scripts ...[]step) *upstream {
	u := newUpstream(name, scripts...)
	u.continues = true
	return u
}

func joined(g got) string {
	var b strings.Builder
	for i, k := range g.kinds {
		if k == Content {
			b.WriteString(g.texts[i])
		}
	}
	return b.String()
}

// The committed stream falls silent after "Hello": exactly ResumeAfter of
// silence later (keepalives do not count) a resume attempt continues
// "Hello" on the next route, wins with its first chunk, and the caller
// reads one text; the stalled stream is cancelled, never failed.
func TestResumeWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "Hel"), content(10*time.Millisecond, "lo"),
			keepalive(500 * time.Millisecond), keepalive(500 * time.Millisecond), keepalive(500 * time.Millisecond), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, " wor"), content(10*time.Millisecond, "ld")})
		var resumes []ResumeEvent
		var done []AttemptEvent
		p := mustNew(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }),
			OnAttemptDone(func(e AttemptEvent) { done = append(done, e) }))
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err != nil || joined(g) != "Hello world" {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if len(resumes) != 1 || resumes[0].Elapsed != 3010*time.Millisecond || resumes[0].Of != 0 || resumes[0].DeliveredChunks != 2 {
			t.Fatalf("resumes = %+v, want one at 3.01s", resumes)
		}
		if got := b.attempts(); len(got) != 1 || got[0].Trigger != TriggerResume || got[0].Prefix != "Hello" || got[0].Index != 1 {
			t.Fatalf("b asked %+v", got)
		}
		st := s.Stats()
		if st.Outcome != OutcomeOK || st.Winner != 1 || st.Attempts[0].Outcome != AttemptCanceled ||
			st.Attempts[1].Outcome != AttemptWinner || st.Attempts[1].ResumeOf != 0 || st.Attempts[1].DeliveredBefore != 2 ||
			st.Attempts[0].ChunksDelivered != 2 || st.Attempts[1].ChunksDelivered != 2 {
			t.Fatalf("stats %+v", st)
		}
		wantDur(t, "continuation's first chunk", g.at[len(g.at)-2], 3110*time.Millisecond)
		for _, e := range done {
			if e.Outcome == AttemptFailed {
				t.Fatalf("attempt reported failed: %+v", e)
			}
		}
		if c := a.closes(); c[0] != 1 {
			t.Fatalf("stalled stream closed %v times", c)
		}
	})
}

// The stalled stream speaks again before the continuation: it wins, and
// the resume attempt is closed once and reported canceled.
func TestResumeOriginalRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(2500*time.Millisecond, "B"), content(10*time.Millisecond, "C")})
		b := continuing("b", []step{content(time.Second, "X")})
		p := mustNew(t, resumeCfg(), withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if joined(g) != "ABC" || g.err != nil {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Winner != 0 || st.Attempts[1].Outcome != AttemptCanceled || st.Attempts[1].Trigger != TriggerResume {
			t.Fatalf("stats %+v", st)
		}
		if c := b.closes(); len(c) != 1 || c[0] != 1 {
			t.Fatalf("resume attempt closed %v", c)
		}
	})
}

// The stalled stream sends a control item (its finish reason) before the
// continuation's first content chunk: the control item has gone to the
// caller, so a continuation could only come after the answer's end. The
// stalled stream wins with any item but a keepalive; the resume is
// cancelled, and the caller reads the first answer to its end.
func TestResumeStalledStreamEndingWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), control(2500*time.Millisecond, "stop"),
			{after: 500 * time.Millisecond, end: true}})
		b := continuing("b", []step{content(time.Second, "X")})
		p := mustNew(t, resumeCfg(), withText())
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		// The resume opened at 3 s; "stop" came at 3.5 s, "X" would at 4 s.
		if g.err != nil || joined(g) != "A" || len(g.kinds) != 2 || g.kinds[1] != Control || g.texts[1] != "stop" {
			t.Fatalf("items %v %q err %v, want A then the finish", g.kinds, g.texts, g.err)
		}
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Winner != 0 || st.Attempts[1].Outcome != AttemptCanceled || st.Attempts[1].Trigger != TriggerResume {
			t.Fatalf("stats %+v", st)
		}
		wantDur(t, "the end", time.Since(start), 4*time.Second)
	})
}

// A control item after the text closes the answer (here its finish
// reason): a stream that falls silent after it is not resumed — the
// continuation would follow the answer's end — and the watchdog ends the
// call. Before commit, a stall hedge of such an attempt starts afresh
// instead of continuing it. Text after a control item opens the answer
// again: a stream that falls silent then is resumed.
func TestResumeNotAfterAnswerClosed(t *testing.T) {
	// silentAfter runs a call whose primary plays steps and falls silent,
	// with b ready to continue it and a 5 s stall watchdog; it returns
	// what the caller read, b, and the resume events.
	silentAfter := func(t *testing.T, steps ...step) (got, *upstream, []ResumeEvent) {
		a := continuing("a", append(steps, hang()))
		b := continuing("b", []step{content(100*time.Millisecond, "X")})
		var resumes []ResumeEvent
		cfg := resumeCfg()
		cfg.StallTimeout = 5 * time.Second
		p := mustNew(t, cfg, withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		return drain(p.Stream(t.Context(), a.route(), b.route()), time.Now()), b, resumes
	}
	synctest.Test(t, func(t *testing.T) {
		g, b, resumes := silentAfter(t, content(time.Second, "A"), control(10*time.Millisecond, "stop"))
		if !errors.Is(g.err, ErrStallTimeout) || joined(g) != "A" || len(g.kinds) != 2 {
			t.Fatalf("items %v %q err %v, want A, the finish, then the stall timeout", g.kinds, g.texts, g.err)
		}
		if len(b.attempts()) != 0 || len(resumes) == 0 || resumes[0].Skipped != ResumeNotResumable {
			t.Fatalf("b asked %+v, resume events %+v; want no resume, skipped not_resumable", b.attempts(), resumes)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), control(10*time.Millisecond, "stop"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "X"), control(10*time.Millisecond, "stop")})
		p := mustNew(t, Config{Delivery: Buffered, HedgeAfter: time.Hour, StallAfter: 2 * time.Second, MaxAttempts: 2}, withText())
		g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
		if g.err != nil || joined(g) != "X" {
			t.Fatalf("text %q err %v, want b's fresh answer", joined(g), g.err)
		}
		if got := b.attempts(); len(got) != 1 || got[0].Prefix != "" || got[0].Trigger != TriggerStall {
			t.Fatalf("b asked %+v, want a fresh stall hedge", got)
		}
	})
	// Content without text (reasoning) after the control item opens
	// nothing.
	synctest.Test(t, func(t *testing.T) {
		g, b, _ := silentAfter(t, content(time.Second, "A"), control(10*time.Millisecond, "stop"), content(10*time.Millisecond, ""))
		if !errors.Is(g.err, ErrStallTimeout) || len(b.attempts()) != 0 {
			t.Fatalf("err %v, b asked %+v; want no resume after reasoning", g.err, b.attempts())
		}
	})
	// Content without text after the text (a server thinking again) is
	// not the answer's text: a stream that falls silent inside it is not
	// resumed, or the continuation would abandon it half written; text
	// after it opens the answer again.
	synctest.Test(t, func(t *testing.T) {
		g, b, resumes := silentAfter(t, content(time.Second, "A"), content(10*time.Millisecond, ""))
		if !errors.Is(g.err, ErrStallTimeout) || len(b.attempts()) != 0 || len(resumes) == 0 || resumes[0].Skipped != ResumeNotResumable {
			t.Fatalf("err %v, b asked %+v, resume events %+v; want no resume inside reasoning, skipped not_resumable", g.err, b.attempts(), resumes)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(10*time.Millisecond, ""), content(10*time.Millisecond, "B"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "C")})
		g := drain(mustNew(t, resumeCfg(), withText()).Stream(t.Context(), a.route(), b.route()), time.Now())
		if g.err != nil || joined(g) != "ABC" {
			t.Fatalf("text %q err %v, want AB continued with C", joined(g), g.err)
		}
		if got := b.attempts(); len(got) != 1 || got[0].Prefix != "AB" {
			t.Fatalf("b asked %+v, want the continuation of AB", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), control(10*time.Millisecond, "usage"), content(10*time.Millisecond, "B"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "C")})
		p := mustNew(t, resumeCfg(), withText())
		g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
		if g.err != nil || joined(g) != "ABC" {
			t.Fatalf("text %q err %v, want AB continued with C", joined(g), g.err)
		}
		if got := b.attempts(); len(got) != 1 || got[0].Prefix != "AB" {
			t.Fatalf("b asked %+v, want the continuation of AB", got)
		}
	})
}

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

// The committed stream fails with a transient error while its resume
// races it: the resume carries on alone, and no second resume continues
// the same text.
func TestResumeRacingWhenStalledStreamFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(time.Second, "A"), fail(2500*time.Millisecond, &statusErr{code: 503})})
		b := continuing("b", []step{content(time.Second, " X")})
		c := continuing("c", []step{content(10*time.Millisecond, " Y")})
		s := mustNew(t, resumeCfg(), withText()).Stream(t.Context(), a.route(), b.route(), c.route())
		g := drain(s, time.Now())
		// Resume on b at 3 s; a fails at 3.5 s; b's " X" at 4 s.
		if g.err != nil || joined(g) != "A X" {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if st := s.Stats(); len(st.Attempts) != 2 || len(c.attempts()) != 0 {
			t.Fatalf("%d attempts, c asked %d times: a second resume continued the same text", len(st.Attempts), len(c.attempts()))
		}
	})
	// When that resume then fails too, nothing carries the answer on: the
	// next resume launches at once.
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(time.Second, "A"), fail(2500*time.Millisecond, &statusErr{code: 503})})
		b := continuing("b", []step{fail(time.Second, &statusErr{code: 503})}, []step{content(10*time.Millisecond, " Y")})
		s := mustNew(t, resumeCfg(), withText()).Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		// Resume on b at 3 s; a fails at 3.5 s; b fails at 4 s; b again.
		if g.err != nil || joined(g) != "A Y" || len(s.Stats().Attempts) != 3 {
			t.Fatalf("text %q err %v, %d attempts; want the third to carry the answer on", joined(g), g.err, len(s.Stats().Attempts))
		}
	})
}

// A continuation that stalls too is resumed in turn, within MaxAttempts,
// on the next route that continues (round robin: back to the first).
func TestResumeTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()}, []step{content(100*time.Millisecond, "C")})
		b := continuing("b", []step{content(100*time.Millisecond, "B"), hang()})
		p := mustNew(t, resumeCfg(), withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if joined(g) != "ABC" || g.err != nil {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		// A at 1 s; resume 1 at 3 s, B at 3.1 s; resume 2 at 5.1 s, C at 5.2 s.
		wantDur(t, "C", g.at[len(g.at)-1], 5200*time.Millisecond)
		if asked := a.attempts(); len(asked) != 2 || asked[1].Prefix != "AB" || asked[1].Index != 2 {
			t.Fatalf("a asked %+v", asked)
		}
		st := s.Stats()
		if st.Winner != 2 || st.Attempts[1].Outcome != AttemptCanceled || st.Attempts[2].ResumeOf != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A continuation that stays silent does not get the next resume: that
// goes to the next route that continues after it, not back to the one
// that just failed to help (the stalled stream is still the winner, so
// counting from its route picked the silent one again). Found by an
// independent pass: routes [a b b], c never asked, a stall timeout.
func TestRegressionSecondResumeGoesOn(t *testing.T) {
	for _, silent := range []struct {
		name string
		step step
	}{{"silent", hang()}, {"failing", fail(200*time.Millisecond, &statusErr{code: 503})}} {
		t.Run(silent.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(time.Second, "A"), hang()})
				b := continuing("b", []step{keepalive(10 * time.Millisecond), silent.step})
				c := continuing("c", []step{content(100*time.Millisecond, "C")})
				p := mustNew(t, resumeCfg(), withText())
				s := p.Stream(t.Context(), a.route(), b.route(), c.route())
				g := drain(s, time.Now())
				if joined(g) != "AC" || g.err != nil {
					t.Fatalf("text %q err %v; want c to carry the answer on", joined(g), g.err)
				}
				if asked := b.attempts(); len(asked) != 1 {
					t.Fatalf("b asked %d times: %+v", len(asked), asked)
				}
				if asked := c.attempts(); len(asked) != 1 || asked[0].Prefix != "A" || asked[0].Index != 2 {
					t.Fatalf("c asked %+v", asked)
				}
			})
		})
	}
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

// Close and the caller's cancel during a resume race end both attempts
// as canceled, and leak nothing (goleak in TestMain).
func TestResumeCloseAndCancelDuringRace(t *testing.T) {
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(time.Second, "A"), hang()})
				b := continuing("b", []step{content(time.Minute, "B")})
				p := mustNew(t, resumeCfg(), withText())
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				s := p.Stream(ctx, a.route(), b.route())
				time.AfterFunc(4*time.Second, func() {
					if how == "close" {
						s.Close()
					} else {
						cancel()
					}
				})
				drain(s, time.Now())
				s.Close()
				st := s.Stats()
				if st.Outcome != OutcomeCanceled || len(st.Attempts) != 2 {
					t.Fatalf("stats %+v", st)
				}
				for _, at := range st.Attempts {
					if at.Outcome != AttemptCanceled {
						t.Fatalf("attempt %+v", at)
					}
				}
				if a.closes()[0] != 1 || b.closes()[0] != 1 {
					t.Fatalf("closes a %v b %v", a.closes(), b.closes())
				}
			})
		})
	}
}

// Before commit (Buffered), the stall hedge continues the stalled
// attempt's text instead of starting over, and the caller reads the
// stalled attempt's items up to the prefix, then the continuation.
func TestResumeBeforeCommitBuffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{control(500*time.Millisecond, "role"), content(500*time.Millisecond, "A"), content(10*time.Millisecond, "B"), hang()})
		b := continuing("b", []step{control(50*time.Millisecond, "role"), content(50*time.Millisecond, "C"), control(10*time.Millisecond, "stop")})
		cfg := resumeCfg()
		cfg.Delivery, cfg.StallAfter = Buffered, time.Second
		p := mustNew(t, cfg, withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if joined(g) != "ABC" || g.err != nil {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if fmt.Sprint(g.texts) != "[role A B C stop]" {
			t.Fatalf("items %v: the continuation's own role chunk must not be delivered", g.texts)
		}
		if asked := b.attempts(); len(asked) != 1 || asked[0].Prefix != "AB" || asked[0].Trigger != TriggerResume {
			t.Fatalf("b asked %+v", asked)
		}
		if st := s.Stats(); st.Winner != 1 || st.Attempts[0].Outcome != AttemptCanceled {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A continuation can end without content: the answer was complete at
// the prefix, and the stalled stream only owed its closing items. The
// caller then reads the continuation's closing items, not its opening
// (what Items.Opening says opens; without it, as many Control items as
// the answer's own opening), after commit and before (Buffered): a second
// opening would make an accumulator such as anthropic-sdk-go's
// (message_start) start the message afresh. Routes that open differently
// need Items.Opening: a continuation without a role chunk after an answer
// with one would lose its finish reason, and one with a role chunk after
// an answer without would deliver a second opening.
func TestResumeEndsWithoutContent(t *testing.T) {
	openAI := func(after time.Duration) []step {
		return []step{keepalive(after), control(50*time.Millisecond, "role"),
			control(10*time.Millisecond, "stop"), control(10*time.Millisecond, "usage")}
	}
	anthropic := func(after time.Duration) []step {
		return []step{control(after, "message_start"), keepalive(10 * time.Millisecond), control(10*time.Millisecond, "block_start"),
			control(10*time.Millisecond, "block_stop"), control(10*time.Millisecond, "message_delta"), control(0, "message_stop")}
	}
	opens := func(i *Items[chunk]) {
		i.Opening = func(c chunk) bool { return c.Text == "role" || c.Text == "message_start" || c.Text == "block_start" }
	}
	for _, tc := range []struct {
		name        string
		delivery    Delivery
		stallAfter  time.Duration
		a, b        []step
		want        string
		openingOnly bool // only right with Items.Opening
	}{
		{"after commit", Streaming, 0,
			[]step{control(0, "role"), content(time.Second, "Done."), keepalive(500 * time.Millisecond), hang()}, openAI(50 * time.Millisecond),
			"[role Done. stop usage]", false},
		{"before commit (Buffered)", Buffered, time.Second,
			[]step{control(0, "role"), content(time.Second, "Done."), keepalive(500 * time.Millisecond), hang()}, openAI(50 * time.Millisecond),
			"[role Done. stop usage]", false},
		{"two opening items", Streaming, 0,
			[]step{control(0, "message_start"), control(0, "block_start"), content(time.Second, "Done."), hang()}, anthropic(50 * time.Millisecond),
			"[message_start block_start Done. block_stop message_delta message_stop]", false},
		{"a continuation without the answer's role chunk", Streaming, 0,
			[]step{control(0, "role"), content(time.Second, "Done."), hang()},
			[]step{control(50*time.Millisecond, "stop"), control(10*time.Millisecond, "usage")},
			"[role Done. stop usage]", true},
		{"an answer without a role chunk", Streaming, 0,
			[]step{content(time.Second, "Done."), hang()}, openAI(50 * time.Millisecond),
			"[Done. stop usage]", true},
	} {
		for _, opening := range []bool{true, false} {
			if tc.openingOnly && !opening {
				continue
			}
			t.Run(fmt.Sprintf("%s/opening=%v", tc.name, opening), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					a, b := continuing("a", tc.a), continuing("b", tc.b)
					cfg := resumeCfg()
					cfg.Delivery, cfg.StallAfter = tc.delivery, tc.stallAfter
					opts := []any{withText()}
					if opening {
						opts = append(opts, itemsOpt(opens))
					}
					s := mustNew(t, cfg, opts...).Stream(t.Context(), a.route(), b.route())
					g := drain(s, time.Now())
					if g.err != nil {
						t.Fatalf("err %v", g.err)
					}
					var items []string
					for i, k := range g.kinds {
						if k != Keepalive {
							items = append(items, g.texts[i])
						}
					}
					if fmt.Sprint(items) != tc.want {
						t.Fatalf("caller read %v, want %s: the continuation's opening must not be delivered, its closing must", items, tc.want)
					}
					if asked := b.attempts(); len(asked) != 1 || asked[0].Prefix != "Done." || asked[0].Trigger != TriggerResume {
						t.Fatalf("b asked %+v", asked)
					}
					if st := s.Stats(); st.Outcome != OutcomeOK || st.Winner != 1 || st.Attempts[0].Outcome != AttemptCanceled ||
						st.Attempts[1].Outcome != AttemptWinner || st.ChunksDelivered != 1 {
						t.Fatalf("stats %+v", st)
					}
				})
			})
		}
	}
	// A panic in Items.Opening fails the call, as one in Items.Text does.
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{control(0, "role"), content(time.Second, "Done."), hang()})
			b := continuing("b", openAI(50*time.Millisecond))
			s := mustNew(t, resumeCfg(), withText(), itemsOpt(func(i *Items[chunk]) {
				i.Opening = func(chunk) bool { panic("opening") }
			})).Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || joined(g) != "Done." || s.Stats().Outcome != OutcomeError {
				t.Fatalf("text %q err %v outcome %s, want Done. and ErrExtractorPanic", joined(g), g.err, s.Stats().Outcome)
			}
		})
	})
}

// A continuation that begins something other than the answer's text
// (Items.Follows: on Anthropic, the start of a block that is not text)
// follows the answer: it reaches the caller from that item on — its
// opening before it dropped, with or without content —, relabelled by
// Items.RelabelAfter (Relabel without it). Follows is asked while the
// continuation's items open (Items.Opening) and about the first that does
// not: a text block that begins with content that is no text (a citation)
// continues the answer, and so does an empty text block closed before a
// tool call. Without Follows nothing follows.
func TestResumeFollows(t *testing.T) {
	answer := []step{control(0, "role"), content(time.Second, "A"), hang()}
	cont := func(items ...step) []step {
		return append([]step{control(50*time.Millisecond, "role")}, items...)
	}
	ms := 10 * time.Millisecond
	for _, tc := range []struct {
		name      string
		b         []step
		follows   bool // Items.Follows set
		after     bool // Items.RelabelAfter set
		read      string
		relabels  string // which function, answer|item, per call
		delivered int64  // content chunks the caller read
	}{
		{"a tool call first", cont(control(ms, "block_start:tool"), content(ms, "tool:f"), control(ms, "stop")), true, true,
			"[role A block_start:tool tool:f stop]", "[after A|block_start:tool after A|tool:f after A|stop]", 2},
		{"thinking first, then text", cont(control(ms, "block_start:think"), content(ms, "think:hm"), control(ms, "block_stop"),
			control(ms, "block_start1:text"), content(ms, "B"), control(ms, "stop")), true, true,
			"[role A block_start:think think:hm block_stop block_start1:text B stop]",
			"[after A|block_start:think after A|think:hm after A|block_stop after A|block_start1:text after A|B after A|stop]", 3},
		// Usage sent before the first block's start (closing, not
		// opening) does not end the asking: the block that follows is
		// still found, and the usage reaches the caller before it.
		{"usage, then a tool call", cont(control(ms, "usage"), control(ms, "block_start:tool"), content(ms, "tool:f"), control(ms, "stop")), true, true,
			"[role A usage block_start:tool tool:f stop]", "[after A|usage after A|block_start:tool after A|tool:f after A|stop]", 2},
		// The same with a keepalive (read as "") and the role again after
		// the usage, and no content: the keepalive reaches the caller (as
		// any after the cut), the second opening does not.
		{"usage, a keepalive, the role again, then no content", cont(control(ms, "usage"), keepalive(ms), control(ms, "role"), control(ms, "block_start:redacted"), control(ms, "block_stop"), control(ms, "stop")), true, true,
			"[role A usage  block_start:redacted block_stop stop]", "[after A|usage after A| after A|block_start:redacted after A|block_stop after A|stop]", 1},
		{"no content", cont(control(ms, "block_start:redacted"), control(ms, "block_stop"), control(ms, "stop")), true, true,
			"[role A block_start:redacted block_stop stop]", "[after A|block_start:redacted after A|block_stop after A|stop]", 1},
		{"no RelabelAfter", cont(control(ms, "block_start:tool"), content(ms, "tool:f")), true, false,
			"[role A block_start:tool tool:f]", "[relabel A|block_start:tool relabel A|tool:f]", 2},
		// A text block continues the answer's, whatever its first content.
		{"a text block that begins with a citation", cont(control(ms, "block_start:text"), content(ms, "cite:"), content(ms, "B"), control(ms, "stop")), true, true,
			"[role A cite: B stop]", "[relabel A|cite: relabel A|B relabel A|stop]", 3},
		// Usage before the first block's start reaches the caller, the
		// start does not: the answer's block is started already.
		{"usage, then text", cont(control(ms, "usage"), control(ms, "block_start:text"), content(ms, "B"), control(ms, "stop")), true, true,
			"[role A usage B stop]", "[relabel A|usage relabel A|B relabel A|stop]", 2},
		// The empty block's end is the answer's block's; what starts
		// after it (block 1: "block_start1:") neither opens nor follows
		// the answer, and reaches the caller, its start included where
		// that carries no content (a thinking block's; a tool call's
		// carries its name).
		{"an empty text block, then a tool call", cont(control(ms, "block_start:text"), control(ms, "block_stop"), content(ms, "tool:f"), control(ms, "stop")), true, true,
			"[role A block_stop tool:f stop]", "[relabel A|block_stop relabel A|tool:f relabel A|stop]", 2},
		{"an empty text block, then thinking", cont(control(ms, "block_start:text"), control(ms, "block_stop"),
			control(ms, "block_start1:think"), content(ms, "think:hm"), control(ms, "block_stop"), control(ms, "stop")), true, true,
			"[role A block_stop block_start1:think think:hm block_stop stop]",
			"[relabel A|block_stop relabel A|block_start1:think relabel A|think:hm relabel A|block_stop relabel A|stop]", 2},
		{"without Follows", cont(control(ms, "block_start:tool"), content(ms, "tool:f")), false, true,
			"[role A tool:f]", "[relabel A|tool:f]", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := continuing("a", answer), continuing("b", tc.b)
				var relabels []string
				p := mustNew(t, resumeCfg(), itemsOpt(func(i *Items[chunk]) {
					i.Text = func(c chunk) (string, bool) {
						switch {
						case strings.HasPrefix(c.Text, "tool:"):
							return "", false
						case strings.Contains(c.Text, ":"): // reasoning, a citation: no answer text
							return "", true
						}
						return c.Text, true
					}
					// "block_start:" starts block 0, "block_start1:" block 1.
					i.Opening = func(c chunk) bool { return c.Text == "role" || strings.HasPrefix(c.Text, "block_start:") }
					if tc.follows {
						i.Follows = func(c chunk) bool {
							return strings.HasPrefix(c.Text, "block_start:") && c.Text != "block_start:text"
						}
					}
					i.Relabel = func(answer, v chunk) chunk {
						relabels = append(relabels, "relabel "+answer.Text+"|"+v.Text)
						return v
					}
					if tc.after {
						i.RelabelAfter = func(answer, v chunk) chunk {
							relabels = append(relabels, "after "+answer.Text+"|"+v.Text)
							return v
						}
					}
				}))
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if g.err != nil || fmt.Sprint(g.texts) != tc.read {
					t.Fatalf("caller read %v, err %v; want %s", g.texts, g.err, tc.read)
				}
				if fmt.Sprint(relabels) != tc.relabels {
					t.Fatalf("relabelled %v, want %s", relabels, tc.relabels)
				}
				if st := s.Stats(); st.Outcome != OutcomeOK || st.Winner != 1 || st.Attempts[1].Trigger != TriggerResume || st.ChunksDelivered != tc.delivered {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
	// A panic in Follows fails the call; it is asked before the item is
	// recorded, so the continuation's span counts what its timeline holds.
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", answer)
			b := continuing("b", cont(content(ms, "B")))
			s := mustNew(t, resumeCfg(), withText(), itemsOpt(func(i *Items[chunk]) {
				i.Opening = func(c chunk) bool { return c.Text == "role" }
				i.Follows = func(c chunk) bool {
					if c.Kind == Content {
						panic("follows")
					}
					return false
				}
			})).Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || joined(g) != "A" || s.Stats().Outcome != OutcomeError {
				t.Fatalf("text %q err %v outcome %s, want A and ErrExtractorPanic", joined(g), g.err, s.Stats().Outcome)
			}
			if st := s.Stats(); st.Attempts[1].ContentChunks != 0 {
				t.Fatalf("the continuation counted %d content chunks: its item failed before it counted", st.Attempts[1].ContentChunks)
			}
		})
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

// Telemetry of a resumed call (docs/design.md §3): the resume attempt's
// span has trigger resume and the chunks delivered before it; the call
// span has a resume event and the caller's view, whose gap before the
// continuation is the silence the caller lived through (2.1 s), while the
// stalled attempt's own timeline keeps only what it received.
func TestResumeTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(10*time.Millisecond, "B"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "C")})
		p, exp := recorded(t, resumeCfg(), withText())
		drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
		var call, orig, res tracetest.SpanStub
		for _, sp := range exp.GetSpans() {
			switch idx, _ := attrOf(sp.Attributes, semconv.AttemptIndex); {
			case sp.Name == semconv.CallSpanName:
				call = sp
			case idx.AsInt64() == 0:
				orig = sp
			default:
				res = sp
			}
		}
		if v, _ := attrOf(res.Attributes, semconv.AttemptTrigger); v.AsString() != "resume" {
			t.Fatalf("resume span trigger %q", v.AsString())
		}
		if v, _ := attrOf(res.Attributes, semconv.ResumeDeliveredChunks); v.AsInt64() != 2 {
			t.Fatalf("delivered before the resume = %d", v.AsInt64())
		}
		if v, _ := attrOf(orig.Attributes, semconv.AttemptOutcome); v.AsString() != "canceled" {
			t.Fatalf("stalled attempt outcome %q", v.AsString())
		}
		// Its two chunks reached the caller: canceled, yet nothing wasted.
		if v, _ := attrOf(orig.Attributes, semconv.ChunksDelivered); v.AsInt64() != 2 {
			t.Fatalf("stalled attempt's chunks delivered = %d, want 2", v.AsInt64())
		}
		if v, _ := attrOf(res.Attributes, semconv.ChunksDelivered); v.AsInt64() != 1 {
			t.Fatalf("resume's chunks delivered = %d, want 1", v.AsInt64())
		}
		if v, _ := attrOf(orig.Attributes, semconv.ChunkOffsetsUs); fmt.Sprint(v.AsInt64Slice()) != "[1000000 1010000]" {
			t.Fatalf("stalled attempt timeline %v", v.AsInt64Slice())
		}
		v, _ := attrOf(call.Attributes, semconv.CallerChunkOffsetsUs)
		if fmt.Sprint(v.AsInt64Slice()) != "[1000000 1010000 3110000]" {
			t.Fatalf("caller's view %v", v.AsInt64Slice())
		}
		// The events as hedgeprobe/README.md's "Trace of a resumed call"
		// shows them.
		var events []string
		for _, ev := range call.Events {
			idx, _ := attrOf(ev.Attributes, semconv.EventAttemptIndex)
			events = append(events, fmt.Sprintf("%s@%v{%d}", ev.Name, ev.Time.Sub(call.StartTime), idx.AsInt64()))
		}
		want := "[streamwatch.commit@1s{0} streamwatch.resume@3.01s{1} streamwatch.commit@3.11s{1} streamwatch.attempt.canceled@3.11s{0}]"
		if got := fmt.Sprint(events); got != want {
			t.Fatalf("call span events\n got %s\nwant %s", got, want)
		}
	})
}

// Before commit a stall hedge continues the stalled attempt, whose chunks
// then reach the caller behind the commit, after that attempt was
// cancelled. Its hook event and span still count them delivered (nothing
// wasted), as Stats does; when the call is closed before the commit
// instead, every attempt is reported once, with nothing delivered.
func TestResumeBeforeCommitReportsDelivered(t *testing.T) {
	for name, closeAt := range map[string]time.Duration{"committed": 0, "closed before commit": 1200 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(100*time.Millisecond, "a0"), hang()})
				b := continuing("b", []step{content(100*time.Millisecond, "b0"), content(100*time.Millisecond, "b1"),
					content(100*time.Millisecond, "b2")})
				var done []AttemptEvent
				cfg := resumeCfg()
				cfg.HoldChunks, cfg.StallAfter = 3, time.Second
				p, exp := recorded(t, cfg, withText(), OnAttemptDone(func(e AttemptEvent) { done = append(done, e) }))
				s := p.Stream(t.Context(), a.route(), b.route())
				if closeAt > 0 {
					time.AfterFunc(closeAt, func() { _ = s.Close() })
				}
				g := drain(s, time.Now())
				want := map[int]int64{0: 1, 1: 3} // the stall hedge at 1.1 s commits at 1.3 s with b1
				if closeAt > 0 {
					want = map[int]int64{0: 0, 1: 0}
				} else if fmt.Sprint(g.texts) != "[a0 b0 b1 b2]" {
					t.Fatalf("caller read %v", g.texts)
				}
				if len(done) != 2 {
					t.Fatalf("%d attempt reports, want 2: %+v", len(done), done)
				}
				for _, e := range done {
					if e.ChunksDelivered != want[e.Index] || e.ChunksDelivered != s.Stats().Attempts[e.Index].ChunksDelivered {
						t.Fatalf("attempt %d reported %d delivered, want %d (Stats %+v)", e.Index, e.ChunksDelivered, want[e.Index], s.Stats().Attempts)
					}
				}
				for _, sp := range exp.GetSpans() {
					if sp.Name == semconv.CallSpanName {
						continue
					}
					idx, _ := attrOf(sp.Attributes, semconv.AttemptIndex)
					if v, _ := attrOf(sp.Attributes, semconv.ChunksDelivered); v.AsInt64() != want[int(idx.AsInt64())] {
						t.Fatalf("attempt %d span: %d delivered, want %d", idx.AsInt64(), v.AsInt64(), want[int(idx.AsInt64())])
					}
				}
				// The stalled attempt's span ends when it was cancelled, not
				// when its report went out.
				if closeAt == 0 {
					for _, sp := range exp.GetSpans() {
						if idx, ok := attrOf(sp.Attributes, semconv.AttemptIndex); ok && idx.AsInt64() == 0 {
							if d := sp.EndTime.Sub(sp.StartTime); d != 1300*time.Millisecond {
								t.Fatalf("stalled attempt span lasts %v, want 1.3s", d)
							}
						}
					}
				}
			})
		})
	}
}

// The committed stream fails mid-way with a transient error: a resume
// continues at once from everything delivered, and the caller reads the
// text neither cut nor repeated.
func TestResumeAfterMidStreamError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(0, "B"), content(0, "C"),
			fail(0, &statusErr{code: 502})})
		b := continuing("b", []step{content(100*time.Millisecond, "D")})
		p := mustNew(t, resumeCfg(), withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		if !s.Next() { // the first chunk; the rest and the error queue up meanwhile
			t.Fatal(s.Err())
		}
		time.Sleep(time.Second)
		g := drain(s, time.Now())
		if got := "A" + joined(g); got != "ABCD" || g.err != nil {
			t.Fatalf("text %q err %v", got, g.err)
		}
		if asked := b.attempts(); len(asked) != 1 || asked[0].Prefix != "ABC" {
			t.Fatalf("b asked %+v", asked)
		}
		if st := s.Stats(); st.Attempts[0].Outcome != AttemptFailed || st.Winner != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// Regression: a resume must not be due while items the committed stream
// sent are still queued for the caller (the driver can take several
// queued events at once when a deadline fires): its prefix would miss
// them and the continuation repeat them. Checked on the trigger table
// itself, because the interleaving that queues them is a scheduling race.
func TestResumeNotDueWithPendingItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), hang()})
		b := continuing("b")
		cfg := resumeCfg()
		cfg.StallTimeout = 30 * time.Second
		p := mustNew(t, cfg, withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		defer s.Close()
		if !s.Next() {
			t.Fatal(s.Err())
		}
		var resume, stall *trigger[chunk]
		for i := range p.triggers {
			switch p.triggers[i].name {
			case "resume":
				resume = &p.triggers[i]
			case "stall_timeout":
				stall = &p.triggers[i]
			}
		}
		s.race.resumeNow = true
		if _, due := resume.due(s); !due {
			t.Fatal("resume not due with nothing pending")
		}
		if _, due := stall.due(s); !due {
			t.Fatal("stall watchdog not due with nothing pending")
		}
		s.out.push(item[chunk]{v: chunk{Kind: Content, Text: "B"}, kind: Content})
		if _, due := resume.due(s); due {
			t.Fatal("resume due while an item waits for the caller")
		}
		if _, due := stall.due(s); due {
			t.Fatal("stall watchdog due while an item waits for the caller")
		}
	})
}

// Items.Relabel gives a continuation's items the labels of the answer it
// continues: each continuation's answer is the latest content item the
// caller read before its first item, relabelled in turn after a second
// resume, before commit and after, and only a continuation's items are
// relabelled. A panic in it fails the call, and the item is not read.
func TestResumeRelabel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      func(*Config)
		a, b     [][]step
		text     string
		relabels string // answer|item, per call of Relabel
	}{
		{"after commit, twice", func(*Config) {},
			[][]step{{content(time.Second, "A"), hang()}, {content(100*time.Millisecond, "C")}},
			[][]step{{content(100*time.Millisecond, "B"), hang()}},
			"ABC", "[A|B B|C]"},
		{"before commit (Buffered)", func(c *Config) { c.Delivery, c.StallAfter = Buffered, time.Second },
			[][]step{{control(500*time.Millisecond, "role"), content(500*time.Millisecond, "A"), content(10*time.Millisecond, "B"), hang()}},
			[][]step{{control(50*time.Millisecond, "role"), content(50*time.Millisecond, "C"), control(10*time.Millisecond, "stop")}},
			"ABC", "[B|C B|stop]"},
		{"a hedge's items are its own", func(c *Config) { c.HedgeAfter = 500 * time.Millisecond },
			[][]step{{content(time.Second, "A")}},
			[][]step{{content(100*time.Millisecond, "B")}},
			"B", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := continuing("a", tc.a...), continuing("b", tc.b...)
				cfg := resumeCfg()
				tc.cfg(&cfg)
				var relabels []string
				p := mustNew(t, cfg, withText(), itemsOpt(func(i *Items[chunk]) {
					i.Relabel = func(answer, v chunk) chunk {
						relabels = append(relabels, answer.Text+"|"+v.Text)
						v.Route = answer.Route
						return v
					}
				}))
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if g.err != nil || joined(g) != tc.text {
					t.Fatalf("text %q err %v", joined(g), g.err)
				}
				if fmt.Sprint(relabels) != tc.relabels {
					t.Fatalf("Relabel called with %v, want %s", relabels, tc.relabels)
				}
				if want := len(g.kinds); tc.relabels != "[]" && g.from["a"] != want {
					t.Fatalf("items read by route %v: every item must carry the answer's labels", g.from)
				}
			})
		})
	}
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{content(time.Second, "A"), hang()})
			b := continuing("b", []step{content(100*time.Millisecond, "B"), content(10*time.Millisecond, "C")})
			p := mustNew(t, resumeCfg(), withText(), itemsOpt(func(i *Items[chunk]) {
				i.Relabel = func(answer, v chunk) chunk { panic("relabel") }
			}))
			s := p.Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || joined(g) != "A" {
				t.Fatalf("text %q err %v, want A and ErrExtractorPanic", joined(g), g.err)
			}
			if st := s.Stats(); st.Outcome != OutcomeError || st.ChunksDelivered != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	})
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
