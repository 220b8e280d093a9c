package hedgesim

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var (
	callsFlag = flag.Int("calls", 0, "calls per strategy for TestSimulationReport (0: skip it)")
	seedFlag  = flag.Uint64("seed", 0, "the draws' seed for the reports and the targets (0: the documented one, 20261130)")
)

// reseeded is sc with the -seed flag's seed when one is given: the
// reports and the targets can be rerun on other draws, to tell a result
// of the strategies from one of a single seed's calls.
func reseeded(sc Scenario) Scenario {
	if *seedFlag != 0 {
		sc.Seed = *seedFlag
	}
	return sc
}

// Row names, as Strategies spells them.
const (
	rowOracle    = "oracle (no faults, no hedge)"
	rowNoHedge   = "no hedge"
	rowHedged    = "hedgedhttp (headers)"
	rowTTFTOnly  = "TTFT-only hedge"
	rowWatchdog  = "watchdog + retry"
	rowStreaming = "hedgeprobe streaming"
	rowBuffered  = "hedgeprobe buffered"
)

// simulate runs sc in one synctest bubble and returns the report.
func simulate(t *testing.T, sc Scenario) *Report {
	t.Helper()
	// hedgedhttp keeps timers in a sync.Pool; a timer made in an earlier
	// bubble must not be reused in this one. Two GCs empty a sync.Pool
	// (primary, then victim cache).
	runtime.GC()
	runtime.GC()
	var rep *Report
	wall := time.Now()
	restore := func() {}
	synctest.Test(t, func(t *testing.T) {
		restore = SwapHedgedQueue()
		var err error
		rep, err = Run(t.Context(), sc)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Let hedgedhttp's idle pool workers time out and exit, so the
		// bubble ends with no goroutine left.
		time.Sleep(HedgedIdle)
	})
	restore()
	if rep != nil {
		rep.Wall = time.Since(wall)
		noGarbled(t, rep)
	}
	return rep
}

// noGarbled fails t for every row with a call whose answer was not the
// script's chunks in order (ErrGarbled): each simulation checks the
// answers it times, not only their errors.
func noGarbled(t *testing.T, rep *Report) {
	t.Helper()
	for _, r := range rep.Rows {
		if n := r.Summary.Failures["garbled"]; n > 0 {
			t.Errorf("%s: %d calls ended without error on an answer that is not chunks 0…N−1 in order", r.Strategy.Name, n)
		}
	}
}

func row(t *testing.T, rep *Report, name string) *Row {
	t.Helper()
	r := rep.Row(name)
	if r == nil {
		t.Fatalf("no row %q", name)
	}
	return r
}

