package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/semconv"
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
			q, _ := New(Config{MaxAttempts: 1, Delivery: Buffered}, Items[chunk]{Classify: func(c chunk) Kind {
				if n++; n == 2 {
					panic("x")
				}
				return c.Kind
			}})
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

// Regression: a panic escaping Next (here a WithTokenCount function on a
// usage item after commit) left the Stream owned by a Next that was gone:
// the caller recovered and called Close, but the call never ended and
// its spans never ended. Now TokenCount and response-model panics fail
// the call (ErrExtractorPanic), a panicking listener hook is ignored, and
// any other panic out of Next leaves the Stream closable.
func TestRegressionPanicDoesNotWedgeCall(t *testing.T) {
	t.Run("token count", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", []step{content(time.Second, "a0"), {after: time.Second, kind: Control, tok: 7}})
			p, exp := recorded(t, Config{MaxAttempts: 1}, withTokens(func(c chunk) (int64, bool) {
				if c.Tokens > 0 {
					panic("bad usage item")
				}
				return 0, false
			}))
			s := p.Stream(t.Context(), a.route())
			g := drain(s, time.Now())
			wantTexts(t, g, "a0")
			if !errors.Is(g.err, ErrExtractorPanic) || s.Stats().Outcome != OutcomeError {
				t.Fatalf("err %v, outcome %q", g.err, s.Stats().Outcome)
			}
			if n, c := len(exp.GetSpans()), a.closes(); n != 2 || c[0] != 1 {
				t.Fatalf("%d spans ended, closes %v", n, c)
			}
		})
	})
	t.Run("response model before commit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 2, time.Second, time.Second))
			p, _ := recorded(t, Config{MaxAttempts: 1}, withModel(func(chunk) (string, bool) { panic("x") }))
			g := drain(p.Stream(t.Context(), a.route()), time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || len(g.texts) != 0 {
				t.Fatalf("err %v, items %v", g.err, g.texts)
			}
		})
	})
	t.Run("hook", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 2, time.Second, time.Second))
			p := mustNew(t, Config{MaxAttempts: 1},
				OnCommit(func(CommitEvent) { panic("x") }), OnAttemptDone(func(AttemptEvent) { panic("y") }))
			s := p.Stream(t.Context(), a.route())
			g := drain(s, time.Now())
			wantTexts(t, g, "a0", "a1")
			if g.err != nil || s.Stats().Outcome != OutcomeOK {
				t.Fatalf("err %v, outcome %q", g.err, s.Stats().Outcome)
			}
		})
	})
	t.Run("other panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", texts("a", 2, time.Second, time.Second))
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(panicOnStart{}))
			defer tp.Shutdown(context.Background())
			p := mustNew(t, Config{MaxAttempts: 1}, WithTracerProvider(tp))
			s := p.Stream(t.Context(), a.route())
			var r any
			func() {
				defer func() { r = recover() }()
				s.Next()
			}()
			if r != "attempt span" {
				t.Fatalf("recovered %v", r)
			}
			s.Close()
			// The call span ends; the attempt span's Start never returned.
			if n, st := len(exp.GetSpans()), s.Stats(); n != 1 || st.Outcome != OutcomeCanceled {
				t.Fatalf("%d spans ended, outcome %q", n, st.Outcome)
			}
			// The attempt that never started gave its admission back: one
			// left counted would end no grace period again, and route
			// health would keep every ejection for the Prober's life.
			if n := p.health.live[0].Load() + p.health.live[1].Load(); n != 0 {
				t.Fatalf("%d admissions still counted", n)
			}
		})
	})
	// A hedge whose span's Start panicked never launched: its budget
	// token goes back, as its admission does (rule 3: a hedge takes one).
	t.Run("hedge span panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panicOnStart{hedge: true, started: new(atomic.Int32)}))
			defer tp.Shutdown(context.Background())
			p := mustNew(t, Config{HedgeAfter: 100 * time.Millisecond, MaxAttempts: 2, HedgeBurst: 5}, WithTracerProvider(tp))
			a := newUpstream("a", texts("a", 1, time.Second, 0))
			b := newUpstream("b", texts("b", 1, 10*time.Millisecond, 0))
			s := p.Stream(t.Context(), a.route(), b.route())
			var r any
			func() {
				defer func() { r = recover() }()
				for s.Next() {
				}
			}()
			s.Close()
			if r != "attempt span" || len(s.Stats().Attempts) != 1 {
				t.Fatalf("recovered %v, %d attempts; want the hedge's span panic and the primary alone", r, len(s.Stats().Attempts))
			}
			if got := p.budget.tokens; got != 5 {
				t.Errorf("the bucket holds %v tokens after a hedge that never launched, want 5", got)
			}
		})
	})
}

// panicOnStart is a span processor that panics when an attempt span
// starts: every one, or with hedge set the second only (the first hedge).
type panicOnStart struct {
	hedge   bool
	started *atomic.Int32
}

func (p panicOnStart) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.SpanKind() == trace.SpanKindClient && (!p.hedge || p.started.Add(1) == 2) {
		panic("attempt span")
	}
}
func (panicOnStart) OnEnd(sdktrace.ReadOnlySpan)      {}
func (panicOnStart) Shutdown(context.Context) error   { return nil }
func (panicOnStart) ForceFlush(context.Context) error { return nil }

// panicky is a scripted source whose Current panics at the n-th item.
type panicky struct {
	*scripted
	n int
}

func (p *panicky) Current() chunk {
	if p.n--; p.n == 0 {
		panic("broken source")
	}
	return p.scripted.Current()
}

// Regression: a Source that panicked on its reading goroutine crashed the
// process. Now the attempt fails with ErrSourcePanic (fatal), before
// commit on the reading goroutine and after commit in the caller's Next.
func TestRegressionSourcePanic(t *testing.T) {
	for _, tc := range []struct {
		n     int // the item whose Current panics
		texts []string
	}{{1, nil}, {3, []string{"a0", "a1"}}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", texts("a", 4, time.Second, time.Second))
				r := a.route()
				r.Open = func(ctx context.Context, _ Attempt) (Source[chunk], error) {
					src, err := a.open(ctx, Attempt{})
					return &panicky{src.(*scripted), tc.n}, err
				}
				p := mustNew(t, Config{MaxAttempts: 1})
				s := p.Stream(t.Context(), r)
				start := time.Now()
				g := drain(s, start)
				wantTexts(t, g, tc.texts...)
				wantDur(t, "end", time.Since(start), time.Duration(tc.n)*time.Second)
				st := s.Stats()
				if !errors.Is(g.err, ErrSourcePanic) || st.Outcome != OutcomeError || st.Attempts[0].Outcome != AttemptFailed {
					t.Fatalf("err %v, outcome %q, attempt %q", g.err, st.Outcome, st.Attempts[0].Outcome)
				}
				if c := a.closes(); c[0] != 1 {
					t.Fatalf("closes = %v", c)
				}
			})
		})
	}
}

