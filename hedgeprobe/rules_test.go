package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// One test per rule of docs/design.md §2. The hedge cases of issue 3 live in
// hedge_test.go, the watchdog parity cases in parity_test.go.

// Rule 1: the primary goes to the first route, each hedge to the next
// (round robin, reusing the only route when there is one); MaxAttempts
// defaults to DefaultMaxAttempts and is clamped to 5.
func TestRule1Attempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ups := []*upstream{newUpstream("a", []step{hang()}), newUpstream("b", []step{hang()}), newUpstream("c", []step{hang()})}
		routes := []Route[chunk]{ups[0].route(), ups[1].route(), ups[2].route()}
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 4, TTFTTimeout: 10 * time.Second, HedgeBurst: 10})
		s := p.Stream(t.Context(), routes...)
		drain(s, time.Now())
		var got []string
		for _, a := range s.Stats().Attempts {
			got = append(got, a.Route+"/"+string(a.Trigger))
		}
		if fmt.Sprint(got) != "[a/primary b/ttft c/ttft a/ttft]" {
			t.Fatalf("attempts = %v", got)
		}
		if p.Config().MaxAttempts != 4 || mustNew(t, Config{}).Config().MaxAttempts != DefaultMaxAttempts || mustNew(t, Config{MaxAttempts: 50}).Config().MaxAttempts != 5 {
			t.Fatal("MaxAttempts default or clamp")
		}
	})
}

// Rule 2: the three triggers act only while nothing is committed, and the
// TTFT trigger uses the adaptive delay when HedgeAfter is zero: during
// warm-up that is HedgeMaxDelay.
func TestRule2TriggersAdaptiveWarmup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", texts("b", 1, time.Millisecond, 0))
		p := mustNew(t, Config{HedgeMinDelay: 100 * time.Millisecond, HedgeMaxDelay: 3 * time.Second})
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		wantTexts(t, g, "b0")
		wantDur(t, "hedge launch", s.Stats().Attempts[1].LaunchOffset, 3*time.Second)
	})
}

// Rule 3: hedges stay a bounded fraction of calls: over 1,000 calls
// against a primary that is always late, at most burst + budget × calls.
func TestRule3BudgetBoundsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 1, 2*time.Second, 0))
		b := newUpstream("b", texts("b", 1, 2*time.Second, 0))
		p := mustNew(t, Config{HedgeAfter: time.Second, MaxAttempts: 2, HedgeBudget: 0.1, HedgeBurst: 5})
		var hedges, throttled int
		for range 1000 {
			s := p.Stream(t.Context(), a.route(), b.route())
			drain(s, time.Now())
			hedges += len(s.Stats().Attempts) - 1
			throttled += s.Stats().HedgesThrottled
		}
		if limit := 5 + 0.1*1000; float64(hedges) > limit {
			t.Fatalf("%d hedges in 1000 calls, limit %v", hedges, limit)
		}
		if hedges+throttled != 1000 {
			t.Fatalf("hedges %d + throttled %d != 1000", hedges, throttled)
		}
	})
}

// Rule 4: the winner's items reach the caller in order, exactly once,
// never interleaved with another attempt's, even when both stream at once.
func TestRule4CommitExactlyOnceInOrder(t *testing.T) {
	for _, d := range []Delivery{Streaming, Buffered} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", texts("a", 50, 1500*time.Millisecond, 7*time.Millisecond))
				b := newUpstream("b", texts("b", 50, 400*time.Millisecond, 5*time.Millisecond))
				p := mustNew(t, Config{HedgeAfter: time.Second, Delivery: d, HoldChunks: 3})
				g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
				if g.err != nil {
					t.Fatal(g.err)
				}
				want := make([]string, 50)
				for i := range want {
					want[i] = fmt.Sprintf("b%d", i) // b: launched at 1 s, 3rd chunk at 1.41 s, ends at 1.645 s; a: 1.514 s, 1.843 s
				}
				wantTexts(t, g, want...)
				if len(g.from) != 1 {
					t.Fatalf("interleaved: %v", g.from)
				}
			})
		})
	}
}

