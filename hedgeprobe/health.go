package hedgeprobe

import (
	"sync"
	"sync/atomic"
	"time"
)

// health is a Prober's route health table (docs/design.md §2 rule 11),
// shared by all its calls: outlier ejection as Envoy does it, and the
// pushback of Retry-After. A route whose attempts fail with transient
// errors EjectFailures times in a row is ejected for EjectBase × its
// consecutive ejection count (at most EjectMax); while ejected it is
// skipped as primary and for hedges; when the time has passed one attempt
// probes it: success restores it, failure ejects it again for longer (or
// until its Retry-After).
// Attempts admitted before an ejection and ending after it are stale and
// count for nothing (see failure). A Retry-After ejects the route until
// then. With ejection off, a Retry-After only keeps hedges away
// (pushback).
//
// The common case, no route with any state, costs one atomic load: marked
// counts the routes that have any.
type health struct {
	threshold int // EjectFailures; ≤ 0: ejection off
	base, max time.Duration

	marked atomic.Int32
	// seq counts the ejections of every route. An attempt takes its value
	// when it is admitted (see admission): an order, where two clock
	// readings can be equal (one outage fails many attempts launched at
	// one instant).
	seq    atomic.Uint64
	mu     sync.Mutex
	routes map[string]*routeHealth
	// ejectedSeq is the seq of each route's latest ejection, kept after
	// the route is restored and its entry in routes dropped: a stream
	// admitted before that ejection is stale for good. An entry is needed
	// only while such a stream is running; past ejectedKept entries they
	// are forgotten a grace period later (see sweepEjected).
	ejectedSeq map[string]uint64

	// The grace period, as read-copy-update has it: every admission
	// enters one of two counters (enter) before it takes its epoch and
	// leaves it when its attempt has told health its end (leave).
	// sweepEjected starts a period by taking graceFrom = seq and switching
	// era, and ends it when the previous era's counter is zero: every
	// attempt admitted before graceFrom has ended, so no running one is
	// stale by an ejection at or before it.
	era       atomic.Uint32 // 0 or 1: the counter admissions enter
	live      [2]atomic.Int64
	graceFrom uint64 // seq when the period in progress began; 0: none. h.mu.

	// sweptAt is when sweepIdle last looked for entries of routes to
	// forget; forgotten holds the ejected routes a failure forgot as idle
	// (the sweep, or the failing route's own entry), restored without a
	// probe, until a Stream reports them (takeForgotten). h.mu.
	sweptAt   time.Time
	forgotten []RouteEvent
	// noted numbers the ejections and restores a listener hears
	// (RouteEvent.Seq), in the order they happen. h.mu.
	noted uint64
}

// ejectedKept is how many routes' latest ejections are kept without a
// grace period: a fixed set of routes never pays for one.
const ejectedKept = 64

type routeHealth struct {
	fails     int       // consecutive transient failures
	ejections int       // consecutive ejections
	until     time.Time // ejected (or, with ejection off, pushed back) until
	probing   bool      // one attempt probes the route after its ejection
	failedAt  time.Time // the latest failure that counted (or pushed back)
}

func (r *routeHealth) clear() bool {
	return r.fails == 0 && r.ejections == 0 && r.until.IsZero() && !r.probing
}

// epoch is the epoch of an attempt admitted now (see admission).
func (h *health) epoch() uint64 { return h.seq.Load() }

// eject marks name's r ejected until until; h.mu is held. A probe still
// running is stale from now on: the next probe is admitted when this
// ejection ends, whatever that one's fate.
func (h *health) eject(name string, r *routeHealth, until time.Time) {
	if h.ejectedSeq == nil {
		h.ejectedSeq = make(map[string]uint64)
	}
	r.until, r.probing = until, false
	h.ejectedSeq[name] = h.seq.Add(1)
	h.sweepEjected()
}

// sweepEjected ends the grace period in progress, if every attempt
// admitted before it has ended, forgetting the ejections it covers, and
// starts one while more than ejectedKept are kept. It runs at ejections
// only: between them nothing is added. h.mu is held.
func (h *health) sweepEjected() {
	if h.graceFrom != 0 {
		if h.live[1-h.era.Load()].Load() != 0 {
			return
		}
		for name, seq := range h.ejectedSeq {
			if seq <= h.graceFrom {
				delete(h.ejectedSeq, name)
			}
		}
		h.graceFrom = 0
	}
	if len(h.ejectedSeq) > ejectedKept {
		h.graceFrom = h.seq.Load()
		h.era.Store(1 - h.era.Load())
	}
}

