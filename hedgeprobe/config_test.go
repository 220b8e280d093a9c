package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Bad input gives a clear error from the constructor, never a panic.
func TestBadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"negative MaxAttempts", Config{MaxAttempts: -1}, "MaxAttempts = -1"},
		{"negative HedgeAfter", Config{HedgeAfter: -time.Second}, "HedgeAfter = -1s"},
		{"negative TTFTTimeout", Config{TTFTTimeout: -time.Second}, "TTFTTimeout = -1s"},
		{"negative StallTimeout", Config{StallTimeout: -time.Second}, "StallTimeout = -1s"},
		{"negative PushbackWait", Config{PushbackWait: -time.Second}, "PushbackWait = -1s"},
		{"negative HedgeMinDelay", Config{HedgeMinDelay: -time.Second}, "HedgeMinDelay = -1s"},
		{"quantile 1", Config{HedgeQuantile: 1}, "HedgeQuantile = 1"},
		{"quantile 1.5", Config{HedgeQuantile: 1.5}, "HedgeQuantile = 1.5"},
		{"quantile negative", Config{HedgeQuantile: -0.5}, "HedgeQuantile = -0.5"},
		{"min above max", Config{HedgeMinDelay: 2 * time.Second, HedgeMaxDelay: time.Second}, "HedgeMinDelay = 2s is above HedgeMaxDelay = 1s"},
		{"negative budget", Config{HedgeBudget: -0.1}, "HedgeBudget = -0.1"},
		// A burst below one token never launches a hedge: hedging off
		// without a word, where MaxAttempts 1 says so.
		{"burst below a token", Config{HedgeBurst: 0.5}, "HedgeBurst = 0.5: must be at least 1"},
		{"negative burst", Config{HedgeBurst: -1}, "HedgeBurst = -1"},
		{"negative HoldChunks", Config{HoldChunks: -2}, "HoldChunks = -2"},
		{"unknown Delivery", Config{Delivery: 7}, "Delivery = 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := newProber(c.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q", err, c.msg)
			}
		})
	}
	if _, err := New(Config{}, Items[chunk]{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil classifier: %v", err)
	}
	// Every span carries the operation name, as a protobuf string.
	if _, err := newProber(Config{}, WithOperationName("chat\xff")); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(fmt.Sprint(err), `WithOperationName "chat\xff" is not valid UTF-8`) {
		t.Fatalf("operation name not UTF-8: %v", err)
	}
	var d Delivery
	if err := d.UnmarshalText([]byte("Buffered")); err != nil || d != Buffered {
		t.Fatal(d, err)
	}
	if err := d.UnmarshalText([]byte("eager")); err == nil {
		t.Fatal("bad delivery parsed")
	}
}

// Bad routes: none, nil Open, no Name, a name that is not UTF-8 → the
// Stream's Err, nothing started. (A route name that is not UTF-8 was
// written into the spans, and the OTLP exporter failed its whole batch on
// it: TestTelemetryOTLPInvalidUTF8.)
func TestBadRoutes(t *testing.T) {
	p := mustNew(t, Config{})
	up := newUpstream("a", []step{content(0, "x")})
	ok := up.route()
	bad := func(f func(r *Route[chunk])) []Route[chunk] {
		r := ok
		f(&r)
		return []Route[chunk]{ok, r}
	}
	for _, c := range []struct {
		name   string
		routes []Route[chunk]
		want   error
		msg    string
	}{
		{"none", nil, ErrNoRoutes, "no routes"},
		{"nil open", []Route[chunk]{ok, {Name: "b"}}, ErrInvalidRoute, `routes[1] ("b") has a nil Open`},
		{"no name", []Route[chunk]{{Open: ok.Open}}, ErrInvalidRoute, "routes[0] has no Name"},
		{"name not UTF-8", bad(func(r *Route[chunk]) { r.Name = "b\xff" }), ErrInvalidRoute, `routes[1] Name "b\xff" is not valid UTF-8`},
		{"provider not UTF-8", bad(func(r *Route[chunk]) { r.Provider = "\xc3" }), ErrInvalidRoute, `routes[1] Provider "\xc3" is not valid UTF-8`},
		{"model not UTF-8", bad(func(r *Route[chunk]) { r.Model = "gpt\xfe" }), ErrInvalidRoute, `routes[1] Model "gpt\xfe" is not valid UTF-8`},
		{"server not UTF-8", bad(func(r *Route[chunk]) { r.ServerAddress = "h\xff" }), ErrInvalidRoute, `routes[1] ServerAddress "h\xff" is not valid UTF-8`},
		{"port out of range", bad(func(r *Route[chunk]) { r.ServerPort = 65536 }), ErrInvalidRoute, `routes[1] ("a") has ServerPort 65536, not a port`},
		{"negative port", bad(func(r *Route[chunk]) { r.ServerPort = -1 }), ErrInvalidRoute, `has ServerPort -1, not a port`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := p.Stream(t.Context(), c.routes...)
			if s.Next() || !errors.Is(s.Err(), c.want) || !strings.Contains(s.Err().Error(), c.msg) {
				t.Fatalf("err = %v", s.Err())
			}
			if s.Stats().Outcome != OutcomeError || s.Close() != nil {
				t.Fatal("outcome")
			}
			if n := len(up.asked); n != 0 {
				t.Fatalf("%d attempts opened", n)
			}
		})
	}
}

