package hedgeprobe

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Regression: the stall watchdog released the winner (cancel, then a
// Close that takes time) while the caller's Next, woken by the cancel,
// ended the call; its own release returned at once because it was not
// the first, so the call ended with the source not yet closed (found by
// TestStress). Now a racing release waits for the Close.
func TestRegressionWatchdogReleaseRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(time.Second, "a0"), hang()})
		a.closeDelay = time.Millisecond
		p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 5 * time.Second})
		s := p.Stream(t.Context(), a.route())
		start := time.Now()
		g := drain(s, start)
		if !errors.Is(g.err, ErrStallTimeout) {
			t.Fatalf("err = %v", g.err)
		}
		if c := a.closes(); c[0] != 1 {
			t.Fatalf("closes = %v when the call ended", c)
		}
		wantDur(t, "end", time.Since(start), 6*time.Second+time.Millisecond)
	})
}

// Regression: a reading goroutine released its attempt (cancelling its
// context) before sending the end of the stream, so the send could give
// up and a Buffered call waited forever (found by TestHedgeStallBuffered).
func TestRegressionEndLostAfterRelease(t *testing.T) {
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 3, time.Millisecond, time.Millisecond))
			b := newUpstream("b", []step{content(time.Millisecond, "b0"), fail(time.Millisecond, errors.New("fatal"))})
			p := mustNew(t, Config{HedgeAfter: time.Second, Delivery: Buffered})
			g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
			wantTexts(t, g, "a0", "a1", "a2")
			// The classifier-panic path had the same order.
			n := 0
			q, _ := New(Config{MaxAttempts: 1, Delivery: Buffered}, func(c chunk) Kind {
				if n++; n == 2 {
					panic("x")
				}
				return c.Kind
			})
			g = drain(q.Stream(t.Context(), a.route()), time.Now())
			if !errors.Is(g.err, ErrClassifierPanic) {
				t.Fatalf("err = %v", g.err)
			}
		})
	}
}

// Regression: two Close calls at the same instant inside a synctest
// bubble, with a source whose Close takes time: the second waited on
// sync.Once's mutex, which is not durably blocking, so the bubble's clock
// never advanced and the test hung. Now the second Close waits on a
// channel.
func TestRegressionConcurrentCloseInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", append(texts("a", 1, time.Second, 0), hang()))
		a.closeDelay = time.Millisecond
		p := mustNew(t, Config{MaxAttempts: 1})
		s := p.Stream(t.Context(), a.route())
		if !s.Next() {
			t.Fatal("no item")
		}
		start := time.Now()
		done := make(chan time.Duration, 2)
		for range 2 {
			go func() {
				s.Close()
				done <- time.Since(start)
			}()
		}
		for range 2 {
			wantDur(t, "Close returned after", <-done, time.Millisecond)
		}
		if c := a.closes(); len(c) != 1 || c[0] != 1 {
			t.Fatalf("closes = %v", c)
		}
		if st := s.Stats(); st.Outcome != OutcomeCanceled || st.Attempts[0].Outcome != AttemptCanceled {
			t.Fatalf("outcome %q, attempt %q", st.Outcome, st.Attempts[0].Outcome)
		}
	})
}

// Regression: with Close on another goroutine, Next returned false at
// once while Close's goroutine was still finishing the call, so Err and
// Stats raced with finish (the race detector saw it), and a Close that
// lost the call to a running Next returned before that Next had ended the
// spans. Now whichever side does not finish the call waits until it has
// finished. A slow OnAttemptDone hook makes finishing take 200ms.
func TestRegressionCloseWaitsForFinish(t *testing.T) {
	const hookTime = 200 * time.Millisecond
	slowHook := OnAttemptDone(func(AttemptEvent) { time.Sleep(hookTime) })
	t.Run("Next after a Close on another goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", append(texts("a", 1, time.Millisecond, 0), hang()))
			p, exp := recorded(t, Config{MaxAttempts: 1}, slowHook)
			s := p.Stream(t.Context(), a.route())
			if !s.Next() {
				t.Fatal("no item")
			}
			closed := make(chan struct{})
			go func() { s.Close(); close(closed) }()
			synctest.Wait() // Close owns the call and sleeps in the hook
			start := time.Now()
			if s.Next() {
				t.Fatal("Next reported an item after Close")
			}
			wantDur(t, "Next returned after", time.Since(start), hookTime)
			if s.Err() != nil || s.Stats().Outcome != OutcomeCanceled || len(exp.GetSpans()) != 2 {
				t.Fatalf("err %v, outcome %q, %d spans ended", s.Err(), s.Stats().Outcome, len(exp.GetSpans()))
			}
			<-closed
		})
	})
	t.Run("Close while Next runs on another goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", append(texts("a", 1, time.Millisecond, 0), hang()))
			p, exp := recorded(t, Config{MaxAttempts: 1}, slowHook)
			s := p.Stream(t.Context(), a.route())
			if !s.Next() {
				t.Fatal("no item")
			}
			nextDone := make(chan struct{})
			go func() {
				for s.Next() {
				}
				close(nextDone)
			}()
			time.Sleep(10 * time.Millisecond) // Next waits in the source
			start := time.Now()
			s.Close()
			wantDur(t, "Close returned after", time.Since(start), hookTime)
			if n := len(exp.GetSpans()); n != 2 {
				t.Fatalf("Close returned with %d of 2 spans ended", n)
			}
			if st := s.Stats(); st.Outcome != OutcomeCanceled || st.Attempts[0].Outcome != AttemptCanceled {
				t.Fatalf("outcome %q, attempt %q", st.Outcome, st.Attempts[0].Outcome)
			}
			<-nextDone
		})
	})
}