// Regression: after commit, the stall watchdog counted the caller's time
// away on a keepalive or control item (the caller was marked away only
// after content), so a slow consumer of the last control item got a
// truncated stall timeout on a complete stream. Now only the time spent
// waiting in Next counts, summed since the latest content chunk.
func TestRegressionStallCountsOnlyWaits(t *testing.T) {
	t.Run("away on a control item", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newUpstream("a", []step{content(time.Second, "a0"), content(time.Second, "a1"), control(time.Second, "finish")})
			p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 5 * time.Second})
			s := p.Stream(t.Context(), a.route())
			start := time.Now()
			var items []string
			for s.Next() {
				items = append(items, s.Current().Text)
				if s.Current().Kind == Control {
					time.Sleep(6 * time.Second)
				}
			}
			if s.Err() != nil || fmt.Sprint(items) != "[a0 a1 finish]" {
				t.Fatalf("err %v, items %v", s.Err(), items)
			}
			wantDur(t, "end", time.Since(start), 9*time.Second)
		})
	})
	t.Run("waits add up across keepalives", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The caller waits 3s for a keepalive, is away 10s, then waits
			// again: the stall fires after 2 more seconds of waiting.
			a := newUpstream("a", []step{content(time.Second, "a0"), keepalive(3 * time.Second), hang()})
			var fired []WatchdogEvent
			p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: 5 * time.Second},
				OnWatchdog(func(e WatchdogEvent) { fired = append(fired, e) }))
			s := p.Stream(t.Context(), a.route())
			start := time.Now()
			for s.Next() {
				if s.Current().Kind == Keepalive {
					time.Sleep(10 * time.Second)
				}
			}
			wantDur(t, "end", time.Since(start), 16*time.Second)
			te, ok := errors.AsType[*TimeoutError](s.Err())
			if !ok || te.Kind != TimeoutStall || te.ChunksDelivered != 1 || !te.Truncated {
				t.Fatalf("err %v", s.Err())
			}
			if len(fired) != 1 || fired[0].Elapsed != 16*time.Second {
				t.Fatalf("watchdog events %+v", fired)
			}
		})
	})
}

// Regression: the TTFT watchdog looked only at live attempts, so when the
// attempt that had produced content (at 25s, before TTFTTimeout = 30s)
// stalled and failed before commit, the call ended at once with a TTFT
// timeout. docs/design.md §2 rule 6 says "no content chunk from any attempt": now
// the error hedge finishes the call.
func TestRegressionTTFTTimeoutAfterContentFromFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(25*time.Second, "a0"), hang()})
		b := newUpstream("b", texts("b", 3, time.Second, time.Second))
		var hedges []HedgeEvent
		p := mustNew(t, Config{Delivery: Buffered, TTFTTimeout: 30 * time.Second, StallTimeout: 10 * time.Second, HedgeAfter: time.Hour},
			OnHedge(func(e HedgeEvent) { hedges = append(hedges, e) }))
		s := p.Stream(t.Context(), a.route(), b.route())
		start := time.Now()
		g := drain(s, start)
		if g.err != nil {
			t.Fatalf("err %v", g.err)
		}
		wantTexts(t, g, "b0", "b1", "b2")
		wantDur(t, "end", time.Since(start), 38*time.Second)
		if len(hedges) != 1 || hedges[0].Trigger != TriggerError || hedges[0].Elapsed != 35*time.Second {
			t.Fatalf("hedges %+v", hedges)
		}
		if st := s.Stats(); st.Attempts[0].Outcome != AttemptFailed || !errors.Is(st.Attempts[0].Err, ErrStallTimeout) {
			t.Fatalf("attempt 0: %q %v", st.Attempts[0].Outcome, st.Attempts[0].Err)
		}
	})
}

// Regression: when the driver was busy (here a slow WithResponseModel
// function on the first item, 150ms), a content chunk that had arrived in
// time and the expired TTFT timer were both ready, and select picked one
// at random: about half such calls failed with a TTFT timeout. Now events
// and the deadline are taken in the order they happened.
func TestRegressionStaleDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content time.Duration // after the keepalive at 1ms
		ttft    bool
	}{{"content in time", 20 * time.Millisecond, false}, {"content late", 119 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				synctest.Test(t, func(t *testing.T) {
					a := newUpstream("a", []step{keepalive(time.Millisecond), content(tc.content, "a0")})
					first := true
					p, _ := recorded(t, Config{MaxAttempts: 1, TTFTTimeout: 100 * time.Millisecond, Delivery: Buffered},
						withModel(func(chunk) (string, bool) {
							if first {
								first = false
								time.Sleep(150 * time.Millisecond)
							}
							return "", false
						}))
					start := time.Now()
					g := drain(p.Stream(t.Context(), a.route()), start)
					wantDur(t, "end", time.Since(start), 151*time.Millisecond)
					if got := errors.Is(g.err, ErrTTFTTimeout); got != tc.ttft {
						t.Fatalf("err %v", g.err)
					}
					if !tc.ttft {
						wantTexts(t, g, "a0")
					}
				})
			}
		})
	}
}

// Regression: a hedge that lost soon after its launch was recorded as a
// censored TTFT sample at HedgeMaxDelay, though it only showed a TTFT
// above its short elapsed time: three slightly slow primaries on a route
// whose TTFT is 1s pushed its learned delay to the 10s ceiling. Now a
// censored attempt is recorded only when it ran at least the hedge delay
// in force, at max(elapsed, delay), and dropped otherwise.
func TestRegressionLosingHedgeNotCensoredAtCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeWarmup: 20, HedgeBurst: 10})
		norm := newUpstream("a", texts("a", 1, time.Second, 0))
		for range 20 {
			drain(p.Stream(t.Context(), norm.route()), time.Now())
		}
		learned := p.HedgeDelay("a", "model-a")
		if !near(learned, time.Second, 0.01) {
			t.Fatalf("learned %v after 20 calls of 1s", learned)
		}
		for range 3 {
			// The primary answers at 2s; the hedge on the same route,
			// launched at the learned delay, would answer 1s later and
			// loses within a second of its launch.
			slow := newUpstream("a", texts("a", 1, 2*time.Second, 0), texts("a", 1, time.Second, 0))
			s := p.Stream(t.Context(), slow.route())
			drain(s, time.Now())
			st := s.Stats()
			if len(st.Attempts) != 2 || st.Winner != 0 || st.Attempts[1].Outcome != AttemptCanceled {
				t.Fatalf("stats %+v", st)
			}
		}
		// 20 samples of 1s and 3 primaries of 2s; the 3 losing hedges are
		// dropped.
		n, mx := p.delays.samples("a", "model-a")
		if n != 23 || !near(time.Duration(mx*float64(time.Second)), 2*time.Second, 0.01) {
			t.Fatalf("samples n=%v max=%vs", n, mx)
		}
		if d := p.HedgeDelay("a", "model-a"); !near(d, 2*time.Second, 0.01) {
			t.Fatalf("delay %v", d)
		}
	})
}