// A call with invalid routes has finished once its first Next reports
// false: a second Close, a Next after Close, and a Close racing the first
// Next return at once. (It never closed its finished channel, and they
// waited for ever.)
func TestBadRoutesFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{})
		s := p.Stream(t.Context())
		s.Next()
		s.Close()
		done := make(chan bool)
		go func() { s.Close(); done <- s.Next() }()
		racing := p.Stream(t.Context(), Route[chunk]{Name: "no open"})
		go func() { racing.Close() }()
		go func() { racing.Next(); racing.Close(); done <- false }()
		synctest.Wait()
		for range 2 {
			select {
			case next := <-done:
				if next {
					t.Fatal("Next after Close reported an item")
				}
			default:
				t.Fatal("a Close or a Next blocks on a call with invalid routes")
			}
		}
		if !errors.Is(s.Err(), ErrNoRoutes) || s.Stats().Outcome != OutcomeError {
			t.Fatalf("err %v, outcome %s", s.Err(), s.Stats().Outcome)
		}
	})
}

// A classifier that panics fails the call with an error, before or after
// commit, and leaks nothing.
func TestClassifierPanics(t *testing.T) {
	for _, at := range []int{0, 3} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := 0
				classify := func(c chunk) Kind {
					if n++; n > at {
						panic("bad chunk")
					}
					return c.Kind
				}
				a := newUpstream("a", texts("a", 10, time.Millisecond, time.Millisecond))
				b := newUpstream("b", texts("b", 10, time.Millisecond, time.Millisecond))
				p, err := New(Config{HedgeAfter: time.Second}, Items[chunk]{Classify: classify})
				if err != nil {
					t.Fatal(err)
				}
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if !errors.Is(g.err, ErrClassifierPanic) || s.Stats().Outcome != OutcomeError {
					t.Fatalf("err = %v", g.err)
				}
				if len(g.texts) != at || b.opened() != 0 || a.closes()[0] != 1 {
					t.Fatalf("delivered %d, hedge opened %d", len(g.texts), b.opened())
				}
			})
		})
	}
}

// A panicking Open and a nil Source are fatal attempt errors.
func TestBadOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{})
		r := Route[chunk]{Name: "p"}
		r.Open = func(context.Context, Attempt) (Source[chunk], error) { panic("boom") }
		s := p.Stream(t.Context(), r)
		if s.Next() || !errors.Is(s.Err(), ErrOpenPanic) {
			t.Fatalf("err = %v", s.Err())
		}
		r.Open = func(context.Context, Attempt) (Source[chunk], error) { return nil, nil }
		s = p.Stream(t.Context(), r)
		if s.Next() || !errors.Is(s.Err(), ErrNilSource) {
			t.Fatalf("err = %v", s.Err())
		}
	})
}

