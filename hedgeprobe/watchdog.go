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
	// ns since start (the Next's entry minus waited), and while the caller
	// is away between Next calls, −1−waited.
	wait    atomic.Int64
	waited  time.Duration // owned by the caller's goroutine
	fired   atomic.Bool
	firedAt atomic.Int64

	// testHookRearm, when set, runs between tick's check and its re-arm.
	testHookRearm func()
}

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
	w.wait.Store(int64(from))
	return from
}

// content ends the wait with a content chunk: the sum starts over.
func (w *watchdog) content() {
	w.waited = 0
	w.wait.Store(-1)
}

// away ends the wait that began at from with a keepalive or control item:
// the wait so far stays on the clock, the time away does not.
func (w *watchdog) away(from time.Duration) {
	w.waited = time.Since(w.start) - from
	w.wait.Store(-1 - int64(w.waited))
}

// firedAfter is when, since start, the watchdog fired.
func (w *watchdog) firedAfter() time.Duration { return time.Duration(w.firedAt.Load()) }

// tick is the timer function.
func (w *watchdog) tick() {
	if w.stopped.Load() {
		return
	}
	now := time.Since(w.start)
	wait := w.wait.Load()
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
	// The caller's waits add up to the timeout: the stall is real, even
	// when this function ran late and the caller is away by now.
	if w.fired.CompareAndSwap(false, true) {
		w.firedAt.Store(int64(now))
		w.fire()
	}
}

// stop stops the watchdog for good.
func (w *watchdog) stop() {
	w.stopped.Store(true)
	w.t.Stop()
}
