package hedgeprobe

import "time"

// observer is told everything a call does that someone may want to see:
// the call span (spans, in telemetry.go) and the user's listener hooks
// (hooks, below). The race calls one observer, never a span and a hook
// side by side, so the two cannot drift. Every method runs on the
// goroutine driving the call.
type observer interface {
	hedge(HedgeEvent)
	throttle(ThrottleEvent)
	commit(CommitEvent)
	attemptDone(AttemptEvent, time.Time)
	canceled(idx int, at time.Time)
	watchdog(WatchdogEvent, time.Time)
	resume(ResumeEvent)
	eject(RouteEvent, time.Time)
	restore(RouteEvent, time.Time)
	routeSkipped(route string, at time.Time)
}

// fanout tells each of its observers in turn.
type fanout []observer

func (f fanout) hedge(e HedgeEvent) {
	for _, o := range f {
		o.hedge(e)
	}
}

func (f fanout) throttle(e ThrottleEvent) {
	for _, o := range f {
		o.throttle(e)
	}
}

func (f fanout) commit(e CommitEvent) {
	for _, o := range f {
		o.commit(e)
	}
}

func (f fanout) attemptDone(e AttemptEvent, at time.Time) {
	for _, o := range f {
		o.attemptDone(e, at)
	}
}

func (f fanout) canceled(idx int, at time.Time) {
	for _, o := range f {
		o.canceled(idx, at)
	}
}

func (f fanout) watchdog(e WatchdogEvent, at time.Time) {
	for _, o := range f {
		o.watchdog(e, at)
	}
}

func (f fanout) resume(e ResumeEvent) {
	for _, o := range f {
		o.resume(e)
	}
}

func (f fanout) eject(e RouteEvent, at time.Time) {
	for _, o := range f {
		o.eject(e, at)
	}
}

func (f fanout) restore(e RouteEvent, at time.Time) {
	for _, o := range f {
		o.restore(e, at)
	}
}

func (f fanout) routeSkipped(route string, at time.Time) {
	for _, o := range f {
		o.routeSkipped(route, at)
	}
}

// hooks are the listener hooks of a Prober (the On… options). A nil hook
// is not called; a panicking one is recovered and ignored: listeners
// observe a call and must never fail or wedge it.
type hooks struct {
	onHedge       func(HedgeEvent)
	onThrottle    func(ThrottleEvent)
	onCommit      func(CommitEvent)
	onAttemptDone func(AttemptEvent)
	onWatchdog    func(WatchdogEvent)
	onResume      func(ResumeEvent)
	onEject       func(RouteEvent)
	onRestore     func(RouteEvent)
}

func (h *hooks) any() bool {
	return h.onHedge != nil || h.onThrottle != nil || h.onCommit != nil || h.onAttemptDone != nil ||
		h.onWatchdog != nil || h.onResume != nil || h.onEject != nil || h.onRestore != nil
}

func (h *hooks) hedge(e HedgeEvent)                      { notify(h.onHedge, e) }
func (h *hooks) throttle(e ThrottleEvent)                { notify(h.onThrottle, e) }
func (h *hooks) commit(e CommitEvent)                    { notify(h.onCommit, e) }
func (h *hooks) attemptDone(e AttemptEvent, _ time.Time) { notify(h.onAttemptDone, e) }
func (h *hooks) canceled(int, time.Time)                 {}
func (h *hooks) watchdog(e WatchdogEvent, _ time.Time)   { notify(h.onWatchdog, e) }
func (h *hooks) resume(e ResumeEvent)                    { notify(h.onResume, e) }
func (h *hooks) eject(e RouteEvent, _ time.Time)         { notify(h.onEject, e) }
func (h *hooks) restore(e RouteEvent, _ time.Time)       { notify(h.onRestore, e) }
func (h *hooks) routeSkipped(string, time.Time)          {}

// notify calls the listener hook f, when set, with e; a panic in f is
// recovered and ignored.
func notify[E any](f func(E), e E) {
	if f == nil {
		return
	}
	defer func() { _ = recover() }()
	f(e)
}
