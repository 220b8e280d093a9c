package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