// Rule 5: losers are cancelled and closed at commit, are never revived,
// their late items are discarded, and they report canceled.
func TestRule5Losers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, 1100*time.Millisecond, time.Millisecond))
		b := newUpstream("b", texts("b", 3, 1500*time.Millisecond, time.Millisecond))
		var done []AttemptEvent
		p := mustNew(t, Config{HedgeAfter: time.Second}, OnAttemptDone(func(e AttemptEvent) { done = append(done, e) }))
		s := p.Stream(t.Context(), a.route(), b.route())
		if !s.Next() {
			t.Fatal(s.Err())
		}
		// The loser was closed at commit, before the caller read on.
		synctest.Wait()
		if c := b.closes(); c[0] != 1 {
			t.Fatalf("loser closes at commit = %v", c)
		}
		if len(done) != 1 || done[0].Index != 1 || done[0].Outcome != AttemptCanceled || done[0].Err != nil {
			t.Fatalf("done = %+v", done)
		}
		time.Sleep(time.Second) // past the loser's scripted chunks
		g := drain(s, time.Now())
		wantTexts(t, g, "a1", "a2")
		if b.closes()[0] != 1 || b.opened() != 1 || len(s.Stats().Attempts) != 2 {
			t.Fatal("loser revived or closed twice")
		}
	})
}

// Rule 6: before commit, StallTimeout fails a silent attempt as a
// transient error (so the next attempt launches); after commit see
// parity_test.go and TestHedgeNeverAfterCommit.
func TestRule6StallTimeoutBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append(texts("a", 2, 100*time.Millisecond, 100*time.Millisecond), hang()))
		b := newUpstream("b", texts("b", 2, 100*time.Millisecond, 100*time.Millisecond))
		var wd []WatchdogEvent
		// StallAfter Off: the watchdog, not the stall trigger, ends a's silence.
		p := mustNew(t, Config{HedgeAfter: time.Minute, StallTimeout: 5 * time.Second, Delivery: Buffered, StallAfter: Off},
			OnWatchdog(func(e WatchdogEvent) { wd = append(wd, e) }))
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		wantTexts(t, g, "b0", "b1")
		st := s.Stats()
		if st.Attempts[0].Outcome != AttemptFailed || !errors.Is(st.Attempts[0].Err, ErrStallTimeout) ||
			st.Attempts[1].Trigger != TriggerError || st.Attempts[1].LaunchOffset != 5200*time.Millisecond {
			t.Fatalf("attempts = %+v", st.Attempts)
		}
		if len(wd) != 1 || wd[0].Kind != TimeoutStall || wd[0].Elapsed != 5200*time.Millisecond {
			t.Fatalf("watchdog = %+v", wd)
		}
	})
}