// TestSimulation plays 2,000 calls of the stall-heavy scenario through
// every strategy and checks the properties the report rests on. The chunk
// grain is 4× coarser than the report's (50 chunks 80 ms apart: the same
// 4 s of generation, the same stall positions and fault timings).
//
// It runs without the race detector (make test's second step): a bubble
// of this many goroutines once crashed the detector's own runtime
// (SIGSEGV in __tsan::SlotLock, a known failure of the race detector with
// synctest: https://go.dev/issue/78156), which would fail make test for
// no fault of the code. hedgeprobe's own tests and random invariants run
// its concurrency under the detector.
func TestSimulation(t *testing.T) {
	if raceEnabled {
		t.Skip("a bubble this large can crash the race detector (go.dev/issue/78156): make test runs it without -race")
	}
	sc := reseeded(DefaultScenario(2000))
	sc.Chunks, sc.ChunkGap = 50, 80*time.Millisecond
	rep := simulate(t, sc)
	if t.Failed() {
		return
	}
	t.Logf("\n%s", rep.Markdown())

	oracle := row(t, rep, rowOracle).Summary
	noHedge := row(t, rep, rowNoHedge)
	ttftOnly := row(t, rep, rowTTFTOnly).Summary
	// A 30 s watchdog's retry starts answers again after silences that
	// outlast it: the restarted answers are counted, and the text kept
	// starts later than the first chunk its caller saw.
	if w := row(t, rep, "watchdog 30s + retry").Summary; w.Restarted == 0 || w.AnswerTTFT[1] <= w.TTFT[1] {
		t.Errorf("watchdog 30s + retry: %d answers restarted, kept answer's TTFT p99 %v against TTFT p99 %v", w.Restarted, w.AnswerTTFT[1], w.TTFT[1])
	}

	for _, r := range rep.Rows {
		t.Run(r.Strategy.Name, func(t *testing.T) {
			// Every call ended, with a time and at least one attempt.
			if len(r.Results) != sc.Calls {
				t.Fatalf("%d results, want %d", len(r.Results), sc.Calls)
			}
			for i, res := range r.Results {
				if res.Done <= 0 || res.Attempts < 1 {
					t.Fatalf("call %d: %+v: not ended", i, res)
				}
				// The kept answer starts no sooner than the first chunk
				// shown, and later only where a retry restarted it.
				if res.OK && (res.AnswerTTFT < res.TTFT || (res.AnswerTTFT != res.TTFT) != res.Restarted) {
					t.Fatalf("call %d: TTFT %v, kept answer's %v, restarted %v", i, res.TTFT, res.AnswerTTFT, res.Restarted)
				}
			}
			// The oracle is the floor of the median.
			if s := r.Summary; s.Done[0] < oracle.Done[0] {
				t.Errorf("p50 completion %v below the oracle's %v", s.Done[0], oracle.Done[0])
			}
			// The budget bounds hedges: the bucket starts at HedgeBurst and
			// each Stream adds HedgeBudget.
			if p := r.Strategy.Probe; p != nil && p.MaxAttempts > 1 {
				s := r.Summary
				if bound := p.HedgeBudget*float64(s.Streams) + p.HedgeBurst; float64(s.Hedges) > bound {
					t.Errorf("%d hedges over %d streams, above the budget bound %.1f", s.Hedges, s.Streams, bound)
				}
				if s.Throttled == 0 {
					t.Errorf("no hedge throttled: the outage should exhaust the budget")
				}
			}
		})
	}

	if oracle.OK != 1 {
		t.Errorf("oracle ok = %v, want 1", oracle.OK)
	}
	if noHedge.Summary.OK >= 1 {
		t.Errorf("no hedge ok = %v: the outage failed no call", noHedge.Summary.OK)
	}

	// The stall trigger cuts the tail that TTFT-only hedging cannot see,
	// and does it sooner than a watchdog: stall hedges fire, and the
	// buffered tail (every stall before commit) sits below watchdog +
	// retry's, which waits out its 120 s.
	wd := row(t, rep, rowWatchdog).Summary
	if bu := row(t, rep, rowBuffered).Summary; bu.Done[1] >= wd.Done[1] {
		t.Errorf("buffered p99 %v not below watchdog + retry %v", bu.Done[1], wd.Done[1])
	}
	if n := ttftOnly.ByTrigger[byStall]; n != 0 {
		t.Errorf("TTFT-only hedge launched %d stall hedges", n)
	}
	for _, name := range []string{rowStreaming, rowBuffered} {
		s := row(t, rep, name).Summary
		// Stalls before commit: a fifth of attempts, most within the first
		// HoldChunks chunks; a tenth of calls is a loose floor.
		if s.ByTrigger[byStall] < sc.Calls/10 {
			t.Errorf("%s: %d stall hedges over %d calls", name, s.ByTrigger[byStall], sc.Calls)
		}
		if s.Done[1] >= noHedge.Summary.Done[1] || s.Done[1] >= ttftOnly.Done[1] {
			t.Errorf("%s p99 completion %v, not below no hedge %v and TTFT-only %v",
				name, s.Done[1], noHedge.Summary.Done[1], ttftOnly.Done[1])
		}
		if s.OK <= noHedge.Summary.OK {
			t.Errorf("%s ok %v not above no hedge %v", name, s.OK, noHedge.Summary.OK)
		}
	}

	// TTFT-only hedging: its budget bound per call, as the brief states it.
	if p := row(t, rep, rowTTFTOnly).Strategy.Probe; ttftOnly.ExtraAttempts > p.HedgeBudget+p.HedgeBurst/float64(sc.Calls) {
		t.Errorf("TTFT-only extra attempts/call %.3f above HedgeBudget + burst/calls", ttftOnly.ExtraAttempts)
	}

	// The watchdog cuts the worst silences, but not below its timeout. At
	// p99.9: no hedge's p99 is a silence of about the watchdog's 120 s on
	// some seeds (-seed=3: 126.0 s, watchdog + retry 126.6 s).
	if wd.Done[2] >= noHedge.Summary.Done[2] || wd.Done[1] < watchdogTimeout {
		t.Errorf("watchdog + retry p99 %v, p99.9 %v: want p99 ≥ %v, p99.9 below no hedge's %v", wd.Done[1], wd.Done[2], watchdogTimeout, noHedge.Summary.Done[2])
	}

	// Buffered delivers nothing before the end: its TTFT is its completion.
	if st, bu := row(t, rep, rowStreaming).Summary, row(t, rep, rowBuffered).Summary; bu.TTFT[0] <= st.TTFT[0] {
		t.Errorf("buffered TTFT p50 %v not above streaming %v", bu.TTFT[0], st.TTFT[0])
	}

	// Headers come at 200 ms, before any hedge delay: hedgedhttp never
	// fires — each of its requests makes one round trip — and every call
	// is the no-hedge call, to the microsecond, but those that failed on a
	// 429 or a 5xx, which its one retry makes again.
	hr := row(t, rep, rowHedged)
	if st := hr.Strategy.Hedged.Stats(); st.ActualRoundTrips() != st.RequestedRoundTrips() || st.HedgedRequestWins() != 0 {
		t.Errorf("hedgedhttp stats: %d requested, %d actual, %d hedged wins", st.RequestedRoundTrips(), st.ActualRoundTrips(), st.HedgedRequestWins())
	}
	retried := 0
	for i, res := range hr.Results {
		nh := noHedge.Results[i]
		if res.Attempts != res.Streams {
			t.Fatalf("call %d: hedgedhttp %+v: a hedge fired", i, res)
		}
		if se, ok := errors.AsType[*StatusError](nh.Err); ok && se.Transient() {
			retried++
			if res.Streams != 2 {
				t.Fatalf("call %d: hedgedhttp %+v, no hedge %+v: no retry", i, res, nh)
			}
			continue
		}
		if res.Streams != 1 || res.Done != nh.Done || res.OK != nh.OK || res.TTFT != nh.TTFT {
			t.Fatalf("call %d: hedgedhttp %+v, no hedge %+v", i, res, nh)
		}
	}
	if retried == 0 {
		t.Error("no hedgedhttp call was retried: the outage and the storm no longer reach it")
	}
}

