package hedgeprobe

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Prober runs hedged, watchdogged, resumable calls under one policy. It
// holds the config, the hedge budget, the route health table and the
// adaptive-delay sketches, so share one Prober per upstream pool. A Prober
// is safe for concurrent use. It comes from New: a call of a nil or zero
// Prober fails at its first Next with an error wrapping ErrInvalidConfig.
type Prober[T any] struct {
	cfg      Config
	items    Items[T]
	hooks    hooks
	delays   *delayBook
	budget   budget
	health   *health
	refusals refusals // routes that refused a continuation recently
	tel      *tracing // nil when telemetry is off
	triggers []trigger[T]
}

// Option configures a Prober beyond its Config and Items: listener hooks
// and telemetry.
type Option func(*options)

type options struct {
	hooks
	traceOptions
}

// OnHedge registers a hook called at every hedge launch but a resume (a
// continuation, also the stall hedge's before commit, goes to OnResume
// alone). Hooks are called
// on the goroutine that calls Stream.Next or Stream.Close, must be quick
// and must not call back into the Stream. A panicking hook is recovered
// and ignored: a listener cannot fail or wedge a call. Every event carries
// the context the call was started with, so a hook can tell calls apart.
// A later registration of the same hook replaces the earlier.
func OnHedge(f func(HedgeEvent)) Option { return func(o *options) { o.onHedge = f } }

// OnThrottle registers a hook called for every hedge or resume the budget
// or pushback refused.
func OnThrottle(f func(ThrottleEvent)) Option { return func(o *options) { o.onThrottle = f } }

// OnCommit registers a hook called when an attempt commits: at most once
// per call (never for a call that ends before any attempt commits; an
// attempt that ends cleanly with nothing to deliver commits at its end),
// and once more for every resume attempt that takes over a stalled stream
// (docs/design.md §2 rule 10), since the caller then reads from it.
func OnCommit(f func(CommitEvent)) Option { return func(o *options) { o.onCommit = f } }

// OnAttemptDone registers a hook called once per attempt when it ends,
// with its outcome. A loser, of a race before commit or of a resume race
// after it, reports AttemptCanceled, never AttemptFailed, so a circuit
// breaker fed from this hook is not tripped by losing a race. An attempt
// that a stall hedge continued before commit is reported when the call
// ends, not when it was cancelled: its chunks reach the caller after that,
// ahead of the continuation's, and its ChunksDelivered counts them.
func OnAttemptDone(f func(AttemptEvent)) Option { return func(o *options) { o.onAttemptDone = f } }

// OnWatchdog registers a hook called when the TTFT or stall watchdog fires:
// when it ends the call, and also before commit for each attempt a stall
// timeout fails, where the call goes on with its other attempts or an
// error hedge (WatchdogEvent.Attempt says which attempt).
func OnWatchdog(f func(WatchdogEvent)) Option { return func(o *options) { o.onWatchdog = f } }

// OnResume registers a hook called when a resume attempt is launched, or
// was due and was skipped (ResumeEvent.Skipped says why). A skip is
// reported again every ResumeAfter while the silence lasts, since the
// resume falls due again. A launched attempt whose route then declines
// the continuation (ResumeRefused, ResumeBuild) is reported twice under
// the same index: launched, then skipped.
func OnResume(f func(ResumeEvent)) Option { return func(o *options) { o.onResume = f } }

// OnEject registers a hook called when a route is ejected (docs/design.md
// §2 rule 11).
func OnEject(f func(RouteEvent)) Option { return func(o *options) { o.onEject = f } }

// OnRestore registers a hook called when a stream completes on an ejected
// route — its probe, or, with every route ejected, the route used as the
// one whose ejection ends first — and the route takes traffic again; also
// when a route whose ejection ended was not asked for EjectMax and is
// forgotten (docs/design.md §2 rule 11): the event's Context is then that
// of the call that found it so, asking for the route or sweeping at its
// attempt's failure.
func OnRestore(f func(RouteEvent)) Option { return func(o *options) { o.onRestore = f } }

