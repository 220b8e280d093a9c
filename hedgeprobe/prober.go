package hedgeprobe

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Prober runs hedged, watchdogged calls under one policy. It holds the
// config, the hedge budget, the pushback state and the adaptive-delay
// sketches, so share one Prober per upstream pool. A Prober is safe for
// concurrent use.
type Prober[T any] struct {
	cfg      Config
	classify Classifier[T]
	opts     options
	tokens   TokenCount[T]
	model    func(T) (string, bool)
	delays   *delayBook
	budget   budget
	pushback pushback
	tel      *tracing // nil when telemetry is off
}

// Option configures a Prober beyond its Config: listener hooks, telemetry.
type Option func(*options)

type options struct {
	onHedge       func(HedgeEvent)
	onThrottle    func(ThrottleEvent)
	onCommit      func(CommitEvent)
	onAttemptDone func(AttemptEvent)
	onWatchdog    func(WatchdogEvent)
	tokenCount    any
	traceOptions
}

// OnHedge registers a hook called at every hedge launch. Hooks are called
// on the goroutine that calls Stream.Next or Stream.Close, must be quick
// and must not call back into the Stream. A panicking hook is recovered
// and ignored: a listener cannot fail or wedge a call. A later
// registration of the same hook replaces the earlier.
func OnHedge(f func(HedgeEvent)) Option { return func(o *options) { o.onHedge = f } }

// OnThrottle registers a hook called for every hedge the budget or
// pushback refused.
func OnThrottle(f func(ThrottleEvent)) Option { return func(o *options) { o.onThrottle = f } }

// OnCommit registers a hook called when an attempt commits.
func OnCommit(f func(CommitEvent)) Option { return func(o *options) { o.onCommit = f } }

// OnAttemptDone registers a hook called once per attempt when it ends,
// with its outcome. A loser reports AttemptCanceled, never AttemptFailed,
// so a circuit breaker fed from this hook is not tripped by losing a race.
func OnAttemptDone(f func(AttemptEvent)) Option { return func(o *options) { o.onAttemptDone = f } }

// OnWatchdog registers a hook called when the TTFT or stall watchdog fires.
func OnWatchdog(f func(WatchdogEvent)) Option { return func(o *options) { o.onWatchdog = f } }

// WithTokenCount tells the Prober how to read the output token count from
// a usage item, for gen_ai.usage.output_tokens on attempt spans. Its T
// must be the Prober's, or New fails. A panic in f fails the call with an
// error wrapping ErrExtractorPanic.
func WithTokenCount[T any](f TokenCount[T]) Option {
	return func(o *options) { o.tokenCount = f }
}

// Trigger is why an attempt was launched.
type Trigger string

// Values of Trigger (the streamwatch.attempt.trigger values).
const (
	TriggerPrimary Trigger = "primary"
	TriggerTTFT    Trigger = "ttft"
	TriggerStall   Trigger = "stall"
	TriggerError   Trigger = "error"
)

// AttemptOutcome is how an attempt ended.
type AttemptOutcome string

// Values of AttemptOutcome (the streamwatch.attempt.outcome values).
const (
	// AttemptRunning: the attempt has not ended yet.
	AttemptRunning AttemptOutcome = ""
	// AttemptWinner: the attempt committed and its stream ended cleanly.
	AttemptWinner AttemptOutcome = "winner"
	// AttemptCanceled: the attempt lost the race, or the caller cancelled
	// or closed the call, or another attempt's failure ended the call.
	AttemptCanceled AttemptOutcome = "canceled"
	// AttemptFailed: the attempt failed with an error or a watchdog
	// timeout, committed or not.
	AttemptFailed AttemptOutcome = "failed"
)

// Outcome is how a call ended.
type Outcome string

// Values of Outcome (the streamwatch.outcome values).
const (
	// OutcomeRunning: the call has not ended.
	OutcomeRunning      Outcome = ""
	OutcomeOK           Outcome = "ok"
	OutcomeTTFTTimeout  Outcome = "ttft_timeout"
	OutcomeStallTimeout Outcome = "stall_timeout"
	OutcomeError        Outcome = "error"
	OutcomeCanceled     Outcome = "canceled"
)

// ThrottleReason says why a hedge was refused.
type ThrottleReason string

// Values of ThrottleReason.
const (
	ThrottleBudget   ThrottleReason = "budget"
	ThrottlePushback ThrottleReason = "pushback"
)

