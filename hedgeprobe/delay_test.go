package hedgeprobe

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// samples returns the number of samples of route × model in the window
// and the largest, in seconds.
func (b *delayBook) samples(route, model string) (n, maxSeconds float64) {
	e := b.entry(route, model, false, time.Time{})
	if e == nil {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	m := newSketch()
	for _, s := range e.slots {
		_ = m.MergeWith(s)
	}
	if m.IsEmpty() {
		return 0, 0
	}
	mx, _ := m.GetMaxValue()
	return m.GetCount(), mx
}

func near(got, want time.Duration, rel float64) bool {
	return math.Abs(float64(got-want)) <= rel*float64(want)
}

// The adaptive delay is the quantile of the window, clamped, with
// warm-up, and forgets samples older than the window.
func TestAdaptiveDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeQuantile: 0.9, HedgeMinDelay: 50 * time.Millisecond, HedgeMaxDelay: 5 * time.Second, HedgeWarmup: 10, HedgeWindow: 4 * time.Minute})
		d := p.delays
		if got := p.HedgeDelay("r", "m"); got != 5*time.Second {
			t.Fatalf("no samples: %v", got)
		}
		for i := 1; i <= 9; i++ {
			d.observe("r", "m", time.Duration(i)*100*time.Millisecond, time.Now())
		}
		if got := p.HedgeDelay("r", "m"); got != 5*time.Second {
			t.Fatalf("warm-up: %v", got)
		}
		d.observe("r", "m", time.Second, time.Now())
		// 10 samples 0.1 … 1.0 s: for a 0.9 delay, the sample of rank
		// round(0.9·11 − 1) = 9, 1.0 s ±1 %, which the next exceeds with
		// probability 1/11 (the sketch's own p90, rank 8.1, 0.9 s: 2/11).
		if got := p.HedgeDelay("r", "m"); !near(got, time.Second, 0.01) {
			t.Fatalf("p90 = %v", got)
		}
		if got := p.HedgeDelay("r", "other-model"); got != 5*time.Second {
			t.Fatalf("per route × model: %v", got)
		}
		for range 100 {
			d.observe("fast", "m", time.Millisecond, time.Now())
			d.observe("slow", "m", time.Minute, time.Now())
		}
		if lo, hi := p.HedgeDelay("fast", "m"), p.HedgeDelay("slow", "m"); lo != 50*time.Millisecond || hi != 5*time.Second {
			t.Fatalf("clamp: %v %v", lo, hi)
		}
		// Slots of a minute: after 3 minutes the samples are still in the
		// window, after 4 they are gone and warm-up applies again.
		time.Sleep(3 * time.Minute)
		if got := p.HedgeDelay("r", "m"); !near(got, time.Second, 0.01) {
			t.Fatalf("after 3m: %v", got)
		}
		time.Sleep(time.Minute)
		if got := p.HedgeDelay("r", "m"); got != 5*time.Second {
			t.Fatalf("after 4m: %v", got)
		}
		if p.HedgeDelay("r", "m") != mustNew(t, Config{HedgeAfter: 7 * time.Second}).HedgeDelay("r", "m")-2*time.Second {
			t.Fatal("HedgeAfter wins over adaptive")
		}
	})
}

// The learned delay drives the TTFT trigger of later calls.
func TestAdaptiveDelayInCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := newUpstream("a", texts("a", 1, 200*time.Millisecond, 0))
		p := mustNew(t, Config{HedgeMaxDelay: 3 * time.Second, HedgeWarmup: 20})
		for range 20 {
			drain(p.Stream(t.Context(), fast.route()), time.Now())
		}
		want := p.HedgeDelay("a", "model-a")
		if !near(want, 200*time.Millisecond, 0.01) {
			t.Fatalf("learned %v", want)
		}
		slow := newUpstream("a", []step{hang()}, texts("a", 1, 200*time.Millisecond, 0))
		s := p.Stream(t.Context(), slow.route())
		drain(s, time.Now())
		wantDur(t, "hedge launch", s.Stats().Attempts[1].LaunchOffset, want)
	})
}

