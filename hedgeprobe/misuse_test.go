package hedgeprobe

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A Prober not made by New, and a Stream not made by Prober.Stream,
// panicked at the first Next (outside review: a nil dereference in the
// call's telemetry, a close of a nil channel in Close). Their calls now
// fail with an error wrapping ErrInvalidConfig, and Close does nothing.
func TestProberAndStreamNotMade(t *testing.T) {
	route := newUpstream("a", []step{content(0, "x")}).route()
	var zero Prober[chunk]
	var none *Prober[chunk]
	for name, s := range map[string]*Stream[chunk]{
		"a zero Prober's": zero.Stream(t.Context(), route),
		"a nil Prober's":  none.Stream(t.Context(), route),
		"a zero":          {},
	} {
		if s.Next() || !errors.Is(s.Err(), ErrInvalidConfig) || s.Close() != nil || s.Next() {
			t.Errorf("%s Stream: Err %v; want no item, an error wrapping ErrInvalidConfig, and a Close that does nothing", name, s.Err())
		}
	}
	var c *Config
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("(*Config)(nil).Validate() = %v, want an error wrapping ErrInvalidConfig", err)
	}
}

// A classifier's Kind that is none of the three is a Keepalive, as
// Kind.String names it (outside review: the telemetry took it for a
// Control item and asked OutputTokens about it); it is delivered, never
// counted as content.
func TestUnknownKindIsKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked := 0
		p := mustNew(t, Config{MaxAttempts: 1}, withTokens(func(c chunk) (int64, bool) {
			if c.Kind > Content {
				asked++
			}
			return 0, false
		}))
		u := newUpstream("a", []step{content(0, "x"), {after: time.Millisecond, kind: Kind(7)}, content(time.Millisecond, "y")})
		s := p.Stream(t.Context(), u.route())
		g := drain(s, time.Now())
		st := s.Stats()
		if g.err != nil || len(g.kinds) != 3 || st.ChunksDelivered != 2 || asked != 0 {
			t.Errorf("err %v, %d items, %d content chunks, OutputTokens asked %d times about Kind(7); want nil, 3, 2, 0", g.err, len(g.kinds), st.ChunksDelivered, asked)
		}
	})
}

// A conflict between fields the environment filled named only the fields
// (outside review: ResumeAfter = 5s must be below StallTimeout = 1s),
// which no code sets; the error now says which variables gave them.
func TestConfigErrorNamesTheEnvironment(t *testing.T) {
	t.Setenv(EnvStallTimeout, "1")
	t.Setenv(EnvResumeAfter, "5")
	_, err := newProber(Config{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), EnvResumeAfter+"=5 (ResumeAfter)") ||
		!strings.Contains(err.Error(), EnvStallTimeout+"=1 (StallTimeout)") {
		t.Fatalf("New: %v; want an error naming %s and %s", err, EnvResumeAfter, EnvStallTimeout)
	}
	// A variable whose field the code set is not applied, nor named.
	if _, err := newProber(Config{StallTimeout: time.Second, ResumeAfter: 5 * time.Second}); err == nil ||
		strings.Contains(err.Error(), EnvResumeAfter) || strings.Contains(err.Error(), EnvStallTimeout) {
		t.Fatalf("New: %v; want an error that names no variable", err)
	}
}