// Regression: a hedge launched as the Stream closed took a budget token
// and started an attempt span (then ended it, unnumbered in Stats) before
// it found the Stream closed. Now the closed check comes first, under the
// lock Close takes. Close runs from an OnAttemptDone hook of the failing
// primary, just before its error hedge would launch; the call, closed
// before it ended, is canceled.
func TestRegressionNoHedgeAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{fail(time.Second, &statusErr{code: 503})})
		var s *Stream[chunk]
		closed := make(chan struct{})
		p, exp := recorded(t, Config{HedgeAfter: time.Hour}, OnAttemptDone(func(AttemptEvent) {
			go func() { s.Close(); close(closed) }()
			synctest.Wait() // Close has marked the Stream closed and waits for this Next
		}))
		s = p.Stream(t.Context(), a.route(), a.route())
		g := drain(s, time.Now())
		<-closed
		if st := s.Stats(); len(st.Attempts) != 1 || st.Outcome != OutcomeCanceled || g.err != nil {
			t.Fatalf("attempts %d, outcome %q, err %v", len(st.Attempts), st.Outcome, g.err)
		}
		if n := len(exp.GetSpans()); n != 2 {
			t.Fatalf("%d spans, want the call's and attempt 0's", n)
		}
		if tok := p.budget.tokens; tok != DefaultHedgeBurst {
			t.Fatalf("budget %v, want %v: a token was taken", tok, DefaultHedgeBurst)
		}
		if c := a.opened(); c != 1 {
			t.Fatalf("opened %d", c)
		}
	})
}

// Regression: a panic in an Items function on a resume attempt was taken
// for the route refusing to continue (a non-transient error on a resume):
// the call went on to the watchdog and the route was marked as refusing
// continuations for ResumeRefusedFor. A panic is a bug, and fails the call
// where it happens, on a resume as on any attempt.
func TestRegressionPanicOnResumeIsNotRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(100*time.Millisecond, "hello "), hang()})
		b := continuing("b", []step{{after: 10 * time.Millisecond, kind: Control, tok: 7}, content(10*time.Millisecond, "world")})
		cfg := resumeCfg()
		cfg.ResumeAfter, cfg.StallTimeout = time.Second, 5*time.Second
		var resumes []ResumeEvent
		p := mustNew(t, cfg, withText(), withTokens(func(c chunk) (int64, bool) {
			if c.Tokens > 0 {
				panic("bad usage item")
			}
			return 0, false
		}), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, start)
		if !errors.Is(g.err, ErrExtractorPanic) || s.Stats().Outcome != OutcomeError {
			t.Fatalf("err %v, outcome %q: want the panic to fail the call", g.err, s.Stats().Outcome)
		}
		if d := time.Since(start); d != 1110*time.Millisecond {
			t.Fatalf("the call ended at %v, want 1.11s (the panic), not the watchdog", d)
		}
		for _, e := range resumes {
			if e.Skipped != "" {
				t.Fatalf("resume reported skipped (%s): a panic is not a refusal", e.Skipped)
			}
		}
		if p.refusals.refused("b", time.Now()) {
			t.Fatal("route b marked as refusing continuations")
		}
	})
}

// Regression: a panic in Items.Text on a delivered chunk ended the call,
// yet Stats counted that chunk (and the caller's view recorded it) as
// delivered though Next never returned it.
func TestRegressionTextPanicDeliversNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", texts("a", 2, 100*time.Millisecond, 100*time.Millisecond))
		p := mustNew(t, resumeCfg(), itemsOpt(func(i *Items[chunk]) {
			i.Text = func(c chunk) (string, bool) {
				if c.Text == "a1" {
					panic("bad chunk")
				}
				return c.Text, true
			}
		}))
		s := p.Stream(t.Context(), a.route())
		g := drain(s, time.Now())
		wantTexts(t, g, "a0")
		st := s.Stats()
		if !errors.Is(g.err, ErrExtractorPanic) || st.ChunksDelivered != 1 || st.ItemsDelivered != 1 || st.Attempts[0].ChunksDelivered != 1 {
			t.Fatalf("err %v; stats %+v: want 1 chunk delivered, as Next returned", g.err, st)
		}
	})
}

// Regression: a duration near math.MaxInt64 is a valid Config value (and
// STREAM__STALL_TIMEOUT_S=9223372036 a valid variable) meaning "never",
// but the deadlines added it to a clock reading and wrapped round to "at
// once": a stall timeout, a stall hedge, a TTFT hedge or a resume fired
// after a 1s pause. Each case pauses 1s between two chunks and must read
// both from the primary alone, without an error.
func TestRegressionHugeDurationsMeanNever(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		name string
		cfg  Config
		env  string // STREAM__STALL_TIMEOUT_S, when set
	}{
		{"StallTimeout, relayed", Config{StallTimeout: huge, ResumeAfter: 5 * time.Second}, ""},
		{"StallTimeout, read directly", Config{StallTimeout: huge, ResumeAfter: Off}, ""},
		{"StallTimeout from the environment", Config{ResumeAfter: 5 * time.Second}, "9223372036"},
		{"StallTimeout before commit", Config{StallTimeout: huge, Delivery: Buffered, ResumeAfter: Off}, ""},
		{"StallAfter", Config{StallAfter: huge, Delivery: Buffered}, ""},
		{"ResumeAfter", Config{ResumeAfter: huge}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(EnvStallTimeout, tc.env)
			}
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(10*time.Millisecond, "a0"), content(time.Second, "a1")})
				a.continues = true
				b := newUpstream("b", texts("b", 2, 10*time.Millisecond, 0))
				b.continues = true
				p := mustNew(t, tc.cfg, withText())
				g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
				if g.err != nil || b.opened() != 0 {
					t.Fatalf("err %v, b opened %d times", g.err, b.opened())
				}
				wantTexts(t, g, "a0", "a1")
			})
		})
	}
	// The TTFT hedge's deadline counts from the latest launch: here the
	// error hedge's, 100ms in.
	t.Run("HedgeAfter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := down("a")
			b := newUpstream("b", texts("b", 1, time.Second, 0))
			c := newUpstream("c", texts("c", 1, 10*time.Millisecond, 0))
			p := mustNew(t, Config{HedgeAfter: huge})
			g := drain(p.Stream(t.Context(), a.route(), b.route(), c.route()), time.Now())
			if g.err != nil || c.opened() != 0 {
				t.Fatalf("err %v, c opened %d times", g.err, c.opened())
			}
			wantTexts(t, g, "b0")
		})
	})
}

// Regression: ten refills of HedgeBudget 0.1 added up to
// 0.9999999999999999 tokens, so the eleventh call after an empty bucket
// could not hedge: 0.1 per call bought one hedge per 11 calls.
func TestRegressionBudgetTenthsAddUp(t *testing.T) {
	var b budget
	b.init(0.1, 1)
	if !b.take() || b.take() {
		t.Fatal("a bucket of burst 1 gives one token")
	}
	for range 10 {
		b.refill()
	}
	if !b.take() {
		t.Fatalf("10 refills of 0.1 leave %v tokens, not one", b.tokens)
	}
}

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