// enter counts an admission in the grace period's counter, before it
// takes its epoch; it returns the counter to leave. An admission that
// entered one counter while sweepEjected switched eras enters the other:
// a period's counter then holds every admission whose epoch precedes its
// graceFrom and has not left.
func (h *health) enter() uint32 {
	for {
		e := h.era.Load()
		h.live[e].Add(1)
		if h.era.Load() == e {
			return e
		}
		h.live[e].Add(-1)
	}
}

// leave uncounts adm, once: its attempt has ended and told health, or it
// was never launched.
func (h *health) leave(adm *admission) {
	if adm.entered {
		adm.entered = false
		h.live[adm.era].Add(-1)
	}
}

// stale reports whether an attempt on name admitted at epoch launched
// (see admission) was admitted before the route's latest ejection: what
// it says of the route predates that verdict — also once a probe has
// restored the route since (one outage is one ejection). A probe's epoch
// is its grant's, so it is stale once the route is ejected again after the
// grant — by another call's attempt, say, while every route is ejected —
// since that ejection revoked it. h.mu is held.
func (h *health) stale(name string, launched uint64) bool {
	return launched < h.ejectedSeq[name]
}

// extend keeps the route away until now + retryAfter, when that is later
// than it already is, without counting an ejection.
func (r *routeHealth) extend(now time.Time, retryAfter time.Duration) {
	if retryAfter > 0 && now.Add(retryAfter).After(r.until) {
		r.until = now.Add(retryAfter)
	}
}

func newHealth(cfg Config) *health {
	return &health{threshold: cfg.EjectFailures, base: cfg.EjectBase, max: cfg.EjectMax}
}

func (h *health) on() bool { return h.threshold > 0 }

// route returns name's entry, creating it; h.mu is held.
func (h *health) route(name string) *routeHealth {
	if h.routes == nil {
		h.routes = make(map[string]*routeHealth)
	}
	r := h.routes[name]
	if r == nil {
		r = &routeHealth{}
		h.routes[name] = r
	}
	return r
}

// settle drops name's entry, which marked counts, when it holds nothing,
// keeping marked exact; h.mu is held.
func (h *health) settle(name string, r *routeHealth) {
	if r.clear() {
		h.marked.Add(-1)
		delete(h.routes, name)
	}
}

// admission is what health grants an attempt on a route: the epoch it
// launches at, and whether it is the one attempt that probes the route
// after its ejection. The epoch is taken with the decision (under the
// lock that ejects, or, lock-free, before seeing that no route has any
// state): an ejection between the decision and the launch then makes the
// attempt stale, as it was admitted before that ejection — its failure
// does not eject the route again, its success restores nothing, and a
// probe's verdict or abandon touches no newer probe's grant.
type admission struct {
	probe bool
	epoch uint64
	// era is the grace-period counter it entered (health.enter), when
	// entered: left by health.leave.
	era     uint32
	entered bool
	// restored, when not 0, is the Seq of a restore: admitting it forgot
	// the route's idle entry, which held an ejection (see idle); the
	// listener is to hear the route restored.
	restored uint64
}

// admit reports whether an attempt may go to name now. An ejected route
// whose time has passed admits one attempt, the probe, and no other until
// that one's outcome is known.
func (h *health) admit(name string, now time.Time, primary bool) (ok bool, adm admission) {
	adm.era, adm.entered = h.enter(), true
	// The epoch before marked: an ejection bumps marked before seq (see
	// failure), so an epoch that already counts an ejection sees the
	// route marked and decides under the lock.
	if adm.epoch = h.seq.Load(); h.marked.Load() == 0 {
		return true, adm
	}
	defer func() {
		if !ok {
			h.leave(&adm)
		}
	}()
	h.mu.Lock()
	defer h.mu.Unlock()
	adm.epoch = h.seq.Load()
	r := h.routes[name]
	if r != nil && h.idle(r, now) {
		// Idle: the route starts afresh, as an ordinary route, not as
		// the probe of an ejection that ended long ago.
		adm.restored = h.forget(name, r)
		r = nil
	}
	if r == nil || r.until.IsZero() {
		return true, adm
	}
	if !h.on() {
		// Pushback only: it keeps hedges away, never the primary.
		if primary || !now.Before(r.until) {
			if !now.Before(r.until) {
				r.until = time.Time{}
				h.settle(name, r)
			}
			return true, adm
		}
		return false, adm
	}
	if now.Before(r.until) || r.probing {
		return false, adm
	}
	r.probing = true
	adm.probe = true
	return true, adm
}

