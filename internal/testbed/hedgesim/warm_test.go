package hedgesim

import (
	"context"
	"sync"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// TestAdaptiveDelayWarm: the rows whose hedge delay is adaptive hedge on
// sketches equally warm — the shares of their calls that start with the
// primary's delay at HedgeMaxDelay, the ceiling of a sketch with too few
// samples in its window, lie within 3 points of each other, and under 5 %
// without an outage (with one, a route that answers 503 gives no TTFT
// samples, in every row alike). When each row's calls ran one after
// another, a row that waited out silences had fewer calls in the 5-minute
// window than one that cut them, and its TTFT columns measured how cold
// its sketch was, not its trigger: the TTFT-only row started 38 % of its
// seed calls and 81 % of its stress calls on the ceiling. Open-loop
// arrivals (Scenario.Interarrival) give every row the same calls in any
// window.
//
// With an outage the rows run without route ejection: ejection keeps the
// failing primary out of calls for a backoff that grows with each
// ejection, and an ejected route collects no TTFTs, so how cold a row's
// sketch gets then follows its failures on the primary — rule 11 at
// work, not the arrivals this test is about. With ejection on, the
// zero-value Config (5 attempts) started 8.0 % of its stress calls cold,
// the other rows 5.9–7.7 %; without it, all lie within 5.9–7.0 %.
func TestAdaptiveDelayWarm(t *testing.T) {
	if raceEnabled {
		t.Skip("2,000 calls of every adaptive row: make test runs it without -race")
	}
	for _, sc := range []Scenario{coarse(reseeded(SeedScenario(2000))), coarse(reseeded(DefaultScenario(2000)))} {
		var mu sync.Mutex
		cold := map[string]int{}
		adaptive := func() ([]Strategy, error) {
			all, err := Strategies()
			if err != nil {
				return nil, err
			}
			var out []Strategy
			for _, s := range all {
				if s.prober == nil || s.Probe.HedgeAfter > 0 || s.Probe.MaxAttempts == 1 {
					continue
				}
				if sc.OutageTo > 0 {
					cfg := *s.Probe
					cfg.EjectFailures = hedgeprobe.NoEjection
					if s, err = probe(s.Name, s.Config, cfg, s.retry); err != nil {
						return nil, err
					}
				}
				run, p, ceiling := s.run, s.prober, s.Probe.HedgeMaxDelay
				s.run = func(ctx context.Context, c *call) Result {
					if p.HedgeDelay(Primary, "model-"+Primary) >= ceiling {
						mu.Lock()
						cold[s.Name]++
						mu.Unlock()
					}
					return run(ctx, c)
				}
				out = append(out, s)
			}
			return out, nil
		}
		rep := simulateWith(t, sc, adaptive)
		if rep == nil {
			return
		}
		least, most := 1.0, 0.0
		for _, r := range rep.Rows {
			share := float64(cold[r.Strategy.Name]) / float64(sc.Calls)
			least, most = min(least, share), max(most, share)
			if sc.OutageTo == 0 && share >= 0.05 {
				t.Errorf("%d chunks, %s: %.1f %% of calls started on a cold sketch (hedge delay = HedgeMaxDelay)", sc.Chunks, r.Strategy.Name, 100*share)
			}
			t.Logf("%d chunks, %s: %.1f %% of calls on a cold sketch", sc.Chunks, r.Strategy.Name, 100*share)
		}
		if most-least > 0.03 {
			t.Errorf("%d chunks: the rows' shares of calls on a cold sketch range from %.1f %% to %.1f %%", sc.Chunks, 100*least, 100*most)
		}
	}
}
