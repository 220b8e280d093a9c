package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

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
		// StallAfter Off: the watchdog, not the stall trigger, ends a's silence.
		p := mustNew(t, Config{Delivery: Buffered, TTFTTimeout: 30 * time.Second, StallTimeout: 10 * time.Second, HedgeAfter: time.Hour, StallAfter: Off},
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