// A hedge that stays silent does not leave the call waiting on a stalled
// attempt (rule 2). Regressions, each of which left the caller waiting for
// the stalled attempt's next chunk a minute later:
//   - content the stalled attempt produced before a silent stall hedge's
//     launch blocked the TTFT trigger: it now counts content since the
//     latest launch only, so the stall hedge is followed by a TTFT hedge,
//     as a slow TTFT hedge is;
//   - the stall hedge watched only the newest live attempt: when that was
//     a hedge still without content, an older attempt that delivered
//     after the hedge's launch and then stalled was hedged by nothing (the
//     TTFT trigger rightly quiet after that content). It now watches the
//     live attempt whose content came last.
func TestRegressionHedgeAfterSilentHedge(t *testing.T) {
	for _, c := range []struct {
		name string
		a    []step
		// The expected hedges' triggers, and when c's last chunk reaches
		// the caller.
		triggers []Trigger
		last     time.Duration
	}{
		// a stalls at 0.11 s: a stall hedge to b at 1.11 s, silent; a
		// TTFT hedge to c 1 s later, whose chunks come 0.1–0.13 s later.
		{"stall, silent stall hedge", []step{content(100*time.Millisecond, "a0"), content(10*time.Millisecond, "a1"),
			content(time.Minute, "a2")},
			[]Trigger{TriggerStall, TriggerTTFT}, 2240 * time.Millisecond},
		// a stalls at 0.11 s: a stall hedge to b at 1.11 s, silent; a
		// delivers again at 1.51 s and stalls: a stall hedge to c at
		// 2.51 s.
		{"stall, then again", []step{content(100*time.Millisecond, "a0"), content(10*time.Millisecond, "a1"),
			content(1400*time.Millisecond, "a2"), content(time.Minute, "a3")},
			[]Trigger{TriggerStall, TriggerStall}, 2640 * time.Millisecond},
		// a is slow: a TTFT hedge to b at 1 s, silent; a's content at
		// 1.5 s stalls at 1.51 s: a stall hedge to c at 2.51 s.
		{"late first chunk, then a stall", []step{content(1500*time.Millisecond, "a0"), content(10*time.Millisecond, "a1"),
			content(time.Minute, "a2"), content(time.Minute, "a3")},
			[]Trigger{TriggerTTFT, TriggerStall}, 2640 * time.Millisecond},
	} {
		for _, delivery := range []Delivery{Streaming, Buffered} {
			t.Run(c.name+"/"+delivery.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					a := newUpstream("a", c.a)
					b := newUpstream("b", []step{keepalive(10 * time.Millisecond), hang()})
					cu := newUpstream("c", texts("c", 4, 100*time.Millisecond, 10*time.Millisecond))
					p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: time.Second, HoldChunks: 4,
						Delivery: delivery, MaxAttempts: 3})
					start := time.Now()
					s := p.Stream(t.Context(), a.route(), b.route(), cu.route())
					g := drain(s, start)
					wantTexts(t, g, "c0", "c1", "c2", "c3")
					wantDur(t, "c's last chunk", g.at[len(g.at)-1], c.last)
					st := s.Stats()
					if len(st.Attempts) != 3 || st.Attempts[1].Trigger != c.triggers[0] || st.Attempts[2].Trigger != c.triggers[1] {
						t.Fatalf("attempts %+v; want hedges %v", st.Attempts, c.triggers)
					}
				})
			})
		}
	}
}

// Regression, found by a review of the fix above: a newer attempt whose
// own stall was hedged already hid an older attempt from the stall
// trigger, so an older attempt that delivered after that hedge's launch
// and then stalled was hedged by nothing.
//
//	a: a0 at 0.1 s, stalls: a stall hedge to b at 1.1 s
//	b: b0 at 1.3 s, stalls: a stall hedge to c at 2.3 s, silent
//	a: a1 at 2.5 s, after c's launch, stalls: a stall hedge to d at 3.5 s
func TestRegressionStallHiddenByStalledNewerAttempt(t *testing.T) {
	for _, delivery := range []Delivery{Streaming, Buffered} {
		t.Run(delivery.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(100*time.Millisecond, "a0"), content(2400*time.Millisecond, "a1"),
					content(time.Minute, "a2")})
				b := newUpstream("b", []step{content(200*time.Millisecond, "b0"), hang()})
				c := newUpstream("c", []step{keepalive(10 * time.Millisecond), hang()})
				d := newUpstream("d", texts("d", 4, 100*time.Millisecond, 10*time.Millisecond))
				p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: time.Second, HoldChunks: 4,
					Delivery: delivery, MaxAttempts: 4})
				start := time.Now()
				s := p.Stream(t.Context(), a.route(), b.route(), c.route(), d.route())
				g := drain(s, start)
				wantTexts(t, g, "d0", "d1", "d2", "d3")
				wantDur(t, "d's last chunk", g.at[len(g.at)-1], 3630*time.Millisecond)
				wantLaunches(t, s.Stats(), "0s primary, 1.1s stall, 2.3s stall, 3.5s stall")
			})
		})
	}
}

// Regression, found by the same review: the first fix above let the stall
// trigger watch an attempt whose content came before the latest launch —
// a silence the TTFT or an error hedge had answered already — so one
// silence of the call was hedged twice.
func TestRegressionOneSilenceOneHedge(t *testing.T) {
	silent := func(name string) *upstream {
		return newUpstream(name, []step{keepalive(10 * time.Millisecond), hang()})
	}
	for _, c := range []struct {
		name      string
		a, b      []step
		stall     time.Duration
		launches  string
		lastChunk time.Duration
	}{
		// a is silent, then fails at 1.2 s; b (TTFT hedge at 1 s) has b0
		// at 1.1 s and stalls. Each silence since a launch is the TTFT
		// trigger's: the error hedge to c at 1.2 s, TTFT hedges at 2.2
		// and 3.2 s. No stall hedge for b's silence, which began before
		// c's launch.
		{"after an error hedge", []step{fail(1200*time.Millisecond, &statusErr{code: 503})},
			[]step{content(100*time.Millisecond, "b0"), hang()}, 1500 * time.Millisecond,
			"0s primary, 1s ttft, 1.2s error, 2.2s ttft, 3.2s ttft", 3330 * time.Millisecond},
		// b (TTFT hedge at 1 s) has b0 at 1.1 s, a has a0 at 1.2 s; both
		// stall: the call's content stopped at 1.2 s, a stall hedge to c
		// at 3.2 s. b fails at 3.5 s: an error hedge to d, and no stall
		// hedge beside it for a's silence, which began before c's launch;
		// a TTFT hedge 1 s later.
		{"beside an error hedge", []step{content(1200*time.Millisecond, "a0"), content(time.Minute, "a1")},
			[]step{content(100*time.Millisecond, "b0"), fail(2400*time.Millisecond, &statusErr{code: 503})}, 2 * time.Second,
			"0s primary, 1s ttft, 3.2s stall, 3.5s error, 4.5s ttft", 4630 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := newUpstream("a", c.a), newUpstream("b", c.b)
				e := newUpstream("e", texts("e", 4, 100*time.Millisecond, 10*time.Millisecond))
				p := mustNew(t, Config{HedgeAfter: time.Second, StallAfter: c.stall, HoldChunks: 4,
					Delivery: Buffered, MaxAttempts: 5})
				start := time.Now()
				s := p.Stream(t.Context(), a.route(), b.route(), silent("c").route(), silent("d").route(), e.route())
				g := drain(s, start)
				wantTexts(t, g, "e0", "e1", "e2", "e3")
				wantDur(t, "e's last chunk", g.at[len(g.at)-1], c.lastChunk)
				wantLaunches(t, s.Stats(), c.launches)
			})
		})
	}
}

