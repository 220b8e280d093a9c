package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

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