// HedgeEvent describes a hedge launch.
type HedgeEvent struct {
	// Attempt is the new attempt's index (1 for the first hedge).
	Attempt                int
	Route, Provider, Model string
	Trigger                Trigger
	// Delay is the hedge delay that was in force for the TTFT trigger.
	Delay time.Duration
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// ThrottleEvent describes a hedge that was not launched.
type ThrottleEvent struct {
	// Attempt is the index the hedge would have had.
	Attempt int
	// Route is the route it would have gone to.
	Route   string
	Trigger Trigger
	Reason  ThrottleReason
	Elapsed time.Duration
}

// CommitEvent describes a commit.
type CommitEvent struct {
	Attempt                int
	Route, Provider, Model string
	// Elapsed is the time since the call started.
	Elapsed time.Duration
}

// AttemptEvent describes an attempt that ended.
type AttemptEvent struct {
	Attempt                int
	Route, Provider, Model string
	Trigger                Trigger
	Outcome                AttemptOutcome
	// Err is the attempt's error when Outcome is AttemptFailed, else nil.
	Err error
	// ContentChunks is the number of content chunks it received.
	ContentChunks int64
	// TTFT is the time from its launch to its first content chunk, 0 when
	// it had none.
	TTFT time.Duration
	// Duration is the time from its launch to its end.
	Duration time.Duration
}

// WatchdogEvent describes a watchdog firing.
type WatchdogEvent struct {
	Kind    TimeoutKind
	Timeout time.Duration
	Attempt int
	Route   string
	Elapsed time.Duration
}

// New returns a Prober with the policy cfg and the classifier classify. It
// validates cfg (see Config.Validate), applies the defaults, and never
// panics on bad input.
func New[T any](cfg Config, classify Classifier[T], opts ...Option) (*Prober[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if classify == nil {
		return nil, fmt.Errorf("%w: classifier is nil", ErrInvalidConfig)
	}
	p := &Prober[T]{cfg: cfg.withDefaults(), classify: classify}
	for _, o := range opts {
		if o != nil {
			o(&p.opts)
		}
	}
	if p.opts.tokenCount != nil {
		tc, ok := p.opts.tokenCount.(TokenCount[T])
		if !ok {
			return nil, fmt.Errorf("%w: WithTokenCount of type %T, want %T", ErrInvalidConfig, p.opts.tokenCount, TokenCount[T](nil))
		}
		p.tokens = tc
	}
	if p.opts.responseModel != nil {
		f, ok := p.opts.responseModel.(func(T) (string, bool))
		if !ok {
			return nil, fmt.Errorf("%w: WithResponseModel of type %T, want %T", ErrInvalidConfig, p.opts.responseModel, f)
		}
		p.model = f
	}
	p.delays = newDelayBook(p.cfg)
	p.budget.init(p.cfg.HedgeBudget, p.cfg.HedgeBurst)
	p.tel = newTracing(p.opts.traceOptions)
	return p, nil
}

// Config returns the Prober's config with defaults applied.
func (p *Prober[T]) Config() Config { return p.cfg }

// HedgeDelay returns the hedge delay the TTFT trigger would use now for a
// hedge after an attempt on route × model: HedgeAfter when set, else the
// adaptive delay.
func (p *Prober[T]) HedgeDelay(route, model string) time.Duration {
	if p.cfg.HedgeAfter > 0 {
		return p.cfg.HedgeAfter
	}
	return p.delays.delay(route, model, time.Now())
}

// budget is the hedge token bucket (docs/design.md §2 rule 3): each call adds
// perCall tokens up to burst, each hedge takes one.
type budget struct {
	mu      sync.Mutex
	tokens  float64
	perCall float64
	burst   float64
}

func (b *budget) init(perCall, burst float64) {
	b.perCall, b.burst, b.tokens = perCall, burst, burst
}

func (b *budget) refill() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+b.perCall)
	b.mu.Unlock()
}

func (b *budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// pushback remembers routes that asked callers to stay away (Retry-After).
type pushback struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (p *pushback) set(route string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.until == nil {
		p.until = make(map[string]time.Time)
	}
	if until.After(p.until[route]) {
		p.until[route] = until
	}
}

func (p *pushback) blocked(route string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, ok := p.until[route]
	if !ok {
		return false
	}
	if !now.Before(u) {
		delete(p.until, route)
		return false
	}
	return true
}

func validateRoutes[T any](routes []Route[T]) error {
	if len(routes) == 0 {
		return ErrNoRoutes
	}
	var errs []error
	for i, r := range routes {
		if r.Name == "" {
			errs = append(errs, fmt.Errorf("%w: routes[%d] has no Name", ErrInvalidRoute, i))
		}
		if r.Open == nil {
			errs = append(errs, fmt.Errorf("%w: routes[%d] (%q) has a nil Open", ErrInvalidRoute, i, r.Name))
		}
	}
	return errors.Join(errs...)
}
