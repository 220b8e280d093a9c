package hedgeprobe

import "time"

// traceOptions are the telemetry options of a Prober.
type traceOptions struct{}

// tracing creates spans for a Prober; nil means telemetry is off.
type tracing struct{}

func newTracing(traceOptions) *tracing { return nil }

// callRecorder records one call on its span; nil when not recording.
type callRecorder struct{}

// attemptRecorder records one attempt on its span; nil when not recording.
type attemptRecorder struct{}

func (t *tracing) startCall(any) *callRecorder { return nil }

func (r *callRecorder) attempt(idx int, route, provider, model string, trig Trigger, offset time.Duration, at time.Time) *attemptRecorder {
	return nil
}
func (r *callRecorder) hedge(idx int, trig Trigger, route string, delay time.Duration, at time.Time) {
}
func (r *callRecorder) throttled(idx int, trig Trigger, route string, reason ThrottleReason, at time.Time) {
}
func (r *callRecorder) commit(idx int, at time.Time)                                            {}
func (r *callRecorder) canceled(idx int, at time.Time)                                          {}
func (r *callRecorder) watchdog(kind TimeoutKind, timeout time.Duration, idx int, at time.Time) {}
func (r *callRecorder) end(st Stats, err error, at time.Time)                                   {}
func (a *attemptRecorder) content(at time.Time)                                                 {}
func (a *attemptRecorder) keepalive(at time.Time)                                               {}
func (a *attemptRecorder) end(o AttemptOutcome, err error, chunks, tokens int64, hasTokens bool, at time.Time) {
}