// TestSimulationReport prints the full report as markdown:
//
//	go test ./internal/testbed/hedgesim -run TestSimulationReport -v -calls=10000
func TestSimulationReport(t *testing.T) {
	if *callsFlag <= 0 {
		t.Skip("set -calls=N to print the report")
	}
	for _, sc := range []struct {
		name string
		sc   Scenario
	}{{"seed", SeedScenario(*callsFlag)}, {"stress", DefaultScenario(*callsFlag)}} {
		rep := simulate(t, reseeded(sc.sc))
		if t.Failed() {
			return
		}
		fmt.Printf("## Scenario %s\n\n%s\n", sc.name, rep.Markdown())
	}
}

// sensitivityRows are the rows of the sensitivity report: the floor, no
// hedge, a watchdog, and hedgeprobe's rows that rescue a silence.
var sensitivityRows = []string{rowOracle, rowNoHedge, "watchdog 30s + retry", rowBuffered,
	"hedgeprobe streaming + resume", "hedgeprobe buffered + resume", "zero-value Config", "zero-value Config, Buffered"}

// sensitivityVariants are the seed scenario and the assumptions of it the
// results lean on, each changed alone: "no continuation" has routes that
// cannot continue a partial answer; "half call-wide" makes half the
// silences the call's own (every attempt of 5 % of calls falls silent,
// and 5 % of attempts on their own: about the same share of silent
// streams); "late silences" puts them after chunk 20–80 of 100, not 2–15;
// "secondary flapping" has the secondary route down (503, no Retry-After)
// for 3 calls' time (18 s) and up for the next 3, the whole run, so that
// a continuation sent there fails as often as route health lets it.
func sensitivityVariants(calls int) []struct {
	name string
	sc   Scenario
} {
	seed := reseeded(SeedScenario(calls))
	noCont := seed
	noCont.NoContinuation = true
	callHalf := seed
	callHalf.StallShare, callHalf.CallSilenceShare = 0.05, 0.05
	late := seed
	late.StallAfterMin, late.StallAfterMax = 20, 80
	flap := seed
	flap.OutageRoute, flap.OutageFrom, flap.OutageTo, flap.FlapCalls = Secondary, 0, 1, 3
	return []struct {
		name string
		sc   Scenario
	}{
		{"seed", seed},
		{"no continuation", noCont},
		{"half call-wide", callHalf},
		{"late silences", late},
		{"secondary flapping", flap},
	}
}