// wantLaunches checks a call's attempts: when each launched and why, as
// "OFFSET TRIGGER" joined by ", ".
func wantLaunches(t *testing.T, st Stats, want string) {
	t.Helper()
	got := make([]string, len(st.Attempts))
	for i, a := range st.Attempts {
		got[i] = fmt.Sprintf("%v %s", a.LaunchOffset, a.Trigger)
	}
	if g := strings.Join(got, ", "); g != want {
		t.Fatalf("attempts launched %s\nwant %s", g, want)
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

// Regression: a watchdog that fell due while a Close was under way (its
// sources take a while to close, as an HTTP body does) ended the call as a
// timeout: attempts failed, routes charged — one ejected here — though the
// caller had hung up first. Close comes first now, before commit, relayed
// and direct.
func TestRegressionCloseBeforeWatchdogIsCanceled(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     Config
		a, b    *upstream
		closeAt time.Duration
	}{
		{"ttft timeout", Config{HedgeAfter: time.Hour, TTFTTimeout: time.Second},
			newUpstream("a", []step{hang()}), nil, 999 * time.Millisecond},
		{"stall timeout, relayed", Config{HedgeAfter: time.Hour, ResumeAfter: 500 * time.Millisecond, StallTimeout: time.Second, MaxAttempts: 2},
			newUpstream("a", []step{content(100*time.Millisecond, "A"), hang()}), continuing("b", []step{hang()}), 1099 * time.Millisecond},
		{"stall timeout, direct", Config{HedgeAfter: time.Hour, StallTimeout: time.Second},
			newUpstream("a", []step{content(100*time.Millisecond, "A"), hang()}), nil, 1099 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				routes := []Route[chunk]{}
				for _, u := range []*upstream{c.a, c.b} {
					if u != nil {
						u.closeDelay = 5 * time.Millisecond
						routes = append(routes, u.route())
					}
				}
				var failed, ejected atomic.Int32
				c.cfg.EjectFailures = 1
				p := mustNew(t, c.cfg, withText(),
					OnAttemptDone(func(e AttemptEvent) {
						if e.Outcome == AttemptFailed {
							failed.Add(1)
						}
					}),
					OnEject(func(RouteEvent) { ejected.Add(1) }))
				s := p.Stream(t.Context(), routes...)
				time.AfterFunc(c.closeAt, func() { s.Close() })
				drain(s, time.Now())
				if st := s.Stats(); st.Outcome != OutcomeCanceled || s.Err() != nil || failed.Load() != 0 || ejected.Load() != 0 {
					t.Fatalf("outcome %q, err %v, %d attempts failed, %d ejections; want a canceled call", st.Outcome, s.Err(), failed.Load(), ejected.Load())
				}
			})
		})
	}
}

// A caller that Closes (or cancels) while its committed stream's reader has
// chunks queued for it: they arrived, so the attempt span and Stats count
// them as received, and never delivered (wasted). They were dropped
// unrecorded: the span said 2 chunks where the upstream had sent 3.
func TestRegressionCloseRecordsQueuedChunks(t *testing.T) {
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(100*time.Millisecond, "A"), content(100*time.Millisecond, "B"),
					content(100*time.Millisecond, "C"), hang()})
				b := continuing("b", []step{hang()})
				p, exp := recorded(t, resumeCfg(), withText()) // resumable: the reader relays every item
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				start := time.Now()
				s := p.Stream(ctx, a.route(), b.route())
				for range 2 {
					if !s.Next() {
						t.Fatalf("Next: %v", s.Err())
					}
				}
				time.Sleep(500*time.Millisecond - time.Since(start)) // C arrives at 300 ms, unread
				if how == "close" {
					s.Close()
				} else {
					cancel()
					for s.Next() {
					}
					s.Close()
				}
				st := s.Stats().Attempts[0]
				if st.ContentChunks != 3 || st.ChunksDelivered != 2 {
					t.Fatalf("stats: %d chunks received, %d delivered; want 3 and 2", st.ContentChunks, st.ChunksDelivered)
				}
				_, atts := spansOf(t, exp)
				if n := mustAttr(t, atts[0], semconv.ChunkCount).AsInt64(); n != 3 {
					t.Fatalf("attempt span chunk.count %d, want 3", n)
				}
				if offs := mustAttr(t, atts[0], semconv.ChunkOffsetsUs).AsInt64Slice(); fmt.Sprint(offs) != "[100000 200000 300000]" {
					t.Fatalf("attempt span offsets %v", offs)
				}
			})
		})
	}
}

// A caller away from Next (a keepalive of the stalled stream returned)
// when a resume attempt's first chunk arrives, then Close: the queued
// chunk is recorded with its arrival, and the attempt's TTFT is its own
// (it was -3 s: the chunk counted, its time not).
func TestRegressionQueuedFirstChunkTTFT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), keepalive(2050 * time.Millisecond), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "B"), hang()})
		p := mustNew(t, resumeCfg(), withText())
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		for range 2 { // A, then the keepalive at 3.05 s; the resume opened at 3 s
			if !s.Next() {
				t.Fatal(s.Err())
			}
		}
		time.Sleep(3200*time.Millisecond - time.Since(start)) // B arrives at 3.1 s, unread
		s.Close()
		at := s.Stats().Attempts
		if len(at) != 2 || at[1].ContentChunks != 1 || at[1].TTFT != 100*time.Millisecond || at[1].ChunksDelivered != 0 {
			t.Fatalf("resume attempt %+v: want its queued chunk received at TTFT 100ms, not delivered", at[len(at)-1])
		}
	})
}

