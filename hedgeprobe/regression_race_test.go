package hedgeprobe

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Regression (issue: Close before commit reported as an upstream failure):
// a Close from another goroutine while no attempt has committed must end
// the call as canceled, with Err nil and every attempt canceled — never
// failed, so a circuit breaker fed from OnAttemptDone is not tripped by a
// caller who hung up. Close used to cancel the call before the driver saw
// the request, and the reader's end caused by the cancel was taken as the
// attempt's failure. Random Close times across Streaming, HoldChunks and
// Buffered, with Sources whose Close is instant and ones whose Close takes
// 1 ms.
func TestRegressionCloseBeforeCommitIsCanceled(t *testing.T) {
	modes := []struct {
		name string
		cfg  Config
	}{
		{"streaming", Config{HedgeAfter: 300 * time.Millisecond}},
		{"hold", Config{HedgeAfter: 300 * time.Millisecond, HoldChunks: 50}},
		{"buffered", Config{HedgeAfter: 300 * time.Millisecond, Delivery: Buffered}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range modes {
		for _, closeDelay := range []time.Duration{0, time.Millisecond} {
			for i := range 60 {
				at := time.Duration(rng.IntN(900)+1) * time.Millisecond
				synctest.Test(t, func(t *testing.T) {
					a := newUpstream("a", append([]step{keepalive(100 * time.Millisecond)}, texts("a", 40, time.Second, 10*time.Millisecond)...))
					b := newUpstream("b", append([]step{keepalive(100 * time.Millisecond)}, texts("b", 40, time.Second, 10*time.Millisecond)...))
					a.closeDelay, b.closeDelay = closeDelay, closeDelay
					var mu sync.Mutex
					var failed []AttemptEvent
					p := mustNew(t, m.cfg, OnAttemptDone(func(e AttemptEvent) {
						if e.Outcome != AttemptCanceled {
							mu.Lock()
							failed = append(failed, e)
							mu.Unlock()
						}
					}))
					s := p.Stream(t.Context(), a.route(), b.route())
					go func() {
						time.Sleep(at)
						_ = s.Close()
					}()
					for s.Next() {
						if s.Current().Kind == Content {
							t.Fatalf("%s/%v/%d: content delivered before the 1 s first chunk", m.name, closeDelay, i)
						}
					}
					_ = s.Close()
					st := s.Stats()
					if s.Err() != nil || st.Outcome != OutcomeCanceled {
						t.Fatalf("%s close %v at %v: outcome %q err %v, want canceled and nil", m.name, closeDelay, at, st.Outcome, s.Err())
					}
					mu.Lock()
					defer mu.Unlock()
					if len(failed) > 0 {
						t.Fatalf("%s close %v at %v: attempts reported %v, want canceled", m.name, closeDelay, at, failed)
					}
				})
			}
		}
	}
}

// Regression (issue: the stall watchdog can re-arm after the call has
// finished): stop landing between the timer function's check and its
// re-arm left a live timer. Now the re-arm checks again after it.
func TestRegressionWatchdogStopHoldsAgainstRearm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &watchdog{after: time.Second, start: time.Now(), fire: func() { t.Error("fired") }}
		w.wait.Store(-1 - int64(500*time.Millisecond)) // away, 0.5 s on the clock: re-arm for 0.5 s
		w.testHookRearm = w.stop                       // finish stops it in the window
		w.arm()
		time.Sleep(time.Second) // the timer function runs
		synctest.Wait()
		if w.t.Stop() {
			t.Fatal("the watchdog's timer is alive after stop")
		}
	})
}

// Close at a random time during calls that resume (relay after commit, a
// resume racing the stalled stream, the switch): the call ends canceled
// with Err nil, no attempt is reported failed, every source is closed
// once, and nothing leaks (goleak in TestMain).
func TestCloseDuringResumeIsCanceled(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		at := time.Duration(rng.IntN(5000)+1) * time.Millisecond
		closeDelay := time.Duration(rng.IntN(2)) * time.Millisecond
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{content(time.Second, "A"), content(10*time.Millisecond, "B"), hang()})
			b := continuing("b", []step{content(500*time.Millisecond, "C"), content(10*time.Millisecond, "D"), hang()})
			a.closeDelay, b.closeDelay = closeDelay, closeDelay
			var mu sync.Mutex
			var failed []AttemptEvent
			p := mustNew(t, Config{HedgeAfter: time.Hour, ResumeAfter: time.Second, MaxAttempts: 3}, withText(),
				OnAttemptDone(func(e AttemptEvent) {
					if e.Outcome == AttemptFailed {
						mu.Lock()
						failed = append(failed, e)
						mu.Unlock()
					}
				}))
			s := p.Stream(t.Context(), a.route(), b.route())
			go func() {
				time.Sleep(at)
				_ = s.Close()
			}()
			g := drain(s, time.Now())
			_ = s.Close()
			st := s.Stats()
			if g.err != nil || st.Outcome != OutcomeCanceled {
				t.Fatalf("%d: close at %v: outcome %q err %v", i, at, st.Outcome, g.err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(failed) > 0 {
				t.Fatalf("%d: close at %v: attempts reported failed: %+v", i, at, failed)
			}
			for _, u := range []*upstream{a, b} {
				for j, c := range u.closes() {
					if c != 1 {
						t.Fatalf("%d: close at %v: %s source %d closed %d times", i, at, u.name, j, c)
					}
				}
			}
		})
	}
}