// TestSensitivityReport prints the seed scenario's rescuing rows under
// each changed assumption (sensitivityVariants):
//
//	go test ./internal/testbed/hedgesim -run TestSensitivityReport -v -calls=10000
func TestSensitivityReport(t *testing.T) {
	if *callsFlag <= 0 {
		t.Skip("set -calls=N to print the report")
	}
	strategies := func() ([]Strategy, error) {
		all, err := Strategies()
		if err != nil {
			return nil, err
		}
		var out []Strategy
		for _, name := range sensitivityRows {
			i := slices.IndexFunc(all, func(s Strategy) bool { return s.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("no strategy %q", name)
			}
			out = append(out, all[i])
		}
		return out, nil
	}
	fmt.Printf("## Sensitivity (%d calls per row, seed scenario)\n\n", *callsFlag)
	fmt.Println("| variant | strategy | ok | completion p99 / p99.9, a failed call never done | extra attempts/call | wasted chunks/call | answers restarted |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	for _, v := range sensitivityVariants(*callsFlag) {
		rep := simulateWith(t, v.sc, strategies)
		if t.Failed() {
			return
		}
		for _, row := range rep.Rows {
			s := row.Summary
			fmt.Printf("| %s | %s | %.2f %% | %s / %s | %.3f | %.2f | %d |\n", v.name, row.Strategy.Name, 100*s.OK,
				sec(s.DoneNever[1]), sec(s.DoneNever[2]), s.ExtraAttempts, float64(s.Wasted)/float64(max(s.Calls, 1)), s.Restarted)
		}
	}
}

// TestScriptTiming checks one scripted stream's exact virtual timing.
func TestScriptTiming(t *testing.T) {
	sc := DefaultScenario(10)
	sc.ChunkJitter = 0
	synctest.Test(t, func(t *testing.T) {
		for i := range sc.Calls {
			d := sc.draw(i, Primary, 0, true)
			res := direct(t.Context(), &call{sc: &sc, index: i, faults: true})
			// The silence is the gap before chunk stallAt.
			want := d.ttft + time.Duration(sc.Chunks-1)*sc.ChunkGap
			if d.stallAt >= 0 {
				want += d.stall - sc.ChunkGap
			}
			if d.status != 200 {
				want = d.failAfter
				if want < sc.FailAfter/2 || want > sc.FailAfter*3/2 {
					t.Errorf("call %d: error after %v, want within %v ± 50 %%", i, want, sc.FailAfter)
				}
			}
			if res.Done != want || (d.status == 200) != res.OK {
				t.Errorf("call %d: done %v ok %v, want %v (draw %+v)", i, res.Done, res.OK, want, d)
			}
			if d.status == 200 && res.TTFT != d.ttft {
				t.Errorf("call %d: ttft %v, want %v", i, res.TTFT, d.ttft)
			}
		}
	})
}

// TestDrawRepeatable checks that draws depend on (seed, call, route,
// attempt) only, and that the oracle's draw is the faulty one minus faults.
func TestDrawRepeatable(t *testing.T) {
	sc := DefaultScenario(1000)
	stalls := 0
	for i := range sc.Calls {
		a, b := sc.draw(i, Primary, 0, true), sc.draw(i, Primary, 0, true)
		if a != b {
			t.Fatalf("call %d: %+v then %+v", i, a, b)
		}
		if o := sc.draw(i, Primary, 0, false); o.ttft != a.ttft || o.status != 200 || o.stallAt != -1 {
			t.Fatalf("call %d: oracle %+v, faulty %+v", i, o, a)
		}
		if s := sc.draw(i, Secondary, 0, true); s.ttft == a.ttft {
			t.Fatalf("call %d: routes share a draw", i)
		}
		if a.stallAt >= 0 {
			stalls++
		}
	}
	if share := float64(stalls) / float64(sc.Calls); share < 0.15 || share > 0.25 {
		t.Errorf("stall share %.3f, want about %.2f", share, sc.StallShare)
	}
}

// TestHedgedHTTPLateHeaders is the control of the hedgedhttp assertion:
// when headers come with the first token (after the 2 s delay for nearly
// every call), the same hedgedhttp setup does hedge. Its silence in
// TestSimulation is the header timing, not a broken integration.
func TestHedgedHTTPLateHeaders(t *testing.T) {
	sc := DefaultScenario(300)
	sc.Chunks, sc.ChunkGap = 50, 80*time.Millisecond
	sc.HeaderDelay = 3 * time.Second
	rep := simulate(t, sc)
	if t.Failed() {
		return
	}
	hr := row(t, rep, rowHedged)
	if hr.Summary.ExtraAttempts < 0.5 {
		t.Errorf("hedgedhttp extra attempts/call = %.3f with late headers, want most calls hedged", hr.Summary.ExtraAttempts)
	}
	if st := hr.Strategy.Hedged.Stats(); st.ActualRoundTrips() <= st.RequestedRoundTrips() {
		t.Errorf("hedgedhttp stats: %d requested, %d actual", st.RequestedRoundTrips(), st.ActualRoundTrips())
	}
}

// healthVariants are the stress scenario and its two outage variants of
// the route-health report.
func healthVariants(calls int) []struct {
	name string
	sc   Scenario
} {
	stress := reseeded(DefaultScenario(calls))
	ra := stress
	ra.OutageRetryAfter = 30 * time.Second
	flap := stress
	flap.FlapCalls = 2
	return []struct {
		name string
		sc   Scenario
	}{{"stress", stress}, {"stress, outage with Retry-After 30 s", ra}, {"stress, primary flapping (down 12 s, up 12 s)", flap}}
}

// simulateWith is simulate with the given strategies.
func simulateWith(t *testing.T, sc Scenario, strategies func() ([]Strategy, error)) *Report {
	t.Helper()
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		st, err := strategies()
		if err != nil {
			t.Fatal(err)
		}
		if rep, err = RunWith(t.Context(), sc, st); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
	if rep != nil {
		noGarbled(t, rep)
	}
	return rep
}

// TestRouteHealthReport prints the route-health rows (before/after
// ejection) for the stress scenario and its outage variants:
//
//	go test ./internal/testbed/hedgesim -run TestRouteHealthReport -v -calls=10000
func TestRouteHealthReport(t *testing.T) {
	if *callsFlag <= 0 {
		t.Skip("set -calls=N to print the report")
	}
	fmt.Println("| scenario | strategy | throttled (all) | throttled in the outage | extra attempts/call | failed calls | p99 | p99.9 |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, v := range healthVariants(*callsFlag) {
		rep := simulateWith(t, v.sc, HealthStrategies)
		for _, row := range rep.Rows {
			s := row.Summary
			failed := 0
			for _, n := range s.Failures {
				failed += n
			}
			inOutage := 0
			from, to := int(v.sc.OutageFrom*float64(v.sc.Calls)), int(v.sc.OutageTo*float64(v.sc.Calls))
			for _, r := range row.Results[from:to] {
				inOutage += r.Throttled
			}
			fmt.Printf("| %s | %s | %d | %d | %.3f | %d | %s | %s |\n", v.name, row.Strategy.Name, s.Throttled, inOutage,
				s.ExtraAttempts, failed, sec(s.Done[1]), sec(s.Done[2]))
		}
	}
}

// coarse is sc at a 4× coarser chunk grain (the same generation time, the
// same stall positions and fault timings), so race-enabled runs stay
// short on two shared cores.
func coarse(sc Scenario) Scenario {
	sc.Chunks, sc.ChunkGap = sc.Chunks/4, 4*sc.ChunkGap
	sc.StallAfterMin, sc.StallAfterMax = max(sc.StallAfterMin/4, 1), max(sc.StallAfterMax/4, 2)
	return sc
}

// targetSeeds are the seeds TestResumeTargets and TestRouteHealthEffect
// check: the reports' own and the next two after 0, so that a target does
// not hold on one seed's calls alone (-seed=N checks N instead).
func targetSeeds() []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	return []uint64{DefaultScenario(0).Seed, 1, 2}
}

