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
