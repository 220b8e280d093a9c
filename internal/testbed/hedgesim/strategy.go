package hedgesim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Result is one call as the caller saw it.
type Result struct {
	// Done is the time from the call's start to its last content chunk
	// delivered, or to its failure.
	Done time.Duration
	// TTFT is the time from the call's start to the first content chunk
	// delivered to the caller; -1 when none was.
	TTFT time.Duration
	// OK is true when the caller got the whole answer.
	OK bool
	// Attempts is the number of upstream requests made, hedges and
	// retries included.
	Attempts int
	// Hedges is the number of hedges hedgeprobe launched (outer retries
	// excluded): what the hedge budget bounds.
	Hedges int
	// Streams is the number of hedgeprobe Streams opened, or of requests
	// made through hedgedhttp's client (1 + retries); a Stream adds
	// HedgeBudget tokens to the bucket.
	Streams int
	// Wasted counts content chunks received and not part of the answer:
	// hedge losers', a resumed attempt's after the resume took over, and
	// every chunk of a stream abandoned for a retry.
	Wasted int64
	// Throttled counts hedges the budget or pushback refused (the real
	// Stats.HedgesThrottled); ThrottledPushback is the share of them that
	// pushback (Retry-After) refused, from the OnThrottle hook.
	Throttled, ThrottledPushback int
	// ByTrigger counts hedges by trigger (ttft, stall, error, resume),
	// from the OnHedge and OnResume hooks.
	ByTrigger [4]int
	// Err is the error the caller finally got; nil when OK.
	Err error
	// Restarted is set when a retry started the answer again after the
	// caller had been given content of it; AnswerTTFT is then the time
	// from the call's start to the first chunk of the answer the caller
	// kept, where TTFT stays the first chunk the caller saw. Otherwise
	// AnswerTTFT equals TTFT.
	Restarted  bool
	AnswerTTFT time.Duration
}

// delivered records a content chunk that reached the caller now, start
// being the call's start: the first sets TTFT, the last Done.
func (r *Result) delivered(start time.Time) {
	r.Done = time.Since(start)
	if r.TTFT < 0 {
		r.TTFT = r.Done
	}
	if r.AnswerTTFT < 0 {
		r.AnswerTTFT = r.Done
	}
}

// end records how the call finished: OK when err is nil, else err and the
// time it came.
func (r *Result) end(start time.Time, err error) {
	r.Err, r.OK = err, err == nil
	if !r.OK {
		r.Done = time.Since(start)
	}
}

// Indexes of Result.ByTrigger.
const (
	byTTFT = iota
	byStall
	byError
	byResume
)

// Strategy is one way of making the calls.
type Strategy struct {
	// Name is the row label of the report.
	Name string
	// Config describes the settings in a sentence for the report.
	Config string
	// Probe is the hedgeprobe configuration, when the strategy uses it.
	Probe *hedgeprobe.Config
	// Hedged is the hedgedhttp client, for its own Stats, when the
	// strategy uses it.
	Hedged *hedgedhttp.Client
	// run makes the call-th call.
	run func(ctx context.Context, c *call) Result
	// prober is the hedgeprobe strategy's Prober.
	prober *hedgeprobe.Prober[Chunk]
	// retry: the hedgeprobe strategy's caller retries once after a
	// watchdog's error (probe's retry).
	retry bool
}

// Shared production-style settings of the hedgeprobe strategies.
const (
	// hedgeBudget: a user who sees 20 % of streams stall sizes the budget
	// above the stall share; the first release's default 0.1 throttles
	// most of the stall hedges (buffered, stress scenario: 652 launched
	// against 2,195 at 0.3; the default is 0.3 since).
	hedgeBudget = 0.3
	hedgeBurst  = 10
	// stallAfter: 250 gaps of 20 ms; a pause of 5 s in a stream is no
	// longer a slow token.
	stallAfter = 5 * time.Second
	// stallTimeout: the README's example watchdog; after commit it ends a
	// silent stream and the caller retries on the other route.
	stallTimeout = 30 * time.Second
	// resumeAfter: ten times the p99.9 of a healthy stream's chunk gap,
	// and the library default.
	resumeAfter = 2 * time.Second
	// watchdogTimeout: LangChain's stream_chunk_timeout default.
	watchdogTimeout = 120 * time.Second
	// hedgedDelay: the hedgedhttp delay a user would pick from TTFT (about
	// its p60); anything above HeaderDelay gives the same result, as the
	// headers always win.
	hedgedDelay = 2 * time.Second
)