// The targets of resume on the seed's workload (docs/design.md §6), at
// coarse grain (25 chunks, silences after chunk 1–3), on 2,000 calls of
// each seed of targetSeeds: Streaming + resume within 1.5× the oracle's
// p99 at no more than 0.25 extra attempts per call; the zero-value Config
// within 15 % of the best hedgeprobe row (under Buffered, of the best
// tuned Buffered row: 11.5 s, where it was 125.6 s before StallAfter's
// default there), below the rows with 2 attempts
// or a budget of 0.1 (seed scenario) and, at p99, never worse than no
// hedge, on the seed and the stress scenario. At p99.9 — on 2,000 calls
// the third-slowest call — below no hedge's in both, and in the seed
// scenario within 3× the oracle's and below the same defaults with 3
// attempts: on 16 seeds 1.14–2.14× the oracle, where 3 attempts gave
// 60–161 s, and at most 0.09× (seed) and 0.61× (stress) no hedge's, where
// 3 attempts were behind it on 1 seed (docs/performance.md, "Across
// seeds").
func TestResumeTargets(t *testing.T) {
	if raceEnabled {
		t.Skip("virtual-time targets of 2,000 calls: make test runs them without -race")
	}
	for _, s := range targetSeeds() {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			sc := SeedScenario(2000)
			sc.Seed = s
			seed := simulate(t, coarse(sc))
			oracle := row(t, seed, "oracle (no faults, no hedge)").Summary.Done[1]
			sr := row(t, seed, "hedgeprobe streaming + resume").Summary
			if r := float64(sr.Done[1]) / float64(oracle); r > 1.5 || sr.ExtraAttempts > 0.25 {
				t.Errorf("streaming + resume: p99 %v = %.2f× the oracle's %v, %.3f extra attempts/call", sr.Done[1], r, oracle, sr.ExtraAttempts)
			}
			best := time.Duration(1<<63 - 1)
			for _, r := range seed.Rows {
				if r.Strategy.Probe != nil && r.Summary.Done[1] < best && !strings.HasPrefix(r.Strategy.Name, "zero-value Config") {
					best = r.Summary.Done[1]
				}
			}
			zero := row(t, seed, "zero-value Config").Summary
			if float64(zero.Done[1]) > 1.15*float64(best) {
				t.Errorf("zero-value Config p99 %v, more than 15 %% above the best tuned row's %v", zero.Done[1], best)
			}
			// The defaults under Buffered, against the tuned Buffered rows:
			// StallAfter's default there is what rescues a stall.
			bestBuffered := time.Duration(1<<63 - 1)
			for _, r := range seed.Rows {
				if strings.HasPrefix(r.Strategy.Name, "hedgeprobe buffered") {
					bestBuffered = min(bestBuffered, r.Summary.Done[1])
				}
			}
			if zb := row(t, seed, "zero-value Config, Buffered").Summary; float64(zb.Done[1]) > 1.15*float64(bestBuffered) {
				t.Errorf("zero-value Config, Buffered p99 %v, more than 15 %% above the best tuned Buffered row's %v", zb.Done[1], bestBuffered)
			}
			// The defaults' attempt cap and budget (5 and 0.3) against the
			// 2 and 0.1 they were first sized at, together and each alone.
			for _, name := range []string{"zero-value Config, MaxAttempts 2, budget 0.1", "zero-value Config, MaxAttempts 2", "zero-value Config, budget 0.1"} {
				if lower := row(t, seed, name).Summary.Done[1]; zero.Done[1] >= lower {
					t.Errorf("zero-value Config p99 %v, not below %s's %v", zero.Done[1], name, lower)
				} else {
					t.Logf("%s: p99 %v", name, lower)
				}
			}
			oracle999 := row(t, seed, "oracle (no faults, no hedge)").Summary.Done[2]
			three := row(t, seed, "zero-value Config, MaxAttempts 3").Summary
			t.Logf("seed: p99.9 oracle %v, zero-value %v (%.2f×), MaxAttempts 3 %v", oracle999, zero.Done[2], float64(zero.Done[2])/float64(oracle999), three.Done[2])
			// The default attempt cap, 5, against the previous 3: the calls
			// whose rescues stall too no longer wait out a silence.
			if float64(zero.Done[2]) > 3*float64(oracle999) || zero.Done[2] >= three.Done[2] {
				t.Errorf("zero-value Config p99.9 %v: more than 3× the oracle's %v, or not below MaxAttempts 3's %v", zero.Done[2], oracle999, three.Done[2])
			}
			stress := DefaultScenario(2000)
			stress.Seed = s
			for i, rep := range []*Report{seed, simulate(t, coarse(stress))} {
				n := row(t, rep, "no hedge").Summary
				for _, name := range []string{"zero-value Config", "zero-value Config, Buffered"} {
					z := row(t, rep, name).Summary
					t.Logf("%s: %s p99/p99.9 %v/%v, no hedge %v/%v", [...]string{"seed", "stress"}[i], name, z.Done[1], z.Done[2], n.Done[1], n.Done[2])
					if z.Done[1] > n.Done[1] {
						t.Errorf("%s p99 %v worse than no hedge's %v", name, z.Done[1], n.Done[1])
					}
					if z.Done[2] >= n.Done[2] {
						t.Errorf("%s p99.9 %v not below no hedge's %v", name, z.Done[2], n.Done[2])
					}
				}
			}
			// Regression: a resumed attempt ends canceled, yet the chunks it
			// delivered before the resume are the answer's start; they were
			// counted as wasted (~0.2 per call here, a resume's prefix each).
			if w := float64(sr.Wasted) / float64(sr.Calls); w > 0.05 {
				t.Errorf("streaming + resume wastes %.3f chunks/call: a resumed attempt's delivered chunks counted as waste?", w)
			}
			t.Logf("seed: oracle p99 %v, streaming + resume %v (%.2f×, %.3f extra/call, %.3f wasted/call), zero-value %v, best tuned %v",
				oracle, sr.Done[1], float64(sr.Done[1])/float64(oracle), sr.ExtraAttempts, float64(sr.Wasted)/float64(sr.Calls), zero.Done[1], best)
		})
	}
}

