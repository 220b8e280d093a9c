package hedgeprobe

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Behaviour parity with the watchdogs users already know (LangChain
// stream_chunk_timeout, LiteLLM's inactivity guard, Codex CLI's idle
// timeout): each as its own test.

// A fast stream passes through untouched: every item, every kind, in
// order, at the time it arrived.
func TestParityFastStreamUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []step{
			control(10*time.Millisecond, "role"), keepalive(5 * time.Millisecond),
			content(20*time.Millisecond, "x"), content(10*time.Millisecond, "y"),
			keepalive(1 * time.Millisecond), control(3*time.Millisecond, "finish"),
		}
		a := newUpstream("a", steps)
		p := mustNew(t, Config{HedgeAfter: time.Second, TTFTTimeout: 10 * time.Second, StallTimeout: 10 * time.Second})
		start := time.Now()
		g := drain(p.Stream(t.Context(), a.route()), start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		want := []Kind{Control, Keepalive, Content, Content, Keepalive, Control}
		wantAt := []time.Duration{35, 35, 35, 45, 46, 49}
		for i := range want {
			if g.kinds[i] != want[i] || g.at[i] != wantAt[i]*time.Millisecond {
				t.Fatalf("item %d: %v at %v, want %v at %v", i, g.kinds[i], g.at[i], want[i], wantAt[i]*time.Millisecond)
			}
		}
		if len(g.kinds) != len(want) || g.texts[0] != "role" || g.texts[5] != "finish" {
			t.Fatalf("got %+v", g)
		}
	})
}

// Disabled timeouts pass a slow stream through.
func TestParityDisabledTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, 10*time.Minute, 10*time.Minute))
		p := mustNew(t, Config{MaxAttempts: 1})
		start := time.Now()
		g := drain(p.Stream(t.Context(), a.route()), start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		wantTexts(t, g, "a0", "a1", "a2")
		wantDur(t, "end", time.Since(start), 30*time.Minute)
	})
}

// A stall after the first chunk fires the typed error carrying timeout,
// route, model and chunks received.
func TestParityStallTypedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append(texts("a", 3, time.Second, 100*time.Millisecond), content(time.Hour, "never")))
		p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 30 * time.Second})
		start := time.Now()
		s := p.Stream(t.Context(), a.route())
		g := drain(s, start)
		wantTexts(t, g, "a0", "a1", "a2")
		wantDur(t, "end", time.Since(start), 1200*time.Millisecond+30*time.Second)
		var te *TimeoutError
		if !errors.As(g.err, &te) {
			t.Fatalf("err = %v", g.err)
		}
		want := TimeoutError{Kind: TimeoutStall, After: 30 * time.Second, Route: "a", Model: "model-a",
			ChunksReceived: 3, ChunksDelivered: 3, Truncated: true}
		if *te != want {
			t.Fatalf("err = %+v, want %+v", *te, want)
		}
		if !te.Timeout() || !IsTransient(g.err) || !errors.Is(g.err, ErrStallTimeout) || !errors.Is(g.err, ErrTimeout) || errors.Is(g.err, ErrTTFTTimeout) {
			t.Fatal("error does not match its sentinels")
		}
		if s.Stats().Outcome != OutcomeStallTimeout || s.Stats().Attempts[0].Outcome != AttemptFailed {
			t.Fatalf("a stall timeout recorded as %+v", s.Stats())
		}
	})
}

// The first chunk is exempt from the stall watchdog but covered by the
// TTFT timeout.
func TestParityFirstChunkExempt(t *testing.T) {
	t.Run("stall does not cover the first chunk", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 2, 20*time.Second, time.Second))
			p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 5 * time.Second})
			g := drain(p.Stream(t.Context(), a.route()), time.Now())
			if g.err != nil {
				t.Fatal(g.err)
			}
			wantTexts(t, g, "a0", "a1")
		})
	})
	t.Run("ttft covers it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 2, 20*time.Second, time.Second))
			p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 5 * time.Second, TTFTTimeout: 15 * time.Second})
			start := time.Now()
			s := p.Stream(t.Context(), a.route())
			g := drain(s, start)
			var te *TimeoutError
			if !errors.As(g.err, &te) || te.Kind != TimeoutTTFT || te.After != 15*time.Second || te.Truncated || !errors.Is(g.err, ErrTTFTTimeout) {
				t.Fatalf("err = %v", g.err)
			}
			wantDur(t, "end", time.Since(start), 15*time.Second)
			if s.Stats().Outcome != OutcomeTTFTTimeout {
				t.Fatalf("outcome %v", s.Stats().Outcome)
			}
		})
	})
}

// The source is closed exactly once on a timeout.
func TestParityCloseOnceOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append(texts("a", 1, time.Second, 0), hang()))
		p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 2 * time.Second})
		s := p.Stream(t.Context(), a.route())
		drain(s, time.Now())
		s.Close()
		s.Close()
		if c := a.closes(); len(c) != 1 || c[0] != 1 {
			t.Fatalf("closes = %v", c)
		}
	})
}