// Regression: a content chunk that reached the caller's Next as the stall
// watchdog decided to fire (the caller's check of "fired" came before the
// timer set it) was delivered, and the watchdog then closed the source: a
// call that got its chunk in time failed with a stall timeout. The chunk
// and the timer now claim the wait with one compare-and-swap: here the
// chunk claims it in the window, so the watchdog re-arms and never fires;
// and a chunk after the watchdog fired is refused.
func TestRegressionWatchdogChunkAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fired atomic.Int32
		var onTime atomic.Bool
		w := &watchdog{after: time.Second, start: time.Now(), fire: func() { fired.Add(1) }}
		from := w.enter()                                         // the caller waits in Next from the start
		w.testHookFire = func() { onTime.Store(w.content(from)) } // the chunk arrives in the window
		w.arm()
		defer w.stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if !onTime.Load() || fired.Load() != 0 || w.fired() {
			t.Fatalf("chunk on time %v, watchdog fired %d times; want the chunk delivered and no stall", onTime.Load(), fired.Load())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var fired atomic.Int32
		w := &watchdog{after: time.Second, start: time.Now(), fire: func() { fired.Add(1) }}
		from := w.enter()
		w.arm()
		defer w.stop()
		time.Sleep(time.Second) // a stall: nothing comes
		synctest.Wait()
		if fired.Load() != 1 || w.content(from) || w.away(from) {
			t.Fatalf("fired %d times, or an item after the stall was accepted", fired.Load())
		}
	})
}

// Regression: in a direct read, an item that met the stall watchdog at its
// deadline could be given to the caller and the call then fail with a
// stall timeout (a chunk: 3 to 5 in 40 runs), and a keepalive or control
// item at the deadline went three ways. Now a chunk and the watchdog claim
// the wait once — the chunk is delivered and the stream goes on, or it is
// not and the call fails — and an item that ends no stall never answers
// one. Each case runs in many bubbles, for both orders of the tie.
func TestRegressionDirectItemAtStallDeadline(t *testing.T) {
	for i := range 100 {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", []step{content(100*time.Millisecond, "A"), content(time.Second, "B"), {after: time.Millisecond, end: true}})
			g := drain(mustNew(t, Config{HedgeAfter: time.Hour, StallTimeout: time.Second}).Stream(t.Context(), a.route()), time.Now())
			stalled := errors.Is(g.err, ErrStallTimeout)
			if !(g.err == nil && joined(g) == "AB") && !(stalled && joined(g) == "A") {
				t.Fatalf("run %d: text %q err %v; want AB and a clean end, or A and a stall timeout", i, joined(g), g.err)
			}
		})
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", []step{content(100*time.Millisecond, "A"), control(time.Second, "stop"), {after: time.Millisecond, end: true}})
			g := drain(mustNew(t, Config{HedgeAfter: time.Hour, StallTimeout: time.Second}).Stream(t.Context(), a.route()), time.Now())
			if !errors.Is(g.err, ErrStallTimeout) || len(g.kinds) != 1 {
				t.Fatalf("run %d: items %v err %v; want A alone, then the stall timeout", i, g.kinds, g.err)
			}
		})
	}
}

// Regression (found by an independent black-box test): a Close that lands
// while the pre-commit stall watchdog fires must leave the call one of two
// consistent ways — the watchdog took effect (reported, the attempt
// failed) or the Close came first (nothing reported, the attempt
// canceled). The watchdog used to report itself and then find the Close,
// so the call and its attempt were canceled with a watchdog reported
// that had done nothing: a user counting timeouts from OnWatchdog
// overcounted.