// soonest returns the index of the route whose ejection ends first, the
// one to use when every route is ejected, and the attempt's admission.
func (h *health) soonest(names func(i int) string, n int) (int, admission) {
	adm := admission{era: h.enter(), entered: true}
	h.mu.Lock()
	defer h.mu.Unlock()
	adm.epoch = h.seq.Load()
	best, bestAt := 0, time.Time{}
	for i := range n {
		r := h.routes[names(i)]
		if r == nil {
			return i, adm
		}
		if i == 0 || r.until.Before(bestAt) {
			best, bestAt = i, r.until
		}
	}
	return best, adm
}

// hedgesAdmittedAt returns when the first of n routes' ejections or
// pushbacks ends, after which a hedge may go there: known false when none
// ends later than now (a probe in flight holds the route, for as long as
// it runs).
func (h *health) hedgesAdmittedAt(names func(i int) string, n int) (at time.Time, known bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for i := range n {
		r := h.routes[names(i)]
		if r == nil || !r.until.After(now) {
			continue
		}
		if !known || r.until.Before(at) {
			at, known = r.until, true
		}
	}
	return at, known
}

// failure records a transient failure of an attempt on name, admitted at
// epoch launched (its admission's), probe telling whether it was the attempt
// admitted to probe the route; it returns the ejection it caused, if any.
// retryAfter > 0 is the upstream's pushback, which decides the ejection's
// time (or pushes back) by itself — except that it never cuts short an
// ejection in force that lasts longer.
//
// An attempt admitted before the route's latest ejection is stale: one
// outage fails every stream running on the route at once, and counting
// those that end after the ejection would eject it again, longer, once per
// stream. A Retry-After among them still holds while the ejection does: it
// lengthens it to its time, without counting as another. Attempts
// admitted during an ejection (every route ejected: the one whose
// ejection ends first serves) count as any other.
func (h *health) failure(name string, now time.Time, retryAfter time.Duration, launched uint64, probe bool) (ev RouteEvent, ejected bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.routes[name]; r != nil && h.idle(r, now) {
		// Its failures long past count no more (see idle).
		if seq := h.forget(name, r); seq != 0 {
			h.forgotten = append(h.forgotten, RouteEvent{Route: name, Seq: seq})
		}
	}
	r := h.route(name)
	// Marked before anything changes (settle uncounts it if nothing
	// does): an ejection must be marked before its seq is, for admit's
	// lock-free path.
	if r.clear() {
		h.marked.Add(1)
		h.sweepIdle(now, name)
	}
	defer h.settle(name, r)
	if !h.on() {
		r.extend(now, retryAfter)
		r.failedAt = now
		return RouteEvent{}, false
	}
	if h.stale(name, launched) {
		// Its Retry-After lengthens the ejection in force, if any. Once
		// the ejection has ended, what a stream of the outage says of
		// the route is older news than the probe that follows it, or than
		// the probe's success.
		if r.ejections > 0 && now.Before(r.until) {
			r.extend(now, retryAfter)
		}
		return RouteEvent{}, false
	}
	if probe {
		r.probing = false
	}
	r.fails++
	r.failedAt = now
	// A Retry-After decides the time itself (the upstream says when to
	// come back), after a failed probe too: the growing backoff in its
	// place failed more calls in the simulation's 429 storm (docs/design.md
	// rule 11). Else the failures call for a backoff, or a probe failed.
	d, reason := retryAfter, EjectRetryAfter
	if retryAfter <= 0 {
		if r.fails < h.threshold && !(probe && r.ejections > 0) {
			return RouteEvent{}, false
		}
		d, reason = h.backoff(r.ejections+1), EjectFailures
	}
	if now.Add(d).Before(r.until) {
		// Ejected for longer already (by an attempt launched while every
		// route was ejected): nothing new to report.
		return RouteEvent{}, false
	}
	r.ejections++
	r.fails = 0
	h.eject(name, r, now.Add(d))
	return RouteEvent{Route: name, Reason: reason, For: d, Ejections: r.ejections, Seq: h.note()}, true
}