// A caller away from Next when a resume attempt's first chunk arrives and
// the stalled stream then speaks again: when the caller comes back, the
// resume wins (its chunk came first) and the stalled stream is cancelled.
// Its chunk that arrived before that was received all the same: its span
// and Stats count it, as wasted (it was dropped unrecorded).
func TestRegressionLoserQueuedChunksRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), keepalive(2050 * time.Millisecond),
			content(150*time.Millisecond, "X"), hang()})
		b := continuing("b", []step{content(100*time.Millisecond, "B"), hang()})
		p, exp := recorded(t, resumeCfg(), withText())
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		for range 2 { // A, then the keepalive at 3.05 s; the resume opened at 3 s
			if !s.Next() {
				t.Fatal(s.Err())
			}
		}
		time.Sleep(3500*time.Millisecond - time.Since(start)) // B at 3.1 s, X at 3.2 s, both unread
		if !s.Next() || s.Current().Text != "B" {
			t.Fatalf("caller read %+v (%v) after the resume, want B", s.Current(), s.Err())
		}
		s.Close()
		at := s.Stats().Attempts
		if len(at) != 2 || at[0].Outcome != AttemptCanceled || at[0].ContentChunks != 2 || at[0].ChunksDelivered != 1 {
			t.Fatalf("stalled attempt %+v: want canceled, 2 chunks received (A and X), 1 delivered", at[0])
		}
		_, atts := spansOf(t, exp)
		if offs := mustAttr(t, atts[0], semconv.ChunkOffsetsUs).AsInt64Slice(); fmt.Sprint(offs) != "[1000000 3200000]" {
			t.Fatalf("stalled attempt's offsets %v, want [1000000 3200000]", offs)
		}
		if n := mustAttr(t, atts[0], semconv.ChunkCount).AsInt64(); n != 2 {
			t.Fatalf("stalled attempt's chunk.count %d, want 2", n)
		}
	})
}

// After commit with resume possible the winner's reader relays every item
// through the events queue, which paces it to a slow caller. Regression:
// the losers' queued chunks were taken from the queue at every winner
// chunk (cancelOthers runs there to cancel a racing resume), the winner's
// set aside, and the reader ran ahead without bound: 603 of 2,000 chunks
// read for a caller that had 50.
func TestRegressionRelayPacedBySlowCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", texts("c", 2000, 10*time.Millisecond, time.Millisecond))
		p := mustNew(t, resumeCfg(), withText())
		s := p.Stream(t.Context(), a.route())
		defer s.Close()
		for i := range 50 {
			if !s.Next() {
				t.Fatalf("item %d: %v", i, s.Err())
			}
			time.Sleep(100 * time.Millisecond) // a slow consumer
		}
		synctest.Wait()
		a.mu.Lock()
		read := a.srcs[0].i
		a.mu.Unlock()
		// The queue (4 × MaxAttempts) and one item the reader holds.
		if limit := 50 + 4*resumeCfg().MaxAttempts + 2; read > limit {
			t.Fatalf("the reader read %d items for a caller that has 50: more than the queue allows (%d)", read, limit)
		}
	})
}

// A Source that Open returns beside its error is closed, and a panic in
// that Close is ignored like any other (the Source contract): the open's
// error stands, and a transient one is hedged at once. It was taken for
// a panic of the Open, a fatal error, and the call failed.
func TestRegressionOpenErrorCloseMayPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closes atomic.Int32
		a := Route[chunk]{Name: "a", Open: func(context.Context, Attempt) (Source[chunk], error) {
			return &panickyClose{closes: &closes}, &statusErr{code: 503}
		}}
		b := newUpstream("b", []step{content(100*time.Millisecond, "x")})
		p := mustNew(t, Config{HedgeAfter: time.Second})
		s := p.Stream(t.Context(), a, b.route())
		start := time.Now()
		g := drain(s, start)
		if g.err != nil {
			t.Fatalf("err = %v, want the 503 hedged and b's answer", g.err)
		}
		wantTexts(t, g, "x")
		wantDur(t, "b's chunk", g.at[0], 100*time.Millisecond) // the error hedge launched at once
		st := s.Stats()
		var se *statusErr
		if !errors.As(st.Attempts[0].Err, &se) || errors.Is(st.Attempts[0].Err, ErrOpenPanic) {
			t.Fatalf("attempt 0 failed with %v, want the 503", st.Attempts[0].Err)
		}
		if st.Attempts[1].Trigger != TriggerError || closes.Load() != 1 {
			t.Fatalf("attempt 1 trigger %s, closes %d", st.Attempts[1].Trigger, closes.Load())
		}
	})
}

// panickyClose is a Source with nothing to read whose Close panics.
type panickyClose struct{ closes *atomic.Int32 }

func (*panickyClose) Next() bool     { return false }
func (*panickyClose) Current() chunk { return chunk{} }
func (*panickyClose) Err() error     { return nil }
func (p *panickyClose) Close() error { p.closes.Add(1); panic("close exploded") }

// A cancel of the caller's context between two Nexts ends the call at the
// next one on the direct path too, as Close does and as the relay path
// did: the source's items already buffered (here: steps without a wait,
// which never look at the context) are not handed out.
func TestRegressionCancelEndsDirectRead(t *testing.T) {
	for _, resumable := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "relay"}[resumable], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(100*time.Millisecond, "x"), content(100*time.Millisecond, "y"),
					content(0, "z"), content(0, "w")})
				a.continues = resumable
				var opts []any
				if resumable {
					opts = append(opts, withText())
				}
				p := mustNew(t, Config{}, opts...)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				s := p.Stream(ctx, a.route())
				for _, want := range []string{"x", "y"} {
					if !s.Next() || s.Current().Text != want {
						t.Fatalf("want %q first", want)
					}
				}
				if (s.phase == phaseDirect) == resumable {
					t.Fatalf("phase %d", s.phase)
				}
				cancel()
				g := drain(s, time.Now())
				if len(g.texts) != 0 || !errors.Is(g.err, context.Canceled) {
					t.Fatalf("after the cancel: %q, err %v; want nothing and context.Canceled", g.texts, g.err)
				}
				if st := s.Stats(); st.Outcome != OutcomeCanceled || st.ChunksDelivered != 2 {
					t.Fatalf("outcome %s, delivered %d", st.Outcome, st.ChunksDelivered)
				}
			})
		})
	}
}

// A committed stream that fails with a transient error is resumed at once
// even when its Source's Close is slow: its reading goroutine closes it,
// and the driver no longer waited for that Close before acting. It did,
// and the stall watchdog, whose deadline (0.2 + 2 s) fell inside the
// 1.5 s Close, ended the call as a stall timeout at 2.5 s, though the
// 503 came at 1 s and a continuing route was there.
func TestRegressionFailureResumedDuringSlowClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{content(100*time.Millisecond, "x"), content(100*time.Millisecond, "y"),
			fail(800*time.Millisecond, &statusErr{code: 503})})
		a.closeDelay = 1500 * time.Millisecond
		b := newUpstream("b", []step{content(50*time.Millisecond, "z")})
		b.continues = true
		p := mustNew(t, Config{HedgeAfter: time.Hour, StallTimeout: 2 * time.Second, ResumeAfter: 1900 * time.Millisecond,
			MaxAttempts: 2, EjectFailures: NoEjection}, withText())
		s := p.Stream(t.Context(), a.route(), b.route())
		g := drain(s, time.Now())
		if g.err != nil {
			t.Fatalf("err = %v, want the 503 resumed", g.err)
		}
		wantTexts(t, g, "x", "y", "z")
		wantDur(t, "the continuation's chunk", g.at[2], 1050*time.Millisecond)
		if st := s.Stats(); st.Outcome != OutcomeOK || st.Attempts[1].Trigger != TriggerResume {
			t.Fatalf("outcome %s, attempt 1 %s", st.Outcome, st.Attempts[1].Trigger)
		}
	})
}

