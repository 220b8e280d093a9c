package hedgesim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Route names of the two scripted upstreams.
const (
	Primary   = "primary"
	Secondary = "secondary"
)

// Scenario is every parameter of the scripted upstreams. The same Scenario
// and Seed give the same call list, draw for draw, whatever the strategy.
type Scenario struct {
	// Seed seeds every draw (math/rand/v2 PCG). Each draw is keyed by
	// (call, route, attempt on that route), so strategies that open
	// different attempts still see the same upstream behaviour for the
	// attempts they share.
	Seed uint64
	// Calls is the number of logical calls each strategy makes.
	Calls int
	// Interarrival starts call n at n × Interarrival, whatever the calls
	// before it do (open loop, as a service's callers arrive), so every
	// strategy makes the same call at the same virtual time: the 5-minute
	// window of an adaptive hedge delay then holds as many samples in
	// every row, and a row that waits out silences does not hedge on a
	// colder sketch than one that cuts them. Zero makes each call start
	// when the one before it ended (closed loop, one caller), where a
	// row's own speed sets how warm its sketch is.
	Interarrival time.Duration

	// TTFTMedian and TTFTSigma shape the lognormal time from an attempt's
	// request to its first content chunk. The median 1.6 s is the users'
	// figure in docs/design.md; sigma 0.5 puts the p95 near 3.6 s.
	TTFTMedian time.Duration
	TTFTSigma  float64
	// HeaderDelay is when response headers (HTTP 200) arrive, before the
	// first token, as with real LLM APIs that flush headers at once and
	// then think. Header-level hedging decides here.
	HeaderDelay time.Duration

	// Chunks is the number of content chunks of a complete stream.
	Chunks int
	// ChunkGap is the mean gap between content chunks; each gap is drawn
	// uniformly in ChunkGap × [1−ChunkJitter, 1+ChunkJitter].
	ChunkGap    time.Duration
	ChunkJitter float64

	// StallShare is the share of attempts whose stream falls silent
	// mid-way, after a number of content chunks drawn uniformly in
	// [StallAfterMin, StallAfterMax], for a lognormal time of median
	// StallMedian and shape StallSigma; then the stream resumes and ends
	// normally. Stalls after the HoldChunks-th chunk hit a committed
	// Streaming call, which no hedge can save.
	StallShare    float64
	StallMedian   time.Duration
	StallSigma    float64
	StallAfterMin int
	StallAfterMax int
	// KeepaliveEvery is the interval of SSE keepalives (": ping") during a
	// silence: the connection is alive, nothing is produced.
	KeepaliveEvery time.Duration

	// FailAfter is how fast an outage 503 or a 429 answers, on average:
	// each answers after a time drawn uniformly in FailAfter × [0.5, 1.5].
	// A fixed time put the errors, Retry-After ends and relaunches of
	// different calls on one grid (calls 6 s apart, errors 50 ms after a
	// launch, Retry-After 2 s), and the events of two calls due at the
	// very same virtual instant run in whatever order the scheduler picks:
	// which of them took the budget's last token changed from run to run.
	// Calls that wait for the same route's pushback to end still wake
	// together, and which of them gets the route's one probe is the
	// scheduler's pick, as it would be on a real clock.
	FailAfter time.Duration
	// OutageRoute fails every attempt with 503 (no Retry-After) for the
	// calls in [OutageFrom, OutageTo) × Calls.
	OutageRoute          string
	OutageFrom, OutageTo float64
	// OutageRetryAfter, when set, is the Retry-After of the outage's 503s.
	OutageRetryAfter time.Duration
	// FlapCalls, when set, makes the outage flap: the route is down for
	// FlapCalls calls, up for the next FlapCalls, and so on (calls start
	// Interarrival apart, so 2 is "down 12 s, up 12 s" at 6 s).
	FlapCalls int
	// During the calls in [StormFrom, StormTo) × Calls each attempt on
	// either route is refused with 429 and Retry-After = RetryAfter with
	// probability StormShare.
	StormFrom, StormTo float64
	StormShare         float64
	RetryAfter         time.Duration
	// StormLimit, when set, makes the storm a rate limit instead of a
	// coin: each route admits at most StormLimit attempts per second of
	// the calls in [StormFrom, StormTo) (a token bucket holding one
	// token), and refuses the rest with 429 and a Retry-After of the wait
	// for its next token, in whole seconds as the header carries it. A
	// refusal takes no token. The storm then grows with the load — every
	// hedge and retry of a storm call is one more attempt the limit
	// counts — and an attempt made before the Retry-After it was given
	// has passed is refused again. StormShare and RetryAfter are unused.
	// Attempts of calls outside the window neither take tokens nor are
	// refused, whenever they run.
	StormLimit float64

	// CallSilenceShare is the share of calls whose every attempt falls
	// silent once (each where and for as long as its own draw says): a
	// silence the request causes, which no route escapes. StallShare's
	// silences are each attempt's own, independent of the call's other
	// attempts — the case most favourable to a hedge or a resume. The
	// sensitivity report moves silences from one to the other.
	CallSilenceShare float64
	// NoContinuation makes every route one that cannot continue a partial
	// answer (Route.Continues false), as the OpenAI API and every SDK
	// adapter left at its default.
	NoContinuation bool
}

