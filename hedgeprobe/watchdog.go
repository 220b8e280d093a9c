package hedgeprobe

import (
	"math"
	"sync/atomic"
	"time"
)

// watchdog is the stall watchdog of a direct read after a Streaming
// commit (docs/design.md §2 rule 6): only the time the caller spends
// waiting inside Next counts, summed since the latest content chunk. It
// owns its timer and its stop.
//
// The timer is lazy: it is never reset per chunk; when it fires it
// re-arms itself for the time left (after−waited while the caller is
// away). Its scheduled time never exceeds the deadline origin+after of a
// wait, because the origin only moves forward (a Next's entry is after the
// item that ended the previous wait) and a re-arm while the caller is
// away is at most after−waited from then.
type watchdog struct {
	after time.Duration
	start time.Time
	fire  func() // unblocks the caller's Next: releases the winner

	t *time.Timer
	// stopped holds against a concurrent re-arm: tick checks it before
	// re-arming and again after, and stop sets it before stopping the
	// timer, so whichever of the two comes second stops the timer.
	stopped atomic.Bool
	// wait is, while the caller waits in Next, the stall clock's origin in
	// ns since start (the Next's entry minus waited); while the caller is
	// away between Next calls, −1−waited; once the watchdog fired,
	// firedWait, for good. The item that ends a wait and the timer race for
	// it with a compare-and-swap, so exactly one of them ends it: an item
	// the caller is given was on time, and a stall declared was not
	// answered by an item.
	wait    atomic.Int64
	waited  time.Duration // owned by the caller's goroutine
	firedAt atomic.Int64

	// testHookRearm, when set, runs between tick's check and its re-arm;
	// testHookFire between its decision to fire and its claim of the wait.
	testHookRearm, testHookFire func()
}

// firedWait is watchdog.wait once the watchdog fired.
const firedWait = math.MinInt64

func newWatchdog(after time.Duration, start time.Time, fire func()) *watchdog {
	w := &watchdog{after: after, start: start, fire: fire}
	// The clock starts afresh when the caller reaches the source: the
	// first enter begins the first wait.
	w.wait.Store(-1)
	w.arm()
	return w
}

// arm starts the timer; everything tick reads is set before.
func (w *watchdog) arm() {
	// Reset after the assignment: tick reads w.t.
	w.t = time.AfterFunc(time.Duration(math.MaxInt64), w.tick)
	w.t.Reset(w.after)
}

// enter starts a wait of the caller in Next and returns its origin.
func (w *watchdog) enter() time.Duration {
	from := time.Since(w.start) - w.waited
	// Only the timer changes wait meanwhile, and only to firedWait, which
	// stays.
	if old := w.wait.Load(); old != firedWait {
		w.wait.CompareAndSwap(old, int64(from))
	}
	return from
}

// content ends the wait that began at from with a content chunk: the sum
// starts over. It reports false when the watchdog fired first.
func (w *watchdog) content(from time.Duration) bool {
	if !w.wait.CompareAndSwap(int64(from), -1) {
		return false
	}
	w.waited = 0
	return true
}

// away ends the wait that began at from with a keepalive or control item:
// the wait so far stays on the clock, the time away does not. It reports
// false when the watchdog fired first.
func (w *watchdog) away(from time.Duration) bool {
	waited := time.Since(w.start) - from
	if waited >= w.after {
		// The wait reached the timeout before this item, which ends no
		// stall: the stall stands, whether the timer has run yet or not.
		w.firedAt.Store(int64(from + w.after))
		w.wait.CompareAndSwap(int64(from), firedWait)
		return false
	}
	if !w.wait.CompareAndSwap(int64(from), -1-int64(waited)) {
		return false
	}
	w.waited = waited
	return true
}

// fired reports whether the watchdog fired.
func (w *watchdog) fired() bool { return w.wait.Load() == firedWait }

// firedAfter is when, since start, the watchdog fired.
func (w *watchdog) firedAfter() time.Duration { return time.Duration(w.firedAt.Load()) }

// tick is the timer function.
func (w *watchdog) tick() {
	for {
		if w.stopped.Load() {
			return
		}
		now := time.Since(w.start)
		wait := w.wait.Load()
		if wait == firedWait {
			return
		}
		left := time.Duration(wait) + w.after - now
		if wait < 0 { // the caller is away
			left = w.after - time.Duration(-1-wait)
		}
		if left > 0 {
			if w.testHookRearm != nil {
				w.testHookRearm()
			}
			w.t.Reset(left)
			if w.stopped.Load() {
				// stop ran between the check and the re-arm.
				w.t.Stop()
			}
			return
		}
		// The caller's waits add up to the timeout: the stall is real,
		// even when this function ran late and the caller is away by now —
		// unless an item ended the wait meanwhile: judge again.
		w.firedAt.Store(int64(now))
		if w.testHookFire != nil {
			w.testHookFire()
		}
		if w.wait.CompareAndSwap(wait, firedWait) {
			w.fire()
			return
		}
	}
}

// stop stops the watchdog for good.
func (w *watchdog) stop() {
	w.stopped.Store(true)
	w.t.Stop()
}