// A Source can end with a *TimeoutError of its own (a Stream is a
// Source: an inner call's watchdog). The call's outcome follows the error
// on the direct read as it does before commit and on the relay; the
// direct read said error, beside an error.type of stall_timeout.
func TestRegressionInheritedTimeoutOutcome(t *testing.T) {
	inner := &TimeoutError{Kind: TimeoutStall, After: time.Second, Route: "inner", ChunksReceived: 1, ChunksDelivered: 1, Truncated: true}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"direct", Config{MaxAttempts: 1}},
		{"before commit", Config{MaxAttempts: 1, HoldChunks: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", []step{content(100*time.Millisecond, "x"), fail(100*time.Millisecond, inner)})
				s := mustNew(t, c.cfg).Stream(t.Context(), a.route())
				g := drain(s, time.Now())
				if !errors.Is(g.err, inner) || s.Stats().Outcome != OutcomeStallTimeout {
					t.Fatalf("err %v, outcome %s; want the inner timeout, stall_timeout", g.err, s.Stats().Outcome)
				}
			})
		})
	}
}

// Regression (outside review): an error whose methods panic — a typed nil
// *statusErr returned as an error, the classic Go slip — panicked out of
// the caller's Next when hedgeprobe classified it (IsTransient), and on
// the direct path after the call was marked done, so its spans never
// ended. Now the error is vetted where it enters: the attempt fails with
// ErrSourcePanic, every span ends.
// The error may also hide the typed nil in its chain, behind a wrapper
// whose Error is safe (fmt prints a nil receiver as <nil>), with only a
// method that a classification reaches late panicking: ErrorType (a span's
// error.type), or Is behind a Transient that answers first.
func TestRegressionErrorWithPanickingMethods(t *testing.T) {
	var typedNil *statusErr
	broken := map[string]error{
		"typed nil":                        typedNil,
		"typed nil ErrorType, wrapped":     fmt.Errorf("open: %w", (*nilErrorTyper)(nil)),
		"typed nil Is, behind a Transient": transientOver{(*nilIs)(nil)},
	}
	routes := map[string]func() Route[chunk]{}
	for what, err := range broken {
		routes[what+", from Source.Err"] = func() Route[chunk] {
			return Route[chunk]{Name: "a", Open: func(context.Context, Attempt) (Source[chunk], error) {
				return &errAfterOne{err: err}, nil
			}}
		}
		routes[what+", from Route.Open"] = func() Route[chunk] {
			return Route[chunk]{Name: "a", Open: func(context.Context, Attempt) (Source[chunk], error) {
				return nil, err
			}}
		}
	}
	for name, route := range routes {
		for _, hold := range []int{0, 2} { // 0: read directly after commit; 2: before commit
			t.Run(fmt.Sprintf("%s, HoldChunks %d", name, hold), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					exp := tracetest.NewInMemoryExporter()
					tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
					defer tp.Shutdown(context.Background())
					p := mustNew(t, Config{MaxAttempts: 1, HoldChunks: hold}, WithTracerProvider(tp))
					s := p.Stream(t.Context(), route())
					var r any
					func() {
						defer func() { r = recover() }()
						for s.Next() {
						}
					}()
					if r != nil {
						t.Fatalf("Next panicked: %v", r)
					}
					if err := s.Err(); !errors.Is(err, ErrSourcePanic) || IsTransient(err) {
						t.Fatalf("err %v, want a fatal ErrSourcePanic", err)
					}
					if o := s.Stats().Outcome; o != OutcomeError {
						t.Fatalf("outcome %q", o)
					}
					s.Close()
					if n := len(exp.GetSpans()); n != 2 {
						t.Fatalf("%d spans ended, want the call's and the attempt's", n)
					}
				})
			})
		}
	}
}

// nilErrorTyper's methods dereference their receiver.
type nilErrorTyper struct{ kind string }

func (e *nilErrorTyper) Error() string     { return e.kind }
func (e *nilErrorTyper) ErrorType() string { return e.kind }

// nilIs's Is dereferences its receiver.
type nilIs struct{ target error }

func (e *nilIs) Error() string        { return "nilIs" }
func (e *nilIs) Is(target error) bool { return e.target == target }

// transientOver is a transient error wrapping err.
type transientOver struct{ err error }

func (e transientOver) Error() string   { return "transient" }
func (e transientOver) Transient() bool { return true }
func (e transientOver) Unwrap() error   { return e.err }

// errAfterOne is a Source of one content chunk that then ends with err.
type errAfterOne struct {
	n   int
	err error
}

func (s *errAfterOne) Next() bool     { s.n++; return s.n == 1 }
func (s *errAfterOne) Current() chunk { return chunk{Kind: Content, Text: "x"} }
func (s *errAfterOne) Err() error     { return s.err }
func (s *errAfterOne) Close() error   { return nil }

// Regression (rule 10; ResumeRefused: "the call goes on"): the committed
// stream fails mid-answer with a transient error and the resume it asks
// for at once goes to b, which refuses the continuation (400). c can
// continue and MaxAttempts allows a third attempt, so the call goes on
// there, as it does when b fails with a transient error instead. It used
// to end with the committed stream's error: only a transient failure
// asked for the next resume at once.
func TestRegressionRefusedResumeGoesOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		bErr error
	}{
		{"b fails transiently", &statusErr{code: 503}},
		{"b refuses", &statusErr{code: 400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := continuing("a", []step{content(time.Second, "A"), fail(500*time.Millisecond, &statusErr{code: 502})})
				b := continuing("b")
				b.openErr = tc.bErr
				c := continuing("c", []step{content(100*time.Millisecond, " B")})
				var resumes []ResumeEvent
				p := mustNew(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
				s := p.Stream(t.Context(), a.route(), b.route(), c.route())
				g := drain(s, time.Now())
				if g.err != nil || joined(g) != "A B" {
					t.Fatalf("caller read %q, err %v; want \"A B\" from a resume on c (c opened %d times; resume events %+v)",
						joined(g), g.err, c.opened(), resumes)
				}
			})
		})
	}
}