// New returns a Prober with the policy cfg for items of type T. Fields of
// cfg left zero are read from the environment (see Config: a value set in
// code wins), then take their defaults; New fails, naming the field or the
// variable and the value, on anything invalid — every malformed variable,
// the code's invalid fields, a missing Items.Classify and an operation
// name that is not UTF-8 at once (no variable is applied while one is
// malformed) — and never panics on bad input. Prober.Config shows the
// values in force.
func New[T any](cfg Config, items Items[T], opts ...Option) (*Prober[T], error) {
	// A malformed variable applies no variable, and the code's fields are
	// still validated: one start-up reports every mistake.
	fromEnv, envErr := cfg.fillFromEnv()
	var classifyErr, opErr error
	if items.Classify == nil {
		classifyErr = fmt.Errorf("%w: Items.Classify is nil", ErrInvalidConfig)
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if !utf8.ValidString(o.operation) {
		// It is in every span, as a protobuf string (see validateRoutes).
		opErr = fmt.Errorf("%w: WithOperationName %q is not valid UTF-8", ErrInvalidConfig, o.operation)
	}
	cfgErr := cfg.Validate()
	if cfgErr != nil && len(fromEnv) > 0 {
		// A field the code left zero may be what is wrong: say where its
		// value came from.
		cfgErr = fmt.Errorf("%w\n(read from the environment: %s)", cfgErr, strings.Join(fromEnv, ", "))
	}
	if err := errors.Join(envErr, cfgErr, classifyErr, opErr); err != nil {
		return nil, err
	}
	p := &Prober[T]{cfg: cfg.withDefaults(), items: items, hooks: o.hooks}
	p.delays = newDelayBook(p.cfg)
	p.budget.init(p.cfg.HedgeBudget, p.cfg.HedgeBurst)
	p.health = newHealth(p.cfg)
	p.tel = newTracing(o.traceOptions)
	p.triggers = triggerTable[T]()
	return p, nil
}

// Config returns the config in force: the code's values, then the
// environment's, then the defaults, with MaxAttempts clamped.
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

// budget is the hedge token bucket (docs/design.md §2 rule 3): each call
// adds perCall tokens up to burst, each hedge or resume takes one.
//
// A TTFT hedge also leaves reserve tokens in the bucket: it saves its call
// a few seconds of a slow first chunk, where a resume or a stall hedge
// saves a silence of a minute and an error relaunch the call itself, so
// when the bucket runs low the tokens left go to those. gRPC's hedging
// throttle stops every hedge at half its tokens likewise; here only the
// cheapest rescue stops.
type budget struct {
	mu      sync.Mutex
	tokens  float64
	perCall float64
	burst   float64
	reserve float64 // what a TTFT hedge leaves: the whole tokens of half the burst
}

func (b *budget) init(perCall, burst float64) {
	b.perCall, b.burst, b.tokens = perCall, burst, burst
	// Whole tokens, so that a burst of 1 still lets a TTFT hedge launch.
	b.reserve = math.Floor(burst / 2)
}

func (b *budget) refill() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+b.perCall)
	b.mu.Unlock()
}

// tokenSlack absorbs the rounding of summed refills: ten refills of 0.1
// add up to 0.9999999999999999, and the tenth call must have earned a
// token.
const tokenSlack = 1e-9

// giveBack returns a token taken for an attempt that never started.
func (b *budget) giveBack() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+1)
	b.mu.Unlock()
}

// take takes a token when the bucket holds it and keep more.
func (b *budget) take(keep float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1+keep-tokenSlack {
		return false
	}
	b.tokens--
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
		if r.ServerPort < 0 || r.ServerPort > 65535 {
			errs = append(errs, fmt.Errorf("%w: routes[%d] (%q) has ServerPort %d, not a port", ErrInvalidRoute, i, r.Name, r.ServerPort))
		}
		// The names go into every span of the call, and OTLP sends them as
		// protobuf strings: one that is not UTF-8 fails the exporter's
		// whole batch, other calls' spans included.
		for _, f := range [...]struct{ field, v string }{{"Name", r.Name}, {"Provider", r.Provider}, {"Model", r.Model}, {"ServerAddress", r.ServerAddress}} {
			if !utf8.ValidString(f.v) {
				errs = append(errs, fmt.Errorf("%w: routes[%d] %s %q is not valid UTF-8", ErrInvalidRoute, i, f.field, f.v))
			}
		}
	}
	return errors.Join(errs...)
}