// Rule 7: the typed error, its sentinels, and IsTransient.
func TestRule7Errors(t *testing.T) {
	te := &TimeoutError{Kind: TimeoutTTFT, After: time.Second, Route: "r", Model: "m"}
	wrapped := fmt.Errorf("call: %w", te)
	if !errors.Is(wrapped, ErrTTFTTimeout) || !errors.Is(wrapped, ErrTimeout) || errors.Is(wrapped, ErrStallTimeout) || !te.Timeout() {
		t.Fatal("sentinels")
	}
	var ne interface{ Timeout() bool }
	if !errors.As(wrapped, &ne) || !ne.Timeout() {
		t.Fatal("Timeout() not found by errors.As")
	}
	// After a resume the attempt's count and the call's differ; the
	// message says whose each one is.
	resumed := &TimeoutError{Kind: TimeoutStall, After: 2 * time.Second, Attempt: 1, Route: "b", Model: "mb",
		ChunksReceived: 2, ChunksDelivered: 6, Truncated: true}
	if got, want := resumed.Error(), `hedgeprobe: stall timeout after 2s on route "b" model "mb": attempt 1 received 2 content chunks, the caller 6 (truncated)`; got != want {
		t.Fatalf("Error() = %q\nwant %q", got, want)
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{te, true},
		{wrapped, true},
		{&statusErr{code: 429}, true},
		{&statusErr{code: 503}, true},
		{&statusErr{code: 400}, false},
		{&statusErr{code: 401}, false},
		{&statusErr{code: 404}, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, true},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{fmt.Errorf("x: %w", syscall.EPIPE), true},
		{errors.New("bad request"), false},
		{ErrClassifierPanic, false},
	} {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A Stream is a Source, so one Prober's call can be another's route. The
// inner call's own TimeoutError is a transient failure of the outer
// attempt; when it ends the outer call, the outer call takes its outcome and
// returns it unchanged, with no watchdog of its own reported
// (hedgeprobe/README.md, "Semantics").
func TestStreamAsRoute(t *testing.T) {
	inner := func(innerP *Prober[chunk], up *upstream) Route[chunk] {
		return Route[chunk]{Name: "inner", Provider: "p", Model: "m", Open: func(ctx context.Context, _ Attempt) (Source[chunk], error) {
			return innerP.Stream(ctx, up.route()), nil
		}}
	}
	t.Run("ends the outer call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var innerFired, outerFired int
			innerP := mustNew(t, Config{HedgeAfter: time.Minute, StallTimeout: 2 * time.Second, MaxAttempts: 1},
				OnWatchdog(func(WatchdogEvent) { innerFired++ }))
			outerP := mustNew(t, Config{HedgeAfter: time.Minute, StallTimeout: time.Minute, MaxAttempts: 1},
				OnWatchdog(func(WatchdogEvent) { outerFired++ }))
			a := newUpstream("a", []step{content(100*time.Millisecond, "a0"), hang()})
			s := outerP.Stream(t.Context(), inner(innerP, a))
			g := drain(s, time.Now())
			te, ok := errors.AsType[*TimeoutError](g.err)
			if !ok || te.Kind != TimeoutStall || te.Route != "a" || !te.Truncated {
				t.Fatalf("Err = %v, want the inner call's stall TimeoutError on route a", g.err)
			}
			st := s.Stats()
			if st.Outcome != OutcomeStallTimeout || len(g.texts) != 1 || innerFired != 1 || outerFired != 0 {
				t.Fatalf("outcome %s, texts %v, watchdogs inner %d outer %d; want stall_timeout, [a0], 1, 0",
					st.Outcome, g.texts, innerFired, outerFired)
			}
		})
	})
	t.Run("the outer call hedges", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			innerP := mustNew(t, Config{HedgeAfter: time.Minute, StallTimeout: 2 * time.Second, MaxAttempts: 1})
			// StallAfter Off: the inner watchdog, due at the same 2.1 s,
			// is what this test follows.
			outerP := mustNew(t, Config{HedgeAfter: time.Minute, HoldChunks: 3, MaxAttempts: 2, StallAfter: Off})
			a := newUpstream("a", []step{content(100*time.Millisecond, "a0"), hang()})
			b := newUpstream("b", texts("b", 3, 100*time.Millisecond, 10*time.Millisecond))
			s := outerP.Stream(t.Context(), inner(innerP, a), b.route())
			g := drain(s, time.Now())
			st := s.Stats()
			if g.err != nil || st.Outcome != OutcomeOK || st.WinnerRoute != "b" || strings.Join(g.texts, " ") != "b0 b1 b2" {
				t.Fatalf("err %v, outcome %s, winner %q, texts %v; want ok on b: b0 b1 b2", g.err, st.Outcome, st.WinnerRoute, g.texts)
			}
			if len(st.Attempts) != 2 || st.Attempts[0].Outcome != AttemptFailed || st.Attempts[1].Trigger != TriggerError ||
				st.Attempts[1].LaunchOffset != 2100*time.Millisecond {
				t.Fatalf("attempts %+v; want the inner call failed at 2.1 s and b launched then on its error", st.Attempts)
			}
			if _, ok := errors.AsType[*TimeoutError](st.Attempts[0].Err); !ok {
				t.Fatalf("attempt 0 failed with %v, want the inner TimeoutError", st.Attempts[0].Err)
			}
		})
	})
}

// Rule 8: cancelling the caller's context after commit ends the call and
// every attempt; All closes the Stream when the loop breaks.
func TestRule8CallerCancelAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 100, time.Second, time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: time.Minute})
		time.AfterFunc(5500*time.Millisecond, cancel)
		start := time.Now()
		s := p.Stream(ctx, a.route())
		g := drain(s, start)
		wantTexts(t, g, "a0", "a1", "a2", "a3", "a4")
		if !errors.Is(g.err, context.Canceled) || s.Stats().Outcome != OutcomeCanceled || s.Stats().Attempts[0].Outcome != AttemptCanceled {
			t.Fatalf("err %v stats %+v", g.err, s.Stats())
		}
		wantDur(t, "end", time.Since(start), 5500*time.Millisecond)

		b := newUpstream("b", texts("b", 100, time.Second, time.Second))
		s = p.Stream(t.Context(), b.route())
		n := 0
		for c, err := range s.All() {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 3 || c.Text == "" {
				break
			}
		}
		if c := b.closes(); c[0] != 1 || s.Stats().Outcome != OutcomeCanceled {
			t.Fatalf("All did not close: %v %v", c, s.Stats().Outcome)
		}
	})
}