// Route health (docs/design.md §2 rule 11) in the stress scenario, on
// 2,000 calls of each seed of targetSeeds: with ejection, the tuned
// prober's hedges throttled during the primary's outage fall by more than a
// quarter on every seed, and by more than half over several seeds
// together, and its p99 does not rise by more than 10 %; with a flapping
// primary, or a Retry-After on the outage, the p99 likewise. On 16 seeds
// the fall ranged from 28 % to 79 %, median 57 %, 56 % over the 16
// together (docs/performance.md, "Across seeds"), so halving is asserted
// on the sum, not on one seed. The p99 with ejection ranged from 8 % below to 6.8 % above
// the p99 without, over the 16 seeds and three outages — on 2,000 calls
// the p99 is the 20th-slowest call, and ejection changes which route, and
// so which draw, a call starts on (both ranges measured before a refused
// hedge became due again when its pushback ends, and before the p95
// delay's correction for few samples); at 10,000 calls, 1.4 % below to
// 1.2 % above.
func TestRouteHealthEffect(t *testing.T) {
	if raceEnabled {
		t.Skip("virtual-time targets of 2,000 calls: make test runs them without -race")
	}
	throttledIn := func(r *Row, sc Scenario) (n int) {
		for _, res := range r.Results[int(sc.OutageFrom*float64(sc.Calls)):int(sc.OutageTo*float64(sc.Calls))] {
			n += res.Throttled
		}
		return n
	}
	var withTotal, withoutTotal int
	for _, s := range targetSeeds() {
		for _, v := range healthVariants(2000) {
			v.sc.Seed = s
			sc := coarse(v.sc)
			rep := simulateWith(t, sc, HealthStrategies)
			off, on := row(t, rep, "streaming + resume, no ejection"), row(t, rep, "streaming + resume, ejection")
			a, b := throttledIn(off, sc), throttledIn(on, sc)
			t.Logf("seed %d, %s: throttled in the outage %d with ejection, %d without; p99 %v with, %v without", s, v.name,
				b, a, on.Summary.Done[1], off.Summary.Done[1])
			if v.sc.FlapCalls == 0 && v.sc.OutageRetryAfter == 0 {
				if 4*b >= 3*a {
					t.Errorf("seed %d, %s: throttled in the outage %d with ejection, %d without: not cut by a quarter", s, v.name, b, a)
				}
				withTotal, withoutTotal = withTotal+b, withoutTotal+a
			}
			if float64(on.Summary.Done[1]) > 1.10*float64(off.Summary.Done[1]) {
				t.Errorf("seed %d, %s: p99 %v with ejection, %v without", s, v.name, on.Summary.Done[1], off.Summary.Done[1])
			}
		}
	}
	if len(targetSeeds()) > 1 && 2*withTotal >= withoutTotal {
		t.Errorf("throttled in the outage, all seeds: %d with ejection, %d without: not halved", withTotal, withoutTotal)
	}
}
