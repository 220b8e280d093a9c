package hedgeprobe

import (
	"math"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// delaySlots is the number of steps of the sliding window: the window
// holds between 3/4 and all of Config.HedgeWindow of samples.
const delaySlots = 4

// delayBook holds the adaptive hedge delay of every route × model
// (docs/design.md §2 rule 2): a DDSketch of attempt TTFT per slot of a sliding
// window. It is safe for concurrent use.
//
// Censoring: an attempt cancelled before its first content chunk (it lost
// the race, or the TTFT watchdog ended the call) has a TTFT of at least
// its elapsed time. When it ran at least the hedge delay in force after
// its launch, it is recorded at max(elapsed, delay): for an upper quantile
// only whether a sample lies above the quantile matters, and it lies at or
// above the delay, the quantile it was measured against. Dropping it
// (bhope/hedge records winners only) teaches a delay that is too short,
// which hedges more, which censors more: a feedback loop downwards. An
// attempt cancelled sooner (typically a hedge that lost soon after its
// launch) says only that its TTFT exceeds a time below the delay: that
// places it neither above nor below the quantile, so it is dropped;
// recording it at HedgeMaxDelay would push the delay of a healthy route
// to the ceiling after a few lost races. Attempts cut by the caller
// (cancel, Close) or by an error are not recorded: they say nothing about
// the route's TTFT.
//
// Memory: an entry whose window holds no sample is the same as no entry
// (both give HedgeMaxDelay), so entries that fell empty are swept out,
// at most once a window, when a new route × model comes: the book holds
// the route × models seen in about the last two windows, not every one
// ever seen (6–23 KiB each, five sketches sized by the spread of their
// TTFTs — 9.5 KiB for 100 samples of a lognormal σ 0.5 over a window: a
// caller that names a model per tenant or per request would otherwise
// grow the Prober for its whole life).
type delayBook struct {
	q      float64
	lo, hi time.Duration
	slot   time.Duration
	warmup float64
	mu     sync.RWMutex
	m      map[delayKey]*delayEntry
	swept  time.Time // the latest sweep (mu)
}

type delayKey struct{ route, model string }

type delayEntry struct {
	mu sync.Mutex
	// removed: swept out of the book; a sample is recorded in the entry
	// that replaces it.
	removed  bool
	slots    [delaySlots]*ddsketch.DDSketch
	cur      int
	curStart time.Time
	merged   *ddsketch.DDSketch
	dirty    bool
	cached   time.Duration
}

func newDelayBook(cfg Config) *delayBook {
	return &delayBook{
		q:      cfg.HedgeQuantile,
		lo:     cfg.HedgeMinDelay,
		hi:     cfg.HedgeMaxDelay,
		slot:   max(cfg.HedgeWindow/delaySlots, 1),
		warmup: float64(cfg.HedgeWarmup),
		m:      make(map[delayKey]*delayEntry),
	}
}

func newSketch() *ddsketch.DDSketch {
	s, err := ddsketch.LogCollapsingLowestDenseDDSketch(0.01, 1024)
	if err != nil {
		panic(err) // constant arguments: cannot happen
	}
	return s
}

// entry returns the entry of route × model, nil when there is none; with
// create, a new one then, after a sweep at now when one is due.
func (b *delayBook) entry(route, model string, create bool, now time.Time) *delayEntry {
	k := delayKey{route, model}
	b.mu.RLock()
	e := b.m[k]
	b.mu.RUnlock()
	if e != nil || !create {
		return e
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e = b.m[k]; e == nil {
		b.sweep(now)
		e = &delayEntry{merged: newSketch(), cached: b.hi}
		for i := range e.slots {
			e.slots[i] = newSketch()
		}
		b.m[k] = e
	}
	return e
}

// sweep removes the entries whose window is empty at now, at most once a
// window; b.mu is held.
func (b *delayBook) sweep(now time.Time) {
	if !b.swept.IsZero() && now.Sub(b.swept) < delaySlots*b.slot {
		return
	}
	b.swept = now
	for k, e := range b.m {
		e.mu.Lock()
		b.rotate(e, now)
		if e.empty() {
			e.removed = true
			delete(b.m, k)
		}
		e.mu.Unlock()
	}
}

// empty reports whether e's window holds no sample; e.mu is held.
func (e *delayEntry) empty() bool {
	for _, s := range e.slots {
		if !s.IsEmpty() {
			return false
		}
	}
	return true
}

// observe records one TTFT sample of route × model at now.
func (b *delayBook) observe(route, model string, ttft time.Duration, now time.Time) {
	for !b.record(b.entry(route, model, true, now), ttft, now) {
		// Swept between the lookup and the record: take its successor.
	}
}

// record adds one TTFT sample to e at now; false, adding nothing, when e
// was swept out of the book since it was looked up.
func (b *delayBook) record(e *delayEntry, ttft time.Duration, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return false
	}
	b.rotate(e, now)
	_ = e.slots[e.cur].Add(max(ttft, 0).Seconds())
	e.dirty = true
	return true
}

// observeCensored records an attempt known to be slower than elapsed,
// launched with the hedge delay delay in force: at max(elapsed, delay)
// when elapsed reaches delay, not at all before.
func (b *delayBook) observeCensored(route, model string, elapsed, delay time.Duration, now time.Time) {
	if elapsed < delay {
		return
	}
	b.observe(route, model, max(elapsed, delay), now)
}

// delay returns the hedge delay of route × model at now: the sample of
// its window that the next TTFT exceeds with probability about 1-q (see
// sampleQuantile), clamped to [lo, hi], or hi while the window holds fewer
// than warmup samples.
func (b *delayBook) delay(route, model string, now time.Time) time.Duration {
	// A removed entry was empty: it gives b.hi as no entry does.
	e := b.entry(route, model, false, now)
	if e == nil {
		return b.hi
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	b.rotate(e, now)
	if !e.dirty {
		return e.cached
	}
	e.dirty = false
	e.merged.Clear()
	for _, s := range e.slots {
		_ = e.merged.MergeWith(s)
	}
	e.cached = b.hi
	if e.merged.GetCount() >= b.warmup && !e.merged.IsEmpty() {
		if v, err := e.merged.GetValueAtQuantile(sampleQuantile(b.q, e.merged.GetCount())); err == nil {
			e.cached = min(max(time.Duration(v*float64(time.Second)), b.lo), b.hi)
		}
	}
	return e.cached
}

// sampleQuantile is the quantile to ask a sketch of n samples for, so that
// the next sample from the same distribution exceeds its answer with the
// probability nearest 1-q. The next sample exceeds the sample of rank k
// (from 0) with probability (n-k)/(n+1) whatever the distribution, so the
// rank wanted is q(n+1)-1, rounded. DDSketch answers q with rank
// floor(q(n-1)) instead, the usual estimate of the quantile itself, which
// the next sample exceeds more often on few samples: p95 of 20 samples is
// then the 19th smallest, exceeded 2/21 ≈ 9.5 % of the time, where the
// largest is exceeded 1/21 ≈ 4.8 %. A p95 hedge delay is meant to hedge
// about 5 % of attempts; the window holds a few dozen samples on a quiet
// route, where the difference nearly doubles the TTFT hedges (8.2 %
// against 4.6 % of calls in the simulation of the seed's workload,
// docs/performance.md).
func sampleQuantile(q, n float64) float64 {
	if n < 2 {
		return q
	}
	k := math.Round(q*(n+1) - 1)
	// Half a rank above k: the sketch's rank q'(n-1) then falls inside
	// sample k's unit of the cumulative count, not at its edge, where a
	// rounding error would give sample k-1.
	return min(1, max(0, (k+0.5)/(n-1)))
}

// rotate advances e's window to now, clearing slots that fell out of it.
func (b *delayBook) rotate(e *delayEntry, now time.Time) {
	if e.curStart.IsZero() {
		e.curStart = now
		return
	}
	gap := now.Sub(e.curStart)
	if gap < b.slot {
		return
	}
	steps := int(gap / b.slot)
	if steps >= delaySlots {
		for _, s := range e.slots {
			if !s.IsEmpty() {
				s.Clear()
				e.dirty = true
			}
		}
		e.curStart = now
		return
	}
	for range steps {
		e.cur = (e.cur + 1) % delaySlots
		if !e.slots[e.cur].IsEmpty() {
			e.slots[e.cur].Clear()
			e.dirty = true
		}
	}
	e.curStart = e.curStart.Add(time.Duration(steps) * b.slot)
}