// Validate reports every invalid field at once, each with its value, and
// says that MaxAttempts above 5 is clamped rather than rejected.
func TestValidateReportsEveryField(t *testing.T) {
	_, err := newProber(Config{MaxAttempts: -3, HedgeAfter: -time.Second, HedgeQuantile: 2, ResumeAfter: 5 * time.Second, StallTimeout: 4 * time.Second})
	// The relation between two valid fields is judged beside the invalid ones.
	for _, want := range []string{"MaxAttempts = -3", "clamped to 5", "HedgeAfter = -1s", "HedgeQuantile = 2", "ResumeAfter = 5s must be below StallTimeout = 4s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %q", err, want)
		}
	}
	// The relation of the knobs: the watchdog is the last resort.
	_, err = newProber(Config{ResumeAfter: 5 * time.Second, StallTimeout: 4 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "ResumeAfter = 5s must be below StallTimeout = 4s") {
		t.Errorf("err = %v", err)
	}
	if c := mustNew(t, Config{MaxAttempts: 99}).Config(); c.MaxAttempts != MaxAttemptsLimit {
		t.Errorf("MaxAttempts 99 → %d, want clamped to %d", c.MaxAttempts, MaxAttemptsLimit)
	}
	// A StallTimeout at or below the default ResumeAfter halves it.
	if c := mustNew(t, Config{StallTimeout: 2 * time.Second}).Config(); c.ResumeAfter != time.Second {
		t.Errorf("ResumeAfter = %v with StallTimeout 2s, want 1s", c.ResumeAfter)
	}
	// …down to a StallTimeout of 1ns, which leaves no room: Off, not 0
	// (which a Config reads as "the default").
	if c := mustNew(t, Config{StallTimeout: 1}).Config(); c.ResumeAfter != Off {
		t.Errorf("ResumeAfter = %v with StallTimeout 1ns, want Off", c.ResumeAfter)
	}
}

// TestEnvDecimalSeconds: decimal seconds read as exactly as a duration
// written with its unit; truncating the float made 271 of the 10,000
// values from 0.001 to 10.000 a nanosecond short (1.001 → 1.000999999s).
func TestEnvDecimalSeconds(t *testing.T) {
	for ms := 1; ms <= 10_000; ms++ {
		s := fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
		got, err := parseSeconds(s)
		if want := time.Duration(ms) * time.Millisecond; err != nil || got != want {
			t.Fatalf("%q → %v, %v; want %v", s, got, err, want)
		}
	}
}

// TestEnvRangeBound: the message for a value past a Go duration's range
// gives the bound the check applies (found by an outside review: it said
// "less than 9223372036 seconds" and accepted 9223372036.85).
func TestEnvRangeBound(t *testing.T) {
	if d, err := parseSeconds("9223372036.85"); err != nil || d <= 0 {
		t.Fatalf("9223372036.85 → %v, %v", d, err)
	}
	_, err := parseSeconds("9223372036.86")
	if err == nil || err.Error() != "must be below 9223372036.854776 seconds, a Go duration's range" {
		t.Fatalf("9223372036.86 → %v", err)
	}
}

// FuzzParseSeconds: an environment value is seconds or a Go duration; a
// value that reads as more than zero never becomes 0 (off, or the
// adaptive delay) and nothing becomes negative or wraps round.
func FuzzParseSeconds(f *testing.F) {
	for _, s := range []string{"2.5", "2500ms", "0", " 1 ", "-1", "1e-9", "1e-10", "0.5ns", "-0s", "1h30m",
		"9223372036", "9223372036.854775807", "NaN", "+Inf", "0x1p-2", "1_000", "", "1e300", "5µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseSeconds(s)
		if err != nil {
			if d != 0 || err.Error() == "" {
				t.Fatalf("%q: %v with %v", s, err, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: %v", s, d)
		}
		trimmed := strings.TrimSpace(s)
		if v, ferr := strconv.ParseFloat(trimmed, 64); ferr == nil {
			if (v > 0) != (d > 0) {
				t.Fatalf("%q reads as %g s, became %v", s, v, d)
			}
			return
		}
		if want, derr := time.ParseDuration(trimmed); derr != nil || want != d {
			t.Fatalf("%q became %v; time.ParseDuration says %v, %v", s, d, want, derr)
		}
	})
}