// SeedScenario is the seed research's own workload (docs/design.md §6):
// 10 % of streams fall silent once, median 55 s, no outage, no 429 storm;
// 100 content chunks 40 ms apart.
func SeedScenario(calls int) Scenario {
	sc := DefaultScenario(calls)
	sc.Chunks, sc.ChunkGap = 100, 40*time.Millisecond
	sc.StallShare = 0.10
	sc.OutageFrom, sc.OutageTo = 0, 0
	sc.StormFrom, sc.StormTo, sc.StormShare = 0, 0, 0
	return sc
}

// interarrival is the time between two calls' starts: about the length of
// a call without a silence (headers, a 1.6 s median first chunk, 2–4 s of
// chunks), so calls overlap mostly while one waits out a silence — and
// the 5-minute window of the adaptive delay holds 50 calls' samples.
const interarrival = 6 * time.Second

// DefaultScenario is the stall-heavy scenario of the report: 20 % of
// streams fall silent for a median 55 s, a 5 % outage of the primary and a
// 5 % 429 storm on both routes.
func DefaultScenario(calls int) Scenario {
	return Scenario{
		Seed:           20261130,
		Calls:          calls,
		Interarrival:   interarrival,
		TTFTMedian:     1600 * time.Millisecond,
		TTFTSigma:      0.5,
		HeaderDelay:    200 * time.Millisecond,
		Chunks:         200,
		ChunkGap:       20 * time.Millisecond,
		ChunkJitter:    0.5,
		StallShare:     0.20,
		StallMedian:    55 * time.Second,
		StallSigma:     0.6,
		StallAfterMin:  2,
		StallAfterMax:  15,
		KeepaliveEvery: 15 * time.Second,
		FailAfter:      50 * time.Millisecond,
		OutageRoute:    Primary,
		OutageFrom:     0.30,
		OutageTo:       0.35,
		StormFrom:      0.60,
		StormTo:        0.65,
		StormShare:     0.5,
		RetryAfter:     2 * time.Second,
	}
}

