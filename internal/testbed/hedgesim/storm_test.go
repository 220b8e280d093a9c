package hedgesim

import (
	"testing"
	"time"
)

// TestStormRateLimit checks the storm as a rate limit, attempt by attempt:
// one token per route every 12 s, a refusal's Retry-After the wait for the
// next token rounded up to a second, no token taken by a refusal, and no
// limit on calls outside the storm's window.
func TestStormRateLimit(t *testing.T) {
	sc := DefaultScenario(100) // storm over calls 60–64
	sc.StormLimit = 1.0 / 12
	st := newStorm(&sc)
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	ok := draw{status: 200}
	steps := []struct {
		name  string
		call  int
		route int
		at    time.Duration
		in    draw
		want  int
		after time.Duration
	}{
		{"first attempt takes the token", 60, 0, 0, ok, 200, 0},
		{"5 s later: 7 s to wait", 61, 0, 5 * time.Second, ok, 429, 7 * time.Second},
		{"the other route has its own bucket", 61, 1, 5 * time.Second, ok, 200, 0},
		{"half a second short rounds up", 62, 0, 11500 * time.Millisecond, ok, 429, time.Second},
		{"the refusals took no token", 62, 0, 12 * time.Second, ok, 200, 0},
		{"a call before the storm is not limited", 59, 0, 13 * time.Second, ok, 200, 0},
		{"nor does it take a token", 63, 0, 24 * time.Second, ok, 200, 0},
		{"a call after the storm is not limited", 65, 0, 25 * time.Second, ok, 200, 0},
		{"an error keeps its status", 64, 0, 26 * time.Second, draw{status: 503}, 503, 0},
		{"and takes no token", 64, 0, 36 * time.Second, ok, 200, 0},
	}
	refused := 0
	for _, s := range steps {
		got := st.answer(s.call, s.route, s.in, t0.Add(s.at))
		if got.status != s.want || got.retryAfter != s.after {
			t.Fatalf("%s: status %d, Retry-After %v; want %d, %v", s.name, got.status, got.retryAfter, s.want, s.after)
		}
		if got.status == 429 {
			refused++
		}
	}
	if st.Refused() != refused || refused != 2 {
		t.Errorf("Refused() = %d, want %d", st.Refused(), refused)
	}
}

// TestStormCoin checks that the storm as designed stays a coin that does
// not look at the load, and that its 429s are counted all the same.
func TestStormCoin(t *testing.T) {
	sc := DefaultScenario(1000)
	st := newStorm(&sc)
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	refused, storm := 0, 0
	for call := range sc.Calls {
		for k := range 2 {
			d := st.answer(call, 0, sc.draw(call, Primary, k, true), t0)
			if d != sc.draw(call, Primary, k, true) {
				t.Fatalf("call %d attempt %d: the coin's draw changed", call, k)
			}
			if d.status == 429 {
				refused++
				if !sc.inStorm(call) || d.retryAfter != sc.RetryAfter {
					t.Fatalf("call %d: 429 with Retry-After %v outside the storm or not %v", call, d.retryAfter, sc.RetryAfter)
				}
			}
			if sc.inStorm(call) {
				storm++
			}
		}
	}
	if st.Refused() != refused || refused < storm/4 || refused > 3*storm/4 {
		t.Errorf("%d of %d storm attempts refused (counted %d): want about half", refused, storm, st.Refused())
	}
	sc.StormLimit = 1.0 / 12
	for call := range sc.Calls {
		if d := sc.draw(call, Primary, 0, true); d.status == 429 {
			t.Fatalf("call %d: a rate-limited storm still tossed its coin", call)
		}
	}
}
