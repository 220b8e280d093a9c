package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		if got := b.attempts(); len(got) != 1 || got[0].Trigger != TriggerResume || got[0].Prefix != "Hello" || got[0].Index != 1 || got[0].PrefixChunks != 2 {
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

// The stalled stream sends its finish reason and ends before the
// continuation's first content chunk: its end decides the race (rule 10:
// content or the end does, a control item alone does not). The finish
// reason waited for that decision; the resume is cancelled, and the
// caller reads the first answer to its end.
func TestResumeStalledStreamEndingWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), control(2500*time.Millisecond, "stop"),
			{after: 200 * time.Millisecond, end: true}})
		b := continuing("b", []step{content(time.Second, "X")})
		p := mustNew(t, resumeCfg(), withText())
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		// The resume opened at 3 s; "stop" came at 3.5 s and the end at
		// 3.7 s; "X" would have come at 4 s.
		if g.err != nil || joined(g) != "A" || len(g.kinds) != 2 || g.kinds[1] != Control || g.texts[1] != "stop" {
			t.Fatalf("items %v %q err %v, want A then the finish", g.kinds, g.texts, g.err)
		}
		st := s.Stats()
		if len(st.Attempts) != 2 || st.Winner != 0 || st.Attempts[1].Outcome != AttemptCanceled || st.Attempts[1].Trigger != TriggerResume {
			t.Fatalf("stats %+v", st)
		}
		wantDur(t, "the end", time.Since(start), 3700*time.Millisecond)
		wantDur(t, "the finish reason", g.at[1], 3700*time.Millisecond)
	})
}

// Only content decides a resume race (rule 10: "the first of the two to
// deliver its next content chunk wins"). A stalled stream that sends a
// control item — a usage chunk, a role, a finish reason — and falls silent
// again does not win: the continuation's content at 4 s does, the stalled
// stream is cancelled, and its control item never reaches the caller
// (which would otherwise wait for the stalled upstream's next chunk at
// 8 s).
func TestResumeControlItemDoesNotDecide(t *testing.T) {
	for _, text := range []string{"usage", "stop"} {
		t.Run(text, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(time.Second, "A"), control(2050*time.Millisecond, text),
					keepalive(100 * time.Millisecond), content(5*time.Second, " late")})
				b := continuing("b", []step{content(time.Second, "X")})
				p := mustNew(t, resumeCfg(), withText())
				start := time.Now()
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, start)
				if g.err != nil || joined(g) != "AX" || !slices.Equal(g.kinds, []Kind{Content, Content}) {
					t.Fatalf("items %v %q err %v, want A then the continuation's X", g.kinds, g.texts, g.err)
				}
				wantDur(t, "X", g.at[1], 4*time.Second)
				st := s.Stats()
				if len(st.Attempts) != 2 || st.Winner != 1 || st.Attempts[0].Outcome != AttemptCanceled {
					t.Fatalf("stats %+v, want the resume to win and the stalled stream cancelled", st)
				}
			})
		})
	}
}

// What the stalled stream held while a resume raced it reaches the caller,
// in order, when the race ends without a winner: here the only continuing
// route refuses at 3.5 s, so the usage chunk of 3.2 s and the keepalive
// after it are released then, and the stream's content of 6 s follows.
func TestResumeRefusedReleasesHeldItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), control(2200*time.Millisecond, "usage"),
			keepalive(100 * time.Millisecond), content(2700*time.Millisecond, "B")})
		b := continuing("b", []step{fail(500*time.Millisecond, &statusErr{code: 400})})
		p := mustNew(t, resumeCfg(), withText())
		start := time.Now()
		g := drain(p.Stream(t.Context(), a.route(), b.route()), start)
		if g.err != nil || !slices.Equal(g.kinds, []Kind{Content, Control, Keepalive, Content}) || joined(g) != "AB" {
			t.Fatalf("items %v %q err %v, want A, usage, keepalive, B", g.kinds, g.texts, g.err)
		}
		wantDur(t, "the usage chunk", g.at[1], 3500*time.Millisecond)
		wantDur(t, "the keepalive", g.at[2], 3500*time.Millisecond)
		wantDur(t, "B", g.at[3], 6*time.Second)
	})
}

// A stalled stream that fails while it holds a control item for a resume
// race drops it, as any failed attempt its undelivered items: when the
// resume is then refused, the caller holds "A" and no finish reason — with
// room for one more attempt, the answer is continued from "A"; without,
// the call fails with the stalled stream's error.
func TestResumeFailedStreamDropsHeldItems(t *testing.T) {
	for _, max := range []int{2, 3} {
		t.Run(fmt.Sprintf("MaxAttempts=%d", max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(time.Second, "A"), control(2200*time.Millisecond, "stop"),
					fail(200*time.Millisecond, &statusErr{code: 503})}, []step{content(10*time.Millisecond, " Y")})
				b := continuing("b", []step{fail(700*time.Millisecond, &statusErr{code: 400})})
				cfg := resumeCfg()
				cfg.MaxAttempts = max
				s := mustNew(t, cfg, withText()).Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if slices.Contains(g.texts, "stop") {
					t.Fatalf("items %v %q: the failed stream's held finish reason reached the caller", g.kinds, g.texts)
				}
				var se *statusErr
				switch {
				case max == 3 && (g.err != nil || joined(g) != "A Y" || len(s.Stats().Attempts) != 3):
					t.Fatalf("text %q err %v attempts %d, want A continued on a third attempt", joined(g), g.err, len(s.Stats().Attempts))
				case max == 2 && (!errors.As(g.err, &se) || se.code != 503 || joined(g) != "A"):
					t.Fatalf("text %q err %v, want A and the stalled stream's 503", joined(g), g.err)
				}
			})
		})
	}
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
		if asked := a.attempts(); len(asked) != 2 || asked[1].Prefix != "AB" || asked[1].Index != 2 || asked[1].PrefixChunks != 2 || asked[0].PrefixChunks != 0 {
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
		if asked := b.attempts(); len(asked) != 1 || asked[0].Prefix != "AB" || asked[0].Trigger != TriggerResume || asked[0].PrefixChunks != 2 {
			t.Fatalf("b asked %+v", asked)
		}
		if st := s.Stats(); st.Winner != 1 || st.Attempts[0].Outcome != AttemptCanceled {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A continuation before commit that stalls too is continued in turn: the
// second resume's prefix is the whole chain's text, and PrefixChunks
// counts the chain's chunks (the first continuation's and those it
// continued), not its own alone.
func TestResumeBeforeCommitChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(500*time.Millisecond, "A"), content(10*time.Millisecond, "B"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "C"), hang()})
		c := continuing("c", []step{content(100*time.Millisecond, "D"), control(10*time.Millisecond, "stop")})
		cfg := resumeCfg()
		cfg.Delivery, cfg.StallAfter = Buffered, time.Second
		g := drain(mustNew(t, cfg, withText()).Stream(t.Context(), a.route(), b.route(), c.route()), time.Now())
		if joined(g) != "ABCD" || g.err != nil {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if asked := b.attempts(); len(asked) != 1 || asked[0].Prefix != "AB" || asked[0].PrefixChunks != 2 {
			t.Fatalf("b asked %+v, want the continuation of AB, 2 chunks", asked)
		}
		if asked := c.attempts(); len(asked) != 1 || asked[0].Prefix != "ABC" || asked[0].PrefixChunks != 3 {
			t.Fatalf("c asked %+v, want the continuation of ABC, 3 chunks", asked)
		}
	})
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