// Markdown lists the parameters for the report.
func (sc Scenario) Markdown() string {
	var b strings.Builder
	w := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	b.WriteString("| parameter | value |\n|---|---|\n")
	w("seed", fmt.Sprint(sc.Seed))
	w("calls per strategy", fmt.Sprint(sc.Calls))
	if sc.Interarrival > 0 {
		w("arrivals", fmt.Sprintf("call n starts at n × %v, whatever the calls before it do (open loop)", sc.Interarrival))
	} else {
		w("arrivals", "each call starts when the one before it ended (closed loop)")
	}
	w("TTFT", fmt.Sprintf("lognormal, median %v, sigma %.2g (p95 ≈ %v)", sc.TTFTMedian, sc.TTFTSigma,
		lognormalQuantile(sc.TTFTMedian, sc.TTFTSigma, 1.645).Round(100*time.Millisecond)))
	w("response headers", fmt.Sprintf("at %v (200), before the first token", sc.HeaderDelay))
	w("stream", fmt.Sprintf("%d content chunks, gap %v ± %.0f %%", sc.Chunks, sc.ChunkGap, 100*sc.ChunkJitter))
	w("mid-stream silence", fmt.Sprintf("%.0f %% of attempts, after chunk %d–%d, lognormal median %v sigma %.2g, keepalive every %v",
		100*sc.StallShare, sc.StallAfterMin, sc.StallAfterMax, sc.StallMedian, sc.StallSigma, sc.KeepaliveEvery))
	if sc.OutageTo > sc.OutageFrom {
		w("outage", fmt.Sprintf("route %s answers 503 in %v ± 50 %% for calls %.0f–%.0f %%", sc.OutageRoute, sc.FailAfter, 100*sc.OutageFrom, 100*sc.OutageTo))
	} else {
		w("outage", "none")
	}
	if sc.StormTo > sc.StormFrom && sc.StormLimit > 0 {
		w("429 storm", fmt.Sprintf("both routes limited to one attempt every %v of the calls %.0f–%.0f %% (a token bucket of one); the rest answer 429 in %v ± 50 %% with Retry-After the wait for the next token, in whole seconds",
			time.Duration(float64(time.Second)/sc.StormLimit), 100*sc.StormFrom, 100*sc.StormTo, sc.FailAfter))
	} else if sc.StormTo > sc.StormFrom && sc.StormShare > 0 {
		w("429 storm", fmt.Sprintf("both routes, %.0f %% of attempts answer 429 (Retry-After %v) in %v ± 50 %% for calls %.0f–%.0f %%",
			100*sc.StormShare, sc.RetryAfter, sc.FailAfter, 100*sc.StormFrom, 100*sc.StormTo))
	} else {
		w("429 storm", "none")
	}
	if sc.CallSilenceShare > 0 {
		w("the call's own silence", fmt.Sprintf("in %.0f %% of calls every attempt falls silent once, where and for as long as its own draw says", 100*sc.CallSilenceShare))
	}
	if sc.NoContinuation {
		w("routes", "primary, secondary: independent draws per call × route × attempt; neither can continue a partial answer")
	} else {
		w("routes", "primary, secondary: independent draws per call × route × attempt; both continue a partial answer")
	}
	return b.String()
}

func lognormalQuantile(median time.Duration, sigma, z float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(sigma*z))
}

// draw is what one attempt on one route does.
type draw struct {
	status     int           // 200, 429 or 503
	retryAfter time.Duration // on 429
	ttft       time.Duration // request → first content chunk (≥ HeaderDelay)
	failAfter  time.Duration // request → error status, when status is not 200
	stallAt    int           // content chunks before the silence; -1: none
	stall      time.Duration
	gapSeed    uint64 // seeds the chunk-gap jitter of this attempt
}