// sweepIdle forgets the idle entries of every route (see idle): a route
// that failed once and was never asked again, or whose ejection ended and
// was never probed (names that come and go, one per tenant, say), whose
// entry its own next admission or failure would forget. One that was
// ejected is reported restored (forgotten), as a listener that counts
// ejected routes must hear. It runs when a route's entry is made, at most
// once per EjectMax; the entry of keep, being made, stays. h.mu is held.
func (h *health) sweepIdle(now time.Time, keep string) {
	if now.Sub(h.sweptAt) < h.max {
		return
	}
	h.sweptAt = now
	for name, r := range h.routes {
		if name == keep || !h.idle(r, now) {
			continue
		}
		if seq := h.forget(name, r); seq != 0 {
			h.forgotten = append(h.forgotten, RouteEvent{Route: name, Seq: seq})
		}
	}
}

// idle reports whether r, a route's entry, is of no more use: no failure,
// no ejection in force and no probe for EjectMax. Its route starts afresh
// — its failures count from zero, its next ejection is EjectBase long —
// and one that was ejected is restored, without a probe. h.mu is held.
func (h *health) idle(r *routeHealth, now time.Time) bool {
	return !r.probing && now.Sub(r.failedAt) > h.max && now.Sub(r.until) > h.max
}

// forget drops name's entry r, which marked counts. When it held an
// ejection the route is restored, without a probe, and the listener is to
// hear it: forget returns that restore's Seq, else 0. h.mu is held.
func (h *health) forget(name string, r *routeHealth) (restored uint64) {
	delete(h.routes, name)
	h.marked.Add(-1)
	if r.ejections == 0 {
		return 0
	}
	return h.note()
}

// takeForgotten returns the restores of the ejected routes forgotten as
// idle at a failure (by sweepIdle, or the failing route's own entry) since
// it was last asked, each once.
func (h *health) takeForgotten() []RouteEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs := h.forgotten
	h.forgotten = nil
	return evs
}

// note returns the Seq of the ejection or restore that is happening.
// h.mu is held.
func (h *health) note() uint64 {
	h.noted++
	return h.noted
}

// backoff is the ejection of a route's nth consecutive ejection: base ×
// n, at most max, saturating (a huge base must not wrap round to a
// negative, that is no, ejection).
func (h *health) backoff(n int) time.Duration {
	if h.base <= h.max/time.Duration(n) {
		return h.base * time.Duration(n)
	}
	return h.max
}

// success records an attempt on name, admitted at epoch launched, whose
// stream completed; it reports whether that restored an ejected route,
// and the restore's event. A stale attempt (admitted before the latest
// ejection, a probe of an earlier one included) restores nothing: it
// completing during the ejection says nothing of the calls the ejection
// keeps away.
func (h *health) success(name string, launched uint64) (ev RouteEvent, restored bool) {
	if h.marked.Load() == 0 {
		return RouteEvent{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.routes[name]
	if r == nil {
		return RouteEvent{}, false
	}
	if h.on() && h.stale(name, launched) {
		return RouteEvent{}, false
	}
	restored = h.on() && r.ejections > 0
	r.fails = 0
	if h.on() {
		r.ejections, r.until, r.probing = 0, time.Time{}, false
	}
	h.settle(name, r)
	if !restored {
		return RouteEvent{}, false
	}
	return RouteEvent{Route: name, Seq: h.note()}, true
}

// abandon releases name's probe, admitted at epoch launched, when the
// probing attempt ended without telling (it lost a race, or the caller
// hung up): the next call probes. A stale probe holds nothing to release
// (the ejection since let it go), and must not release a newer probe's.
func (h *health) abandon(name string, launched uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.routes[name]; r != nil && !h.stale(name, launched) {
		r.probing = false
	}
}
