package hedgesim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
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

// stormVariants are the stress scenario with its 429 storm as a coin (as
// designed) and as rate limits of two strengths: one attempt per route
// every 12 s refuses about half the first attempts of calls arriving 6 s
// apart, as the coin does, and one every 24 s about three in four.
func stormVariants(calls int) []struct {
	name string
	sc   Scenario
} {
	stress := reseeded(DefaultScenario(calls))
	limit12, limit24 := stress, stress
	limit12.StormLimit, limit24.StormLimit = 1.0/12, 1.0/24
	return []struct {
		name string
		sc   Scenario
	}{{"coin: 50 % of attempts", stress}, {"rate limit: 1 attempt / 12 s / route", limit12}, {"rate limit: 1 attempt / 24 s / route", limit24}}
}

// pushbackWaitStrategies are the zero-value Config and the tuned Streaming
// + resume prober (HealthStrategies'), each without and with a
// PushbackWait of 20 s.
func pushbackWaitStrategies() ([]Strategy, error) {
	waiting := tunedResume()
	waiting.PushbackWait = 20 * time.Second
	return probes([]namedConfig{
		{"zero-value Config", hedgeprobe.Config{}},
		{"zero-value Config, PushbackWait 20s", hedgeprobe.Config{PushbackWait: 20 * time.Second}},
		{"streaming + resume", tunedResume()},
		{"streaming + resume, PushbackWait 20s", waiting},
	})
}

// TestStormReport prints every strategy, then the route-health rows
// (with and without ejection), then the rows with and without
// PushbackWait, under the stress scenario's 429 storm as a coin and as a
// rate limit (stormVariants), over the storm's calls:
//
//	go test ./internal/testbed/hedgesim -run TestStormReport -v -calls=10000
func TestStormReport(t *testing.T) {
	if *callsFlag <= 0 {
		t.Skip("set -calls=N to print the report")
	}
	var all, health, wait strings.Builder
	for _, v := range stormVariants(*callsFlag) {
		stormRows(&all, v.name, simulate(t, v.sc))
		if t.Failed() {
			return
		}
		stormRows(&health, v.name, simulateWith(t, v.sc, HealthStrategies))
		if t.Failed() {
			return
		}
		stormRows(&wait, v.name, simulateWith(t, v.sc, pushbackWaitStrategies))
		if t.Failed() {
			return
		}
	}
	const head = "| storm | strategy | storm calls failed (on a 429) | 429s answered | attempts per storm call | resumes / error relaunches | throttled: budget / pushback | completion p50 / p99, a failed call never done |\n|---|---|---:|---:|---:|---:|---:|---:|\n"
	fmt.Printf("## The 429 storm as a rate limit (%d calls per row, stress scenario; figures over the storm's calls)\n\n%s%s\n", *callsFlag, head, all.String())
	fmt.Printf("### Route health under it\n\n%s%s\n", head, health.String())
	fmt.Printf("### Waiting for Retry-After (PushbackWait)\n\n%s%s", head, wait.String())
}

// stormRows writes one line per row of rep, over the storm's calls.
func stormRows(b *strings.Builder, variant string, rep *Report) {
	if rep == nil {
		return
	}
	sc := rep.Scenario
	from, to := int(sc.StormFrom*float64(sc.Calls)), int(sc.StormTo*float64(sc.Calls))
	for _, row := range rep.Rows {
		s := summarize(row.Results[from:to])
		attempts, failed := 0, 0
		for _, r := range row.Results[from:to] {
			attempts += r.Attempts
		}
		for _, n := range s.Failures {
			failed += n
		}
		fmt.Fprintf(b, "| %s | %s | %d (%d) | %d | %.2f | %d / %d | %d / %d | %s / %s |\n", variant, row.Strategy.Name,
			failed, s.Failures["429"], row.Refused429,
			float64(attempts)/float64(max(s.Calls, 1)), s.ByTrigger[byResume], s.ByTrigger[byError],
			s.Throttled-s.ThrottledPushback, s.ThrottledPushback, sec(s.DoneNever[0]), sec(s.DoneNever[1]))
	}
}