// Censoring: an attempt cancelled before its first chunk because it lost,
// after at least the hedge delay, counts as max(elapsed, delay); one cut
// by the caller or by an error is not recorded.
func TestAdaptiveDelayCensoring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeAfter: time.Second, HedgeMaxDelay: 4 * time.Second, HedgeBurst: 10})
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", texts("b", 1, 100*time.Millisecond, 0))
		drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
		n, mx := p.delays.samples("a", "model-a")
		if n != 1 || !near(time.Duration(mx*float64(time.Second)), 1100*time.Millisecond, 0.01) {
			t.Fatalf("loser recorded n=%v max=%vs, want 1 sample of 1.1s", n, mx)
		}
		if n, mx := p.delays.samples("b", "model-b"); n != 1 || !near(time.Duration(mx*float64(time.Second)), 100*time.Millisecond, 0.01) {
			t.Fatalf("winner recorded n=%v max=%vs", n, mx)
		}
		// The caller cancels: nothing recorded.
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		drain(p.Stream(ctx, a.route()), time.Now())
		// An error: nothing recorded.
		e := newUpstream("a", []step{fail(time.Millisecond, &statusErr{code: 400})})
		drain(p.Stream(t.Context(), e.route()), time.Now())
		if n, _ := p.delays.samples("a", "model-a"); n != 1 {
			t.Fatalf("caller cancel or error recorded: n=%v", n)
		}
		// A TTFT timeout censors every attempt without content.
		q := mustNew(t, Config{HedgeAfter: time.Second, HedgeMaxDelay: 4 * time.Second, TTFTTimeout: 6 * time.Second, MaxAttempts: 2})
		drain(q.Stream(t.Context(), a.route()), time.Now())
		n, mx = q.delays.samples("a", "model-a")
		if n != 2 || !near(time.Duration(mx*float64(time.Second)), 6*time.Second, 0.01) {
			t.Fatalf("ttft timeout recorded n=%v max=%vs", n, mx)
		}
	})
}

// The zero Config's adaptive delay is the p95 of the window (design rule
// 2), as the sample the next exceeds with probability 1/20: of 100 samples
// 10 ms … 1 s, the one of rank round(0.95·101 − 1) = 95, 960 ms ±1 %
// (exceeded with probability 5/101), where p90 would say 910 ms and p99
// 1 s.
func TestAdaptiveDelayDefaultIsP95(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{})
		for i := 1; i <= 100; i++ {
			p.delays.observe("r", "m", time.Duration(i)*10*time.Millisecond, time.Now())
		}
		if got := p.HedgeDelay("r", "m"); !near(got, 960*time.Millisecond, 0.01) {
			t.Fatalf("default adaptive delay %v, want the p95, 960ms", got)
		}
	})
}

// The delay is a p95 of the window's samples, not the route's, and is
// taken so that the next TTFT exceeds it about 5 % of the time on few
// samples too: the sample of rank k = round(0.95·(n+1) − 1), exceeded
// with probability (n−k)/(n+1) — 4.8 % at n = 20, 5.9 % at n = 50, 5.0 %
// at n = 1,000 (hedgeprobe/README.md, "Adaptive delay"). The sketch's own
// p95, rank ⌊0.95·(n−1)⌋, gave 9.5 % and 7.8 % at 20 and 50 samples.
// TTFTs lognormal as in the hedge simulation (median 1.6 s, sigma 0.5).
func TestAdaptiveDelayFewSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(20261205, 1))
		ttft := func() time.Duration {
			return time.Duration(1.6 * math.Exp(0.5*r.NormFloat64()) * float64(time.Second))
		}
		for _, c := range []struct {
			n, trials int
			lo, hi    float64 // ±4 standard deviations of the trials' share
		}{
			{n: 20, trials: 20000, lo: 0.042, hi: 0.054},
			{n: 50, trials: 20000, lo: 0.052, hi: 0.066},
			{n: 1000, trials: 4000, lo: 0.036, hi: 0.064},
		} {
			exceeded := 0
			for range c.trials {
				p := mustNew(t, Config{})
				for range c.n {
					p.delays.observe("r", "m", ttft(), time.Now())
				}
				if ttft() > p.HedgeDelay("r", "m") {
					exceeded++
				}
			}
			share := float64(exceeded) / float64(c.trials)
			t.Logf("%d samples: exceeded in %.1f %% of %d trials", c.n, 100*share, c.trials)
			if share < c.lo || share > c.hi {
				t.Errorf("%d samples: the next TTFT exceeded the delay in %.1f %% of %d trials, want %.1f–%.1f %%",
					c.n, 100*share, c.trials, 100*c.lo, 100*c.hi)
			}
		}
	})
}