// Regression (ErrNilSource: "it is fatal"): a resume attempt whose Open
// returned neither a Source nor an error was taken for the route refusing
// continuations — the call went on and the route was not asked to
// continue for ResumeRefusedFor. Like a panic, it is a bug in the route's
// code, not the route's answer, so it ends the call.
func TestRegressionNilSourceOnResumeIsFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a", []step{content(time.Second, "A"), content(3*time.Second, "B")})
		var resumes []ResumeEvent
		b := Route[chunk]{Name: "b", Continues: true, Open: func(ctx context.Context, at Attempt) (Source[chunk], error) {
			return nil, nil
		}}
		p := mustNew(t, resumeCfg(), withText(), OnResume(func(e ResumeEvent) { resumes = append(resumes, e) }))
		s := p.Stream(t.Context(), a.route(), b)
		g := drain(s, time.Now())
		if !errors.Is(g.err, ErrNilSource) {
			t.Fatalf("caller read %q, err %v, resume events %+v; want the call failed with ErrNilSource",
				joined(g), g.err, resumes)
		}
	})
}

// Regression (privacy: no answer text in a span's status): a recovered
// panic's value went into the spans' status descriptions, and a value the
// caller's code panics with can quote the item it was given. The status
// now names the value's type (a runtime error keeps its message, which
// quotes nothing); Err still quotes the value, for the caller.
func TestRegressionPanicValueNotInStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    itemsOpt
		status string // what the status says of the value instead
	}{
		{"token count", withTokens(func(c chunk) (int64, bool) { panic("unexpected usage item: " + c.Text) }), "a panic value of type string"},
		{"response model", withModel(func(c chunk) (string, bool) { panic(fmt.Errorf("no model in %q", c.Text)) }), "a panic value of type *errors.errorString"},
		{"runtime error", withTokens(func(c chunk) (int64, bool) { return int64([]byte(c.Text)[len(c.Text)+1]), true }), "index out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, exp := recorded(t, Config{MaxAttempts: 1}, tc.opt)
				s := p.Stream(t.Context(), newUpstream("a", []step{content(time.Second, "the answer is SECRET")}).route())
				for s.Next() {
				}
				if !errors.Is(s.Err(), ErrExtractorPanic) {
					t.Fatalf("err %v, want ErrExtractorPanic", s.Err())
				}
				if tc.name != "runtime error" && !strings.Contains(s.Err().Error(), "SECRET") {
					t.Errorf("err %q: the caller's error lost the panic value", s.Err())
				}
				spans := exp.GetSpans()
				if len(spans) != 2 {
					t.Fatalf("%d spans, want the call's and the attempt's", len(spans))
				}
				for _, sp := range spans {
					if d := sp.Status.Description; strings.Contains(d, "SECRET") || !strings.Contains(d, tc.status) {
						t.Errorf("span %q: status %q, want %q and no answer text", sp.Name, d, tc.status)
					}
				}
			})
		})
	}
}

// Regression (rule 11; the delay sketch's censoring): the call's TTFT
// watchdog failed every live attempt, and route health counted each — a
// healthy route hedged to 100 ms before the deadline was ejected after
// three such calls. An attempt cut off sooner than its hedge delay is not
// counted now; the primary, which had the whole TTFT budget, still is.
func TestRegressionTTFTTimeoutSparesLateHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ejected []string
		p := mustNew(t, Config{HedgeAfter: 9900 * time.Millisecond, TTFTTimeout: 10 * time.Second, MaxAttempts: 2},
			OnEject(func(e RouteEvent) { ejected = append(ejected, e.Route) }))
		for range 3 {
			a := newUpstream("a", []step{hang()})
			b := newUpstream("b", texts("b", 1, 500*time.Millisecond, 0))
			g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
			if !errors.Is(g.err, ErrTTFTTimeout) {
				t.Fatalf("err %v, want a TTFT timeout", g.err)
			}
		}
		if !slices.Equal(ejected, []string{"a"}) {
			t.Errorf("ejected %v, want a alone: b was never given more than 100 ms", ejected)
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

// slowOnStart is a span processor whose OnStart of every span but an
// attempt's (kind CLIENT) takes a millisecond — an exporter-side processor
// or a sampler at work — so the primary launches a millisecond after the
// call started.
type slowOnStart struct{}

func (slowOnStart) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.SpanKind() != trace.SpanKindClient {
		time.Sleep(time.Millisecond)
	}
}
func (slowOnStart) OnEnd(sdktrace.ReadOnlySpan)      {}
func (slowOnStart) Shutdown(context.Context) error   { return nil }
func (slowOnStart) ForceFlush(context.Context) error { return nil }

// Regression (rule 11): a primary that hung for the call's whole TTFT
// budget went uncounted whenever its hedge delay was at least the timeout
// (a cold route's is HedgeMaxDelay, 10 s) and anything took time between
// the call's start and the primary's launch: it ran a millisecond short of
// min(delay, TTFTTimeout), and its route was never ejected.
func TestRegressionTTFTTimeoutCountsThePrimary(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow_span_start=%v", slow), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []sdktrace.TracerProviderOption
				if slow {
					opts = append(opts, sdktrace.WithSpanProcessor(slowOnStart{}))
				}
				tp := sdktrace.NewTracerProvider(opts...)
				defer func() { _ = tp.Shutdown(context.Background()) }()
				var ejected []string
				p := mustNew(t, Config{TTFTTimeout: 5 * time.Second, MaxAttempts: 1, EjectFailures: 1},
					WithTracerProvider(tp), OnEject(func(e RouteEvent) { ejected = append(ejected, e.Route) }))
				a := newUpstream("a", []step{hang()})
				if g := drain(p.Stream(t.Context(), a.route()), time.Now()); !errors.Is(g.err, ErrTTFTTimeout) {
					t.Fatalf("err %v, want a TTFT timeout", g.err)
				}
				if !slices.Equal(ejected, []string{"a"}) {
					t.Errorf("ejected %v, want [a]: the primary hung for the whole TTFT budget", ejected)
				}
			})
		})
	}
}

// Regression (privacy): a span's status replaced the first occurrence of a
// panic value's text, and a short value — a streamed token such as "he" —
// also occurs in the status's fixed prefix ("hedgeprobe: …"): the prefix
// was mangled and the value, at the end, stayed.
func TestRegressionShortPanicValueLeavesTheStatus(t *testing.T) {
	for _, text := range []string{"he", "o", "token count", "a panic value"} {
		t.Run(text, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, exp := recorded(t, Config{MaxAttempts: 1},
					withTokens(func(c chunk) (int64, bool) { panic(c.Text) }))
				s := p.Stream(t.Context(), newUpstream("a", []step{content(time.Second, text)}).route())
				for s.Next() {
				}
				if !errors.Is(s.Err(), ErrExtractorPanic) || !strings.HasSuffix(s.Err().Error(), ": "+text) {
					t.Fatalf("err %v, want ErrExtractorPanic quoting the value", s.Err())
				}
				want := "hedgeprobe: an Items function panicked: token count: a panic value of type string"
				for _, sp := range exp.GetSpans() {
					if d := sp.Status.Description; d != want {
						t.Errorf("span %q: status %q, want %q", sp.Name, d, want)
					}
				}
			})
		})
	}
}