// draw returns the behaviour of attempt k on route for call. With faults
// false it is the same attempt without silence, outage or storm: the
// oracle's upstream.
func (sc *Scenario) draw(call int, route string, k int, faults bool) draw {
	r := 0
	if route == Secondary {
		r = 1
	}
	// One stream per (call, route, k): independent of the order in which
	// strategies ask, so every strategy sees the same call list.
	rng := rand.New(rand.NewPCG(sc.Seed, uint64(call)<<16|uint64(r)<<8|uint64(k)))
	d := draw{status: 200, stallAt: -1}
	d.ttft = max(lognormalDraw(rng, sc.TTFTMedian, sc.TTFTSigma), sc.HeaderDelay)
	stalled := rng.Float64() < sc.StallShare
	stallAt := sc.StallAfterMin + rng.IntN(sc.StallAfterMax-sc.StallAfterMin+1)
	stall := lognormalDraw(rng, sc.StallMedian, sc.StallSigma)
	storm := rng.Float64() < sc.StormShare
	d.gapSeed = rng.Uint64()
	// Drawn last, so that every draw before it is what it was before
	// error times were drawn.
	d.failAfter = time.Duration(float64(sc.FailAfter) * (0.5 + rng.Float64()))
	if !faults {
		return d
	}
	if sc.CallSilenceShare > 0 {
		// One draw per call, on a stream of its own, so that the
		// attempts' draws above stay what they are without it.
		crng := rand.New(rand.NewPCG(sc.Seed^callSilenceStream, uint64(call)))
		stalled = stalled || crng.Float64() < sc.CallSilenceShare
	}
	if stalled {
		d.stallAt, d.stall = stallAt, stall
	}
	pos := float64(call) / float64(max(sc.Calls, 1))
	switch {
	case route == sc.OutageRoute && pos >= sc.OutageFrom && pos < sc.OutageTo && sc.down(call):
		d.status, d.retryAfter = 503, sc.OutageRetryAfter
	case storm && sc.StormLimit <= 0 && sc.inStorm(call):
		d.status, d.retryAfter = 429, sc.RetryAfter
	}
	return d
}

// inStorm reports whether call is one of the storm's.
func (sc *Scenario) inStorm(call int) bool {
	pos := float64(call) / float64(max(sc.Calls, 1))
	return sc.StormTo > sc.StormFrom && pos >= sc.StormFrom && pos < sc.StormTo
}

// storm is one strategy's view of the 429 storm, shared by its calls:
// it counts the 429s its attempts were answered and, when the storm is a
// rate limit (Scenario.StormLimit), holds both routes' token buckets.
type storm struct {
	sc       *Scenario
	interval time.Duration // between two tokens; 0: the storm is a coin

	mu      sync.Mutex
	next    [2]time.Time // when each route's bucket next holds a token
	refused int          // attempts answered 429
}

func newStorm(sc *Scenario) *storm {
	st := &storm{sc: sc}
	if sc.StormLimit > 0 {
		st.interval = time.Duration(float64(time.Second) / sc.StormLimit)
	}
	return st
}

// answer returns what attempt d of call on route r, made at now, is
// answered: d, or a 429 when the rate limit has no token for it, whose
// Retry-After is the wait for the next token, rounded up to a whole
// second. A refusal takes no token.
func (st *storm) answer(call, r int, d draw, now time.Time) draw {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.interval > 0 && d.status == 200 && st.sc.inStorm(call) {
		if wait := st.next[r].Sub(now); wait > 0 {
			d.status, d.retryAfter = 429, (wait + time.Second - 1).Truncate(time.Second)
		} else {
			st.next[r] = now.Add(st.interval)
		}
	}
	if d.status == 429 {
		st.refused++
	}
	return d
}

// Refused returns the number of attempts answered 429 so far.
func (st *storm) Refused() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.refused
}

// callSilenceStream tells the per-call draw of CallSilenceShare from the
// attempts' draws, which are seeded with the scenario's seed as it is.
const callSilenceStream = 0x5ca11

// down reports whether the outage route is down for call, in the outage
// window: always, or every other FlapCalls calls.
func (sc *Scenario) down(call int) bool {
	if sc.FlapCalls <= 0 {
		return true
	}
	first := int(sc.OutageFrom * float64(sc.Calls))
	return ((call-first)/sc.FlapCalls)%2 == 0
}

func lognormalDraw(rng *rand.Rand, median time.Duration, sigma float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64()))
}