// sampleQuantile's answer, asked of a sketch of n samples, lands on the
// rank wanted: round(q·(n+1) − 1), within [0, n−1].
func TestSampleQuantileRank(t *testing.T) {
	for _, c := range []struct {
		q    float64
		n    int
		rank int
	}{
		{0.95, 20, 19}, {0.95, 19, 18}, {0.95, 50, 47}, {0.95, 100, 95}, {0.95, 1000, 950},
		{0.9, 10, 9}, {0.5, 3, 1}, {0.5, 4, 2}, {0.05, 5, 0}, {0.99, 2, 1},
	} {
		s := newSketch()
		for i := range c.n {
			_ = s.Add(float64(i + 1))
		}
		v, err := s.GetValueAtQuantile(sampleQuantile(c.q, float64(c.n)))
		if err != nil || math.Abs(v-float64(c.rank+1)) > 0.01*float64(c.rank+1) {
			t.Errorf("q %v of %d samples 1…%d: %v (%v), want rank %d, %d", c.q, c.n, c.n, v, err, c.rank, c.rank+1)
		}
	}
	if got := sampleQuantile(0.95, 1); got != 0.95 {
		t.Errorf("one sample: %v", got)
	}
}

// Regression: the book kept an entry (five sketches, 6–23 KiB) for every
// route × model it ever saw, so a caller naming a model per tenant or per
// request grew its Prober without bound. Entries whose window fell empty
// are swept out, at most once a window, when a new route × model comes;
// what is in the window stays, and its delay with it.
func TestAdaptiveDelayForgetsOldRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeQuantile: 0.5, HedgeMinDelay: 10 * time.Millisecond, HedgeMaxDelay: 5 * time.Second, HedgeWarmup: 1, HedgeWindow: 4 * time.Minute})
		d := p.delays
		size := func() int {
			d.mu.RLock()
			defer d.mu.RUnlock()
			return len(d.m)
		}
		for i := range 1000 {
			d.observe("tenant-"+strconv.Itoa(i), "m", time.Second, time.Now())
		}
		if n := size(); n != 1000 {
			t.Fatalf("%d entries, want 1000", n)
		}
		// Within the window: a new key sweeps nothing.
		time.Sleep(3 * time.Minute)
		d.observe("kept", "m", 200*time.Millisecond, time.Now())
		if n := size(); n != 1001 {
			t.Fatalf("within the window: %d entries, want 1001", n)
		}
		// A window after the first sweep the tenants' samples are gone:
		// the next new key sweeps them out; "kept" has a sample in the
		// window and stays, with its delay.
		time.Sleep(2 * time.Minute)
		d.observe("kept", "m", 200*time.Millisecond, time.Now())
		time.Sleep(2 * time.Minute)
		d.observe("new", "m", time.Second, time.Now())
		if n := size(); n != 2 {
			t.Fatalf("after the sweep: %d entries, want kept and new", n)
		}
		if got := p.HedgeDelay("kept", "m"); !near(got, 200*time.Millisecond, 0.01) {
			t.Fatalf("kept: delay %v", got)
		}
		// A swept route × model starts afresh, as one never seen.
		if got := p.HedgeDelay("tenant-7", "m"); got != 5*time.Second {
			t.Fatalf("swept: delay %v", got)
		}
		d.observe("tenant-7", "m", 300*time.Millisecond, time.Now())
		if got := p.HedgeDelay("tenant-7", "m"); !near(got, 300*time.Millisecond, 0.01) {
			t.Fatalf("swept, then seen again: delay %v", got)
		}
	})
}

// A sample for an entry that a sweep removed between its lookup and its
// record is refused by the removed one, where it would be lost, and
// observe then records it in the book. (A concurrent test cannot make the
// interleaving happen at will: this one makes it by hand.)
func TestAdaptiveDelaySweptBeforeRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Config{HedgeWarmup: 1, HedgeWindow: 4 * time.Minute, HedgeMinDelay: time.Millisecond, HedgeMaxDelay: time.Second})
		d := p.delays
		now := time.Now()
		e := d.entry("r", "m", true, now) // looked up: new, so empty
		later := now.Add(4 * time.Minute)
		d.mu.Lock()
		d.sweep(later) // a due sweep removes it
		d.mu.Unlock()
		if d.record(e, 50*time.Millisecond, later) {
			t.Fatal("a sample went into a removed entry")
		}
		d.observe("r", "m", 50*time.Millisecond, later)
		if n, _ := d.samples("r", "m"); n != 1 {
			t.Fatalf("%v samples in the book, want 1", n)
		}
	})
}