// Strategies returns the strategies of the report, in order. Each
// hedgeprobe strategy gets its own Prober, so budgets and delay sketches
// are not shared between rows.
func Strategies() ([]Strategy, error) {
	var out []Strategy
	out = append(out,
		Strategy{Name: "oracle (no faults, no hedge)", Config: "the same calls on the primary with no silence, outage or storm: the floor of completion (a hedge that races two routes can beat its TTFT)",
			run: func(ctx context.Context, c *call) Result { c.faults = false; return direct(ctx, c) }},
		Strategy{Name: "no hedge", Config: "one request to the primary, read to the end",
			run: direct},
	)
	hc, err := hedgedhttp.New(hedgedhttp.Config{Transport: transport{}, Upto: 2, Delay: hedgedDelay})
	if err != nil {
		return nil, err
	}
	out = append(out, Strategy{Name: "hedgedhttp (headers)",
		Config: fmt.Sprintf("cristalhq/hedgedhttp v0.9.2, Upto 2, Delay %v; first response (any status) wins, + one retry on a 429 or 5xx", hedgedDelay),
		Hedged: hc,
		run:    func(ctx context.Context, c *call) Result { return viaHTTP(ctx, hc, c) }})

	probes := []struct {
		name, desc string
		cfg        hedgeprobe.Config
		retry      bool
	}{
		// The two baselines have no route ejection: neither failsafe-go's
		// hedge policy nor LangChain has one. A Retry-After still keeps the
		// TTFT-only row's hedges off a route until then (hedgeprobe's
		// pushback has no switch).
		{"TTFT-only hedge", "hedgeprobe, StallAfter 0 (failsafe-go hedge-policy style on the first chunk: TTFT is the only trigger, plus errors), adaptive p95 delay, no watchdog, no route ejection, + one retry",
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst, ResumeAfter: hedgeprobe.Off, EjectFailures: hedgeprobe.NoEjection}, true},
		{"watchdog + retry", fmt.Sprintf("LangChain stream_chunk_timeout style: hedgeprobe MaxAttempts 1, StallTimeout %v, no route ejection, then one retry on the other route", watchdogTimeout),
			hedgeprobe.Config{MaxAttempts: 1, StallTimeout: watchdogTimeout, ResumeAfter: hedgeprobe.Off, EjectFailures: hedgeprobe.NoEjection}, true},
		// The same watchdog at the hedgeprobe rows' 30 s: how much of their
		// gain over the row above is only the shorter timeout.
		{"watchdog 30s + retry", fmt.Sprintf("as watchdog + retry with the hedgeprobe rows' StallTimeout %v: no hedge, no resume, no route ejection, then one retry on the other route", stallTimeout),
			hedgeprobe.Config{MaxAttempts: 1, StallTimeout: stallTimeout, ResumeAfter: hedgeprobe.Off, EjectFailures: hedgeprobe.NoEjection}, true},
		{"hedgeprobe streaming", fmt.Sprintf("Streaming, HoldChunks 10, StallAfter %v, StallTimeout %v + one retry, no resume", stallAfter, stallTimeout),
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst, HoldChunks: 10,
				StallAfter: stallAfter, StallTimeout: stallTimeout, ResumeAfter: hedgeprobe.Off}, true},
		{"hedgeprobe buffered", fmt.Sprintf("Buffered, StallAfter %v, StallTimeout %v + one retry, no resume", stallAfter, stallTimeout),
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst, Delivery: hedgeprobe.Buffered,
				StallAfter: stallAfter, StallTimeout: stallTimeout, ResumeAfter: hedgeprobe.Off}, true},
		{"hedgeprobe streaming + resume", fmt.Sprintf("Streaming, ResumeAfter %v, MaxAttempts 3, StallTimeout %v + one retry", resumeAfter, stallTimeout),
			tunedResume(), true},
		// Streaming + resume's settings without the continuation: what
		// resuming alone buys (hedgeprobe streaming also differs by its
		// HoldChunks and StallAfter).
		{"hedgeprobe streaming, resume off", fmt.Sprintf("Streaming, MaxAttempts 3, StallTimeout %v + one retry, no resume: streaming + resume without the continuation", stallTimeout),
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst,
				ResumeAfter: hedgeprobe.Off, StallTimeout: stallTimeout}, true},
		// Buffered + resume comes with the earlier stall trigger it can
		// afford (a continuation, not a fresh answer): this row has the
		// trigger without the continuation, so the two gains read apart.
		{"hedgeprobe buffered, StallAfter 2s", fmt.Sprintf("Buffered, StallAfter %v, StallTimeout %v + one retry, no resume: buffered + resume's trigger without the continuation", resumeAfter, stallTimeout),
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst, Delivery: hedgeprobe.Buffered,
				StallAfter: resumeAfter, StallTimeout: stallTimeout, ResumeAfter: hedgeprobe.Off}, true},
		{"hedgeprobe buffered + resume", fmt.Sprintf("Buffered, StallAfter %v (the stall hedge continues the stalled text), StallTimeout %v + one retry", resumeAfter, stallTimeout),
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst, Delivery: hedgeprobe.Buffered,
				StallAfter: resumeAfter, ResumeAfter: resumeAfter, StallTimeout: stallTimeout}, true},
		{"zero-value Config", "hedgeprobe.Config{} with resumable routes: the library's defaults, no retry",
			hedgeprobe.Config{}, false},
		// The defaults in the other delivery mode: a stall before the
		// commit at the end is the stall trigger's (StallAfter's default
		// under Buffered), and its hedge continues the stalled text.
		{"zero-value Config, Buffered", "hedgeprobe.Config{Delivery: Buffered} with resumable routes: the defaults in Buffered mode (StallAfter 2s), no retry",
			hedgeprobe.Config{Delivery: hedgeprobe.Buffered}, false},
		// Whether the zero-value Config's stress tail is its budget: the
		// same defaults with a generous one.
		{"zero-value Config, budget 0.6", "hedgeprobe.Config{HedgeBudget: 0.6, HedgeBurst: 10}: the defaults with a generous budget, no retry",
			hedgeprobe.Config{HedgeBudget: 0.6, HedgeBurst: hedgeBurst}, false},
		// The attempt cap of the previous release: the calls whose two
		// rescues stall too set its p99.9 (docs/design.md §2 rule 1 says
		// why the default is 5 now).
		{"zero-value Config, MaxAttempts 3", "hedgeprobe.Config{MaxAttempts: 3}: the defaults with the previous release's attempt cap, no retry",
			hedgeprobe.Config{MaxAttempts: 3}, false},
		// What the defaults would give at a primary and one rescue per
		// call and a tenth of a hedge per call, the caps the defaults
		// were first sized at (docs/design.md §2 rules 1 and 3 say why
		// they are 5 and 0.3 now).
		{"zero-value Config, MaxAttempts 2, budget 0.1", "hedgeprobe.Config{MaxAttempts: 2, HedgeBudget: 0.1}: the defaults with one rescue per call and a budget of 0.1, no retry",
			hedgeprobe.Config{MaxAttempts: 2, HedgeBudget: 0.1}, false},
		{"zero-value Config, MaxAttempts 2", "hedgeprobe.Config{MaxAttempts: 2}: the defaults with one rescue per call, no retry",
			hedgeprobe.Config{MaxAttempts: 2}, false},
		{"zero-value Config, budget 0.1", "hedgeprobe.Config{HedgeBudget: 0.1}: the defaults with a budget of 0.1, no retry",
			hedgeprobe.Config{HedgeBudget: 0.1}, false},
		// The budget is the knob that trades tail for load: the same
		// buffered prober at the library default and at a generous budget.
		{"hedgeprobe buffered, budget 0.1", "as hedgeprobe buffered with HedgeBudget 0.1 and HedgeBurst 5 (the first release's defaults)",
			hedgeprobe.Config{MaxAttempts: 3, Delivery: hedgeprobe.Buffered, HedgeBudget: 0.1, HedgeBurst: 5,
				StallAfter: stallAfter, StallTimeout: stallTimeout, ResumeAfter: hedgeprobe.Off}, true},
		{"hedgeprobe buffered, budget 0.6", "as hedgeprobe buffered with HedgeBudget 0.6, HedgeBurst 10",
			hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: 0.6, HedgeBurst: hedgeBurst, Delivery: hedgeprobe.Buffered,
				StallAfter: stallAfter, StallTimeout: stallTimeout, ResumeAfter: hedgeprobe.Off}, true},
	}
	for _, pc := range probes {
		st, err := probe(pc.name, pc.desc, pc.cfg, pc.retry)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// HealthStrategies returns the rows of the route-health report
// (docs/design.md §2 rule 11): the zero-value Config and the tuned
// Streaming + resume prober, each with ejection on (the default) and off.
func HealthStrategies() ([]Strategy, error) {
	tuned := tunedResume()
	return probes([]namedConfig{
		{"zero-value Config, no ejection", hedgeprobe.Config{EjectFailures: hedgeprobe.NoEjection}},
		{"zero-value Config, ejection", hedgeprobe.Config{}},
		{"streaming + resume, no ejection", withEject(tuned, hedgeprobe.NoEjection)},
		{"streaming + resume, ejection", tuned},
	})
}

// tunedResume is the Config of the "streaming + resume" rows of the
// route-health and storm reports: the main report's "hedgeprobe streaming
// + resume".
func tunedResume() hedgeprobe.Config {
	return hedgeprobe.Config{MaxAttempts: 3, HedgeBudget: hedgeBudget, HedgeBurst: hedgeBurst,
		ResumeAfter: resumeAfter, StallTimeout: stallTimeout}
}

// namedConfig is a row of a report: a Prober's name and Config.
type namedConfig struct {
	name string
	cfg  hedgeprobe.Config
}

// probes returns a strategy per row, each with its own Prober, and one
// outer retry where the row has a StallTimeout (as the tuned rows have).
func probes(rows []namedConfig) ([]Strategy, error) {
	var out []Strategy
	for _, r := range rows {
		s, err := probe(r.name, "", r.cfg, r.cfg.StallTimeout > 0)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func withEject(c hedgeprobe.Config, n int) hedgeprobe.Config {
	c.EjectFailures = n
	return c
}

// probe returns the strategy of one hedgeprobe Prober with cfg.
func probe(name, desc string, cfg hedgeprobe.Config, retry bool) (Strategy, error) {
	ps := &probeStrategy{retry: retry}
	p, err := hedgeprobe.New(cfg, items, hedgeprobe.OnHedge(ps.onHedge), hedgeprobe.OnThrottle(ps.onThrottle),
		hedgeprobe.OnResume(ps.onResume))
	if err != nil {
		return Strategy{}, fmt.Errorf("%s: %w", name, err)
	}
	ps.p = p
	// Report the config with New's defaults filled in, as the budget
	// assertion needs the real HedgeBudget and HedgeBurst.
	c := p.Config()
	return Strategy{Name: name, Config: desc, Probe: &c, run: ps.call, prober: p, retry: retry}, nil
}

// direct reads one attempt on the primary to its end, no watchdog.
func direct(ctx context.Context, c *call) Result {
	start := time.Now()
	r := Result{TTFT: -1, AnswerTTFT: -1, Attempts: 1}
	src, err := c.open(ctx, Primary)
	if err != nil {
		r.end(start, err)
		return r
	}
	defer src.Close()
	for src.Next() {
		if src.Current().Kind == hedgeprobe.Content {
			r.delivered(start)
		}
	}
	r.end(start, src.Err())
	return r
}

// probeStrategy makes calls through one Prober, several at a time.
type probeStrategy struct {
	p     *hedgeprobe.Prober[Chunk]
	retry bool
}

// tallyKey carries a call's Result in the context it gives Prober.Stream,
// where the hooks find it: the Prober's hooks are shared by the calls in
// flight, and each runs on the goroutine calling its own call's Next or
// Close, so a call's tally needs no lock.
type tallyKey struct{}

func tallyOf(ctx context.Context) *Result { return ctx.Value(tallyKey{}).(*Result) }

func (ps *probeStrategy) onHedge(e hedgeprobe.HedgeEvent) {
	switch e.Trigger {
	case hedgeprobe.TriggerTTFT:
		tallyOf(e.Context).ByTrigger[byTTFT]++
	case hedgeprobe.TriggerStall:
		tallyOf(e.Context).ByTrigger[byStall]++
	case hedgeprobe.TriggerError:
		tallyOf(e.Context).ByTrigger[byError]++
	}
}

func (ps *probeStrategy) onResume(e hedgeprobe.ResumeEvent) {
	if e.Skipped == "" {
		tallyOf(e.Context).ByTrigger[byResume]++
	}
}

func (ps *probeStrategy) onThrottle(e hedgeprobe.ThrottleEvent) {
	if e.Reason == hedgeprobe.ThrottlePushback {
		tallyOf(e.Context).ThrottledPushback++
	}
}

// ErrGarbled fails a call whose stream ended without error but whose
// answer was not the script's content chunks 0…N−1, in order, each once:
// an "ok" that a resume or a hedge spliced wrongly must not count as one.
// It is not transient: no retry hides it.
var ErrGarbled = errors.New("hedgesim: the answer is not chunks 0…N−1 in order, each once")

// call makes the call through a hedgeprobe Stream on (primary,
// secondary). With retry, a transient failure (a watchdog, every attempt
// failed or throttled) is retried once with the routes swapped, as the
// caller's fallback chain would; content already delivered is discarded.
func (ps *probeStrategy) call(ctx context.Context, c *call) Result {
	start := time.Now()
	r := Result{TTFT: -1, AnswerTTFT: -1}
	ctx = context.WithValue(ctx, tallyKey{}, &r)
	p, retry := ps.p, ps.retry
	routes := []hedgeprobe.Route[Chunk]{c.route(Primary), c.route(Secondary)}
	if p.Config().MaxAttempts == 1 {
		routes = routes[:1]
	}
	for try := 0; ; try++ {
		if r.AnswerTTFT >= 0 { // the caller had content: this try starts the answer again
			r.Restarted, r.AnswerTTFT = true, -1
		}
		s := p.Stream(ctx, routes...)
		next, garbled := 0, false // the answer must be chunks 0…N−1, in order
		for s.Next() {
			if s.Current().Kind != hedgeprobe.Content {
				continue
			}
			garbled = garbled || s.Current().Index != next
			next++
			r.delivered(start)
		}
		err := s.Err()
		if err == nil && (garbled || next != c.sc.Chunks) {
			err = ErrGarbled
		}
		s.Close()
		st := s.Stats()
		r.Streams++
		r.Attempts += len(st.Attempts)
		r.Hedges += len(st.Attempts) - 1
		r.Throttled += st.HedgesThrottled
		for _, a := range st.Attempts {
			// A failed stream's chunks are all lost (the call fails, or a
			// retry starts the answer again); otherwise what an attempt
			// received and the caller was not given — a stalled
			// attempt's chunks up to a resume are part of the answer,
			// though it ends canceled.
			if err != nil {
				r.Wasted += a.ContentChunks
			} else {
				r.Wasted += a.ContentChunks - a.ChunksDelivered
			}
		}
		if err == nil {
			r.OK = true
			return r
		}
		if !retry || try == 1 || !hedgeprobe.IsTransient(err) {
			r.end(start, err)
			return r
		}
		// The retry goes to the other route first.
		if len(routes) == 1 {
			routes = []hedgeprobe.Route[Chunk]{c.route(Secondary)}
		} else {
			routes = []hedgeprobe.Route[Chunk]{routes[1], routes[0]}
		}
	}
}