// Rule 9: New reads the environment for every field the code left zero;
// a value set in code wins (the OpenTelemetry convention), and
// Prober.Config shows what is in force.
func TestRule9Env(t *testing.T) {
	t.Setenv(EnvHedgeAfter, "1.5")
	t.Setenv(EnvStallAfter, "20")
	t.Setenv(EnvTTFTTimeout, "250ms")
	t.Setenv(EnvStallTimeout, " ")
	t.Setenv(EnvResumeAfter, "0")
	t.Setenv(EnvEjectFailures, "7")
	p := mustNew(t, Config{StallTimeout: time.Minute, TTFTTimeout: time.Hour})
	c := p.Config()
	if c.HedgeAfter != 1500*time.Millisecond || c.StallAfter != 20*time.Second || c.TTFTTimeout != time.Hour ||
		c.StallTimeout != time.Minute || c.ResumeAfter != Off || c.EjectFailures != 7 {
		t.Fatalf("config = %+v", c)
	}
	// The case: timeouts configured only through the environment.
	t.Setenv(EnvStallTimeout, "2")
	t.Setenv(EnvStallAfter, "1")
	if c := mustNew(t, Config{}).Config(); c.StallTimeout != 2*time.Second || c.StallAfter != time.Second {
		t.Fatalf("environment not read by New: %+v", c)
	}
	// Negative before rounding (-1e-12 would round to 0, "off"), and the
	// first value past a Duration's range, which overflowed into a
	// negative and was reported as such.
	for _, bad := range []string{"-1", "soon", "NaN", "1e300", "-1e-12", "-0.1ns", "9223372036.854775807", "1e-12", "0.5ns", "0.0000001ms"} {
		t.Setenv(EnvStallTimeout, bad)
		_, err := newProber(Config{})
		if !errors.Is(err, ErrInvalidConfig) || !contains(err.Error(), EnvStallTimeout) || !contains(err.Error(), bad) {
			t.Fatalf("%q: err %v, want the variable and the value named", bad, err)
		}
		// A value set in code wins, so the malformed variable is not read.
		if _, err := newProber(Config{StallTimeout: time.Second}); err != nil {
			t.Fatalf("%q with StallTimeout set in code: %v", bad, err)
		}
	}
	t.Setenv(EnvStallTimeout, "0")
	t.Setenv(EnvEjectFailures, "x")
	if _, err := newProber(Config{}); err == nil || !contains(err.Error(), EnvEjectFailures+`="x"`) {
		t.Fatalf("err = %v", err)
	}
	// Every mistake at once: a malformed variable, an invalid field and a
	// missing classifier.
	_, err := New(Config{HedgeQuantile: 2}, Items[chunk]{})
	for _, want := range []string{EnvEjectFailures + `="x"`, "HedgeQuantile", "Items.Classify"} {
		if !errors.Is(err, ErrInvalidConfig) || err == nil || !contains(err.Error(), want) {
			t.Errorf("New's error %v does not name %s", err, want)
		}
	}
}