// The watchdog has reported itself when the Close lands: the attempt it
// fails stays failed, with the stall TimeoutError.
func TestRegressionCloseAfterWatchdogReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(100*time.Millisecond, "a1"), hang()})
		var s *Stream[chunk]
		var reported []WatchdogEvent
		p := mustNew(t, Config{HedgeAfter: time.Minute, HoldChunks: 3, StallTimeout: 2 * time.Second, MaxAttempts: 1},
			OnWatchdog(func(e WatchdogEvent) {
				reported = append(reported, e)
				// Close from another goroutine and wait until it has
				// taken hold (it closes the source after marking the
				// call closed), so it lands between the report and the
				// failure.
				go func() { _ = s.Close() }()
				a.mu.Lock()
				src := a.srcs[0]
				a.mu.Unlock()
				<-src.closed
			}))
		s = p.Stream(t.Context(), a.route())
		for s.Next() {
		}
		_ = s.Close()
		synctest.Wait()
		st := s.Stats()
		if len(reported) != 1 || reported[0].Kind != TimeoutStall || reported[0].Elapsed != 2100*time.Millisecond {
			t.Fatalf("watchdog reports %+v, want one stall at 2.1 s", reported)
		}
		at := st.Attempts[0]
		var te *TimeoutError
		if at.Outcome != AttemptFailed || !errors.As(at.Err, &te) || te.Kind != TimeoutStall {
			t.Fatalf("attempt %s (err %v) after a reported watchdog, want failed with the stall timeout", at.Outcome, at.Err)
		}
		// With no attempt left, the failure the watchdog reported ends the
		// call; the Close that came after it has nothing left to cancel.
		if st.Outcome != OutcomeStallTimeout || !errors.As(s.Err(), &te) {
			t.Fatalf("call outcome %s (err %v), want stall_timeout", st.Outcome, s.Err())
		}
	})
}

// A Close at the very instant the watchdog falls due, many times over
// with goroutines scheduled as they come: every call is one of the two
// consistent ways. (On the code before the fix about a third of the calls
// were neither.)
func TestRegressionCloseTiedWithAttemptStallWatchdog(t *testing.T) {
	for i := range 60 {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", []step{content(100*time.Millisecond, "a1"), hang()})
			var reported atomic.Int32
			p := mustNew(t, Config{HedgeAfter: time.Minute, HoldChunks: 3, StallTimeout: 2 * time.Second, MaxAttempts: 1},
				OnWatchdog(func(WatchdogEvent) { reported.Add(1) }))
			s := p.Stream(t.Context(), a.route())
			go func() {
				time.Sleep(2100 * time.Millisecond)
				_ = s.Close()
			}()
			for s.Next() {
			}
			_ = s.Close()
			synctest.Wait()
			st := s.Stats()
			failed := st.Attempts[0].Outcome == AttemptFailed
			if n := reported.Load(); (n == 1) != failed || n > 1 {
				t.Fatalf("call %d: %d watchdog reports, attempt %s, call %s: a report must come with the failure it caused",
					i, n, st.Attempts[0].Outcome, st.Outcome)
			}
		})
	}
}

// Regression (rule 4: the winner's items reach the caller each exactly
// once): when the driver woke on a deadline it handled, in one go, every
// event queued before it — and if one put a chunk before the caller and a
// later one ended the call (a fatal error, or a transient one with nothing
// left to resume), the call ended with the chunk unread: counted received,
// never delivered. Handled one event at a time the caller read it, so
// whether it did was select's coin. Here the committed stream's "B" ties
// with the resume deadline and a fatal error follows at once; 200 runs
// took the timer's branch in about half of them.
func TestRegressionChunkBeforeFailureAtDeadline(t *testing.T) {
	boom := errors.New("boom")
	lost := 0
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{content(time.Second, "A"), content(2*time.Second, "B"), fail(0, boom)})
			b := continuing("b", []step{hang()})
			p := mustNew(t, resumeCfg(), withText())
			s := p.Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, boom) {
				t.Fatalf("err %v, want boom", g.err)
			}
			if joined(g) != "AB" {
				lost++
				if lost == 1 {
					t.Logf("caller read %q, want \"AB\"; received %d content chunks, delivered %d",
						joined(g), s.Stats().Attempts[0].ContentChunks, s.Stats().ChunksDelivered)
				}
			}
		})
	}
	if lost > 0 {
		t.Fatalf("%d of 200 runs lost the chunk received before the failure", lost)
	}
}

// The same before commit: the primary's first chunk, which commits it,
// ties with the TTFT hedge deadline, and the primary then fails: the
// caller reads "A" before the error.
func TestRegressionCommitBeforeFailureAtDeadline(t *testing.T) {
	boom := errors.New("boom")
	lost := 0
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{content(time.Second, "A"), fail(0, boom)})
			b := continuing("b", []step{hang()})
			cfg := resumeCfg()
			cfg.HedgeAfter = time.Second
			p := mustNew(t, cfg, withText())
			s := p.Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, boom) {
				t.Fatalf("err %v, want boom", g.err)
			}
			if joined(g) != "A" {
				lost++
			}
		})
	}
	if lost > 0 {
		t.Fatalf("%d of 200 runs lost the committed chunk received before the failure", lost)
	}
}