// The source is closed exactly once when the caller closes early, and
// Close unblocks a Next waiting in another goroutine.
func TestParityCloseOnceOnCallerClose(t *testing.T) {
	t.Run("between Next calls", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 5, time.Second, time.Second))
			p := mustNew(t, Config{MaxAttempts: 1})
			s := p.Stream(t.Context(), a.route())
			// Two items read, so the call is mid-stream when closed.
			for range 2 {
				if !s.Next() {
					t.Fatal("no items")
				}
			}
			s.Close()
			s.Close()
			if s.Next() || s.Err() != nil || s.Stats().Outcome != OutcomeCanceled {
				t.Fatalf("after Close: err %v outcome %v", s.Err(), s.Stats().Outcome)
			}
			if c := a.closes(); c[0] != 1 {
				t.Fatalf("closes = %v", c)
			}
		})
	})
	t.Run("unblocks Next", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", append(texts("a", 1, time.Second, 0), hang()))
			p := mustNew(t, Config{MaxAttempts: 1})
			s := p.Stream(t.Context(), a.route())
			time.AfterFunc(10*time.Second, func() { s.Close() })
			start := time.Now()
			g := drain(s, start)
			wantDur(t, "end", time.Since(start), 10*time.Second)
			wantTexts(t, g, "a0")
			if c := a.closes(); c[0] != 1 {
				t.Fatalf("closes = %v", c)
			}
			synctest.Wait()
			if s.Stats().Outcome != OutcomeCanceled {
				t.Fatalf("outcome %v", s.Stats().Outcome)
			}
		})
	})
	t.Run("before commit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", []step{hang()})
			p := mustNew(t, Config{MaxAttempts: 1})
			s := p.Stream(t.Context(), a.route())
			time.AfterFunc(3*time.Second, func() { s.Close() })
			if s.Next() {
				t.Fatal("item after Close")
			}
			synctest.Wait()
			if c := a.closes(); c[0] != 1 {
				t.Fatalf("closes = %v", c)
			}
		})
	})
}

// End of stream propagates: Next false, Err nil, the source closed once;
// an upstream error propagates as Err.
func TestParityEndOfStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 2, time.Millisecond, time.Millisecond))
		p := mustNew(t, Config{MaxAttempts: 1})
		s := p.Stream(t.Context(), a.route())
		g := drain(s, time.Now())
		if g.err != nil || s.Next() || s.Stats().Outcome != OutcomeOK {
			t.Fatalf("err %v outcome %v", g.err, s.Stats().Outcome)
		}
		if c := a.closes(); c[0] != 1 {
			t.Fatalf("closes = %v", c)
		}
		boom := errors.New("connection lost")
		b := newUpstream("b", append(texts("b", 2, time.Millisecond, time.Millisecond), fail(time.Millisecond, boom)))
		s = p.Stream(t.Context(), b.route())
		g = drain(s, time.Now())
		wantTexts(t, g, "b0", "b1")
		if !errors.Is(g.err, boom) || s.Stats().Outcome != OutcomeError {
			t.Fatalf("err %v outcome %v", g.err, s.Stats().Outcome)
		}
	})
}

// Keepalives never reset a watchdog: neither TTFT nor stall.
func TestParityKeepalivesNeverReset(t *testing.T) {
	pings := func(n int) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = keepalive(time.Second)
		}
		return out
	}
	t.Run("ttft", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", append(pings(100), content(time.Second, "late")))
			p := mustNew(t, Config{MaxAttempts: 1, TTFTTimeout: 10 * time.Second})
			start := time.Now()
			g := drain(p.Stream(t.Context(), a.route()), start)
			if !errors.Is(g.err, ErrTTFTTimeout) {
				t.Fatalf("err = %v", g.err)
			}
			wantDur(t, "end", time.Since(start), 10*time.Second)
		})
	})
	t.Run("stall", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Content at 1 s, keepalives at 1.5 s, 2.5 s, … (off the
			// watchdog's 11 s instant).
			steps := append(texts("a", 1, time.Second, 0), keepalive(500*time.Millisecond))
			a := newUpstream("a", append(append(steps, pings(100)...), content(time.Second, "late")))
			p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 10 * time.Second})
			start := time.Now()
			g := drain(p.Stream(t.Context(), a.route()), start)
			if !errors.Is(g.err, ErrStallTimeout) {
				t.Fatalf("err = %v", g.err)
			}
			wantDur(t, "end", time.Since(start), 11*time.Second)
			// The keepalives before the timeout were delivered too.
			if len(g.kinds) != 11 {
				t.Fatalf("delivered %d items", len(g.kinds))
			}
		})
	})
}

// Tool-call deltas count as content: the classifier says so, and they
// satisfy the TTFT watchdog and reset the stall watchdog.
func TestParityToolCallsAreContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		isTool := func(c chunk) Kind {
			if c.Text == "tool_call:{" || c.Text == "tool_call:}" {
				return Content
			}
			return c.Kind
		}
		steps := []step{
			{after: 4 * time.Second, kind: Keepalive, text: "tool_call:{"},
			{after: 4 * time.Second, kind: Keepalive, text: "tool_call:}"},
		}
		a := newUpstream("a", steps)
		p, err := New(Config{MaxAttempts: 1, TTFTTimeout: 5 * time.Second, StallTimeout: 5 * time.Second}, Items[chunk]{Classify: isTool})
		if err != nil {
			t.Fatal(err)
		}
		s := p.Stream(t.Context(), a.route())
		g := drain(s, time.Now())
		if g.err != nil || s.Stats().ChunksDelivered != 2 {
			t.Fatalf("err %v delivered %d", g.err, s.Stats().ChunksDelivered)
		}
	})
}

// A slow consumer is not a stalled upstream: time the caller spends
// between Next calls never counts toward the stall watchdog.
func TestParitySlowConsumerNotStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", texts("a", 3, time.Second, time.Second))
		p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 2 * time.Second})
		s := p.Stream(t.Context(), a.route())
		n := 0
		for s.Next() {
			n++
			time.Sleep(time.Minute) // the caller works on each chunk
		}
		if s.Err() != nil || n != 3 {
			t.Fatalf("n %d err %v", n, s.Err())
		}
	})
}