// Rule 4: where an attempt is not committed at its first chunk (Buffered,
// or HoldChunks > 1) the stall trigger is the only rescue from a silence,
// and a zero StallAfter is 2s there. Before, it was off whatever the
// delivery, so a Buffered call with a zero Config waited out a stall of
// its whole stream (a newcomer's integration review).
func TestStallAfterDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		env  string // HEDGE__STALL_AFTER_S
		want time.Duration
	}{
		{"Buffered", Config{Delivery: Buffered}, "", 2 * time.Second},
		{"HoldChunks 3", Config{HoldChunks: 3}, "", 2 * time.Second},
		{"Streaming", Config{}, "", 0},
		{"HoldChunks 1", Config{HoldChunks: 1}, "", 0},
		{"Buffered, Off", Config{Delivery: Buffered, StallAfter: Off}, "", Off},
		{"Buffered, set", Config{Delivery: Buffered, StallAfter: 5 * time.Second}, "", 5 * time.Second},
		{"Buffered, env 0", Config{Delivery: Buffered}, "0", Off},
		{"Buffered, env 3", Config{Delivery: Buffered}, "3", 3 * time.Second},
		// Below a short StallTimeout, as ResumeAfter's default: at 2s the
		// watchdog failed the attempt first, and the hedge started afresh.
		{"Buffered, StallTimeout 2s", Config{Delivery: Buffered, StallTimeout: 2 * time.Second}, "", time.Second},
		{"Buffered, StallTimeout 3s", Config{Delivery: Buffered, StallTimeout: 3 * time.Second}, "", 2 * time.Second},
		{"Buffered, StallTimeout 1ns", Config{Delivery: Buffered, StallTimeout: 1}, "", Off}, // no room below it
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvStallAfter, tc.env)
			if got := mustNew(t, tc.cfg).Config().StallAfter; got != tc.want {
				t.Fatalf("StallAfter in force = %v, want %v", got, tc.want)
			}
			if tc.cfg.StallTimeout == 1 {
				return // every attempt fails at its first silence
			}
			synctest.Test(t, func(t *testing.T) {
				// a falls silent for 10s after its first chunk; b answers at once.
				a := newUpstream("a", append(texts("a", 1, 100*time.Millisecond, 0), content(10*time.Second, "a1")))
				b := newUpstream("b", texts("b", 2, 100*time.Millisecond, 100*time.Millisecond))
				cfg := tc.cfg
				cfg.HedgeAfter = time.Minute
				s := mustNew(t, cfg).Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if g.err != nil {
					t.Fatal(g.err)
				}
				st := s.Stats()
				hedged := len(st.Attempts) == 2 && st.Attempts[1].Trigger == TriggerStall
				if want := tc.want > 0; hedged != want || hedged && st.Attempts[1].LaunchOffset != 100*time.Millisecond+tc.want {
					t.Fatalf("stall hedge %v, want %v after %v: attempts %+v", hedged, want, tc.want, st.Attempts)
				}
			})
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// Rule 8, a context done before the first Next: the call ends canceled at
// once and no upstream is asked (Route.Open was called with the dead
// context, and its attempt counted and spanned).
func TestRule8ContextDoneBeforeTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, time.Second, time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		p := mustNew(t, Config{})
		s := p.Stream(ctx, a.route())
		if s.Next() {
			t.Fatal("Next reported an item")
		}
		st := s.Stats()
		if !errors.Is(s.Err(), context.Canceled) || st.Outcome != OutcomeCanceled || len(st.Attempts) != 0 || a.opened() != 0 {
			t.Fatalf("err %v, outcome %v, %d attempts, %d opens: want canceled with no attempt", s.Err(), st.Outcome, len(st.Attempts), a.opened())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Rule 8, a Close before the first Next: the call never starts — no route
// opened, no span recorded — and ends canceled, Err nil, as Close says.
func TestRule8CloseBeforeTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, time.Second, time.Second))
		p, exp := recorded(t, Config{})
		s := p.Stream(t.Context(), a.route())
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s.Next() {
			t.Fatal("Next reported an item after Close")
		}
		st := s.Stats()
		if s.Err() != nil || st.Outcome != OutcomeCanceled || len(st.Attempts) != 0 || a.opened() != 0 || len(exp.GetSpans()) != 0 {
			t.Fatalf("err %v, outcome %v, %d attempts, %d opens, %d spans: want canceled, nothing opened or recorded",
				s.Err(), st.Outcome, len(st.Attempts), a.opened(), len(exp.GetSpans()))
		}
	})
}

// Stats.Truncated tells a cut answer from a whole one where Err cannot:
// after the caller's Close, Err is nil whether the caller read everything
// or not (a newcomer's integration review asked for it).
func TestStatsTruncated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads int // Next calls before Close; -1 reads to the end
		want  bool
	}{
		{"read to the end", -1, false},
		{"closed after two chunks", 2, true},
		{"closed before any", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", texts("a", 4, 100*time.Millisecond, 100*time.Millisecond))
				s := mustNew(t, Config{HedgeAfter: time.Minute}).Stream(t.Context(), a.route())
				for n := 0; (tc.reads < 0 || n < tc.reads) && s.Next(); n++ {
				}
				if tc.reads >= 0 && s.Stats().Truncated() {
					t.Fatal("Truncated while the call runs")
				}
				s.Close()
				if st := s.Stats(); st.Truncated() != tc.want || s.Err() != nil {
					t.Fatalf("Truncated %v (outcome %s, %d delivered), Err %v; want %v and no error",
						st.Truncated(), st.Outcome, st.ChunksDelivered, s.Err(), tc.want)
				}
			})
		})
	}
}
