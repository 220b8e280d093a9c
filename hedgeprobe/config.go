package hedgeprobe

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Delivery says when an attempt commits, that is when its output is first
// delivered to the caller (docs/design.md §2 rule 4).
type Delivery uint8

const (
	// Streaming commits an attempt at its first content chunk, or at its
	// HoldChunks-th content chunk when HoldChunks > 1, or at its end when it
	// ends earlier. The default.
	Streaming Delivery = iota
	// Buffered commits the first attempt that completes (FIRST_COMPLETED):
	// the caller receives nothing until then, and the stall trigger
	// (StallAfter, 2s by default here) covers the whole stream. For agent
	// and batch pipelines.
	Buffered
)

// String returns "streaming" or "buffered".
func (d Delivery) String() string {
	switch d {
	case Streaming:
		return "streaming"
	case Buffered:
		return "buffered"
	default:
		return "delivery(" + strconv.Itoa(int(d)) + ")"
	}
}

// MarshalText implements encoding.TextMarshaler.
func (d Delivery) MarshalText() ([]byte, error) {
	if d > Buffered {
		return nil, fmt.Errorf("hedgeprobe: unknown delivery %d", d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText parses "streaming" or "buffered" (case-insensitive).
func (d *Delivery) UnmarshalText(b []byte) error {
	switch strings.ToLower(strings.TrimSpace(string(b))) {
	case "streaming", "":
		*d = Streaming
	case "buffered":
		*d = Buffered
	default:
		return fmt.Errorf("hedgeprobe: delivery %q: want \"streaming\" or \"buffered\"", b)
	}
	return nil
}

// MaxAttemptsLimit is the ceiling MaxAttempts is clamped to, as gRPC does.
const MaxAttemptsLimit = 5

// Off, in a duration field whose zero value means a default that is on
// (ResumeAfter; StallAfter under Buffered or HoldChunks), turns the
// feature off. Any negative value does.
const Off time.Duration = -1

// NoEjection, in EjectFailures, turns route ejection off.
const NoEjection = -1

// Defaults applied by New to zero fields of Config.
const (
	DefaultHedgeQuantile    = 0.95
	DefaultHedgeMinDelay    = 100 * time.Millisecond
	DefaultHedgeMaxDelay    = 10 * time.Second
	DefaultHedgeWindow      = 5 * time.Minute
	DefaultHedgeWarmup      = 20
	DefaultMaxAttempts      = 5
	DefaultHedgeBudget      = 0.3
	DefaultHedgeBurst       = 10
	DefaultResumeAfter      = 2 * time.Second
	DefaultStallAfter       = 2 * time.Second // under Buffered or HoldChunks > 1
	DefaultResumeMaxText    = 256 << 10
	DefaultResumeRefusedFor = 10 * time.Minute
	DefaultEjectFailures    = 3
	DefaultEjectBase        = 10 * time.Second
	DefaultEjectMax         = 5 * time.Minute
)

// Config is the policy of a Prober. The zero value is usable: a zero field
// is read from the environment variable named in its comment when that is
// set (a value set in code wins over the environment, the OpenTelemetry
// convention), else takes the default named in its comment. New copies it;
// changing a Config after New has no effect on the Prober.
type Config struct {
	// HedgeAfter is a fixed hedge delay: the TTFT trigger launches the next
	// attempt when no live attempt has produced a content chunk this long
	// after the latest launch. Zero (the default) means adaptive: the
	// HedgeQuantile of recent attempt TTFTs of the route × model, clamped
	// to [HedgeMinDelay, HedgeMaxDelay]: the recent TTFT that the next one
	// exceeds with probability nearest 1 − HedgeQuantile, so that about
	// that share of attempts is hedged on few samples too (at p95, the
	// largest of up to 29 samples). Env HEDGE__AFTER_S.
	HedgeAfter time.Duration
	// HedgeQuantile is the quantile of the adaptive delay, in (0, 1):
	// about 1 − HedgeQuantile of attempts wait past it and are hedged.
	// Default 0.95 (Tail at Scale: about 5 % extra attempts). Lower hedges
	// more often and cuts the tail harder.
	HedgeQuantile float64
	// HedgeMinDelay is the lowest adaptive delay. Default 100ms, or
	// HedgeMaxDelay when that is set lower.
	HedgeMinDelay time.Duration
	// HedgeMaxDelay is the highest adaptive delay, and the delay used
	// during warm-up, while a route × model has fewer than HedgeWarmup
	// samples in its window. Default 10s, or HedgeMinDelay when that is set
	// higher.
	HedgeMaxDelay time.Duration
	// HedgeWindow is the sliding window of TTFT samples behind the adaptive
	// delay; samples older than the window are forgotten, in four steps of
	// a quarter window each. Default 5m.
	HedgeWindow time.Duration
	// HedgeWarmup is the number of samples a route × model needs in its
	// window before its quantile is trusted. Default 20.
	HedgeWarmup int
	// StallAfter arms the stall trigger: while no attempt is committed,
	// when the live attempt whose content came last (after the latest
	// launch) has produced none for this long, a hedge launches (a resume
	// of that attempt's text when resume is possible, else a fresh
	// attempt). It matters where an attempt is not committed at its first
	// chunk — Buffered, or HoldChunks > 1 — and there it is what rescues a
	// silence without losing the stream's text (resume needs a commit;
	// StallTimeout fails the attempt): zero means 2s there — half of
	// StallTimeout when that is set to 2s or less —, off under plain
	// Streaming. Off (any negative value) disables it. Env
	// HEDGE__STALL_AFTER_S ("0" disables).
	StallAfter time.Duration
	// ResumeAfter arms resume after commit (docs/design.md §2 rule 10):
	// when the committed stream has produced no content for this long
	// while the caller waits in Next, a resume attempt continues the
	// delivered text on the next route that can (Route.Continues) and races
	// the stalled stream; the first to deliver its next content chunk
	// wins, or the stalled stream by ending (a control item it sends
	// meanwhile waits for the decision, and is dropped if the
	// continuation wins). It counts like
	// StallTimeout (only the caller's waits, summed since the latest
	// content chunk), from the latest content chunk or resume launch, so a
	// resume that is silent too is resumed in turn. A resume that fails
	// with a transient error while the stream it races is still silent,
	// and no other resume races, is followed by the next at once on
	// another route (the caller has waited ResumeAfter already); with no
	// other route, or no budget, the cadence stays.
	// It must be below StallTimeout when both are set: the watchdog is the
	// last resort. It has effect only when Items.Text is set and a route
	// Continues. Default 2s — half of StallTimeout when that is set to 2s
	// or less (Off when StallTimeout is 1ns: no room below it); Off (any
	// negative value) disables it. Env
	// HEDGE__RESUME_AFTER_S ("0" disables).
	ResumeAfter time.Duration
	// ResumeMaxText bounds, in bytes, the delivered text a call keeps in
	// memory for a resume; past it the call is not resumed. Default 256 KiB.
	ResumeMaxText int
	// ResumeRefusedFor is how long a route that refused a continuation (a
	// fatal error on a resume attempt, such as a 400 on prefill) is not
	// asked to resume again. Default 10m.
	ResumeRefusedFor time.Duration
	// TTFTTimeout fails the call with a TTFT TimeoutError when no attempt
	// has produced a content chunk this long after the call started
	// (docs/design.md §2 rule 6): content from an attempt that later failed or
	// stalled counts too. Zero (the default) disables it. Env
	// STREAM__TTFT_TIMEOUT_S. Like StallTimeout and Close, it is as
	// timely as the routes' Open and Source honour their context and
	// Close: the call ends once every attempt has returned.
	TTFTTimeout time.Duration
	// StallTimeout fails the call with a stall TimeoutError when the
	// committed stream produces no content chunk for this long while the
	// caller waits in Next: only time spent inside Next counts, summed
	// since the latest content chunk. The time the caller spends between
	// Next calls, on any item, does not count (a slow consumer is not a
	// stalled upstream), and keepalive and control items do not reset the
	// sum. Before commit it fails an attempt whose content stopped this
	// long (the caller is not involved yet), which counts as a transient
	// error. The first chunk is exempt. Zero (the default) disables it. Env
	// STREAM__STALL_TIMEOUT_S. It is as timely as TTFTTimeout (see there).
	StallTimeout time.Duration
	// MaxAttempts caps attempts per call, primary, hedges and resumes
	// included. Default 5, the most gRPC allows: a stream's continuation
	// may stall as well, and a call whose cap was spent waits its silence
	// out (at 3, such calls set the p99.9 of the simulated seed's workload:
	// 103.6 s against 17.0 s at 5). HedgeBudget, not this cap, bounds the
	// load. Values above 5 are clamped to 5; 1 disables hedging and resume.
	MaxAttempts int
	// HedgeBudget is the number of hedge tokens each call adds to the
	// Prober's bucket; every hedge and every resume takes one token.
	// Default 0.3: it must cover the calls that need a rescue (4.4 %
	// TTFT hedges at the adaptive p95 delay in the simulation of the
	// seed's workload, plus a resume or two for each stream that falls
	// silent, 10 % there: 0.192 extra attempts per call in all), and it
	// keeps extra attempts below a third of calls, so an outage cannot
	// double the load. As everywhere in Config, 0 means the default;
	// MaxAttempts 1 turns hedging off.
	HedgeBudget float64
	// HedgeBurst is the bucket's capacity, and its content when the Prober
	// is new. Default 10; at least 1 (New refuses a burst between 0 and 1,
	// which could never launch a hedge).
	// A TTFT hedge launches only while the bucket holds, besides its own
	// token, the whole tokens of half of it (5 of 10, so it needs 6; with
	// a burst of 2, a full bucket): the last tokens are kept for resumes,
	// stall hedges and error relaunches, whose calls would otherwise wait
	// out a silence or fail.
	HedgeBurst float64
	// Delivery is when an attempt commits. Default Streaming.
	Delivery Delivery
	// HoldChunks, with Streaming, holds an attempt's first HoldChunks
	// content chunks back and commits at the HoldChunks-th, so a stall in
	// the first few chunks can still be hedged. 0 and 1 commit at the first
	// content chunk. An attempt that ends cleanly earlier commits at its end.
	// Under Buffered, which commits at an attempt's end, it has no effect.
	HoldChunks int
	// EjectFailures is the number of consecutive transient failures of
	// attempts on a route (errors, TTFT and stall timeouts; never a
	// loser's cancellation or a refused continuation) that ejects it
	// (docs/design.md §2 rule 11): calls then start on the next healthy
	// route and hedges skip it, for EjectBase × its consecutive ejection
	// count, at most EjectMax; then one call probes it. Default 3;
	// NoEjection (-1) turns ejection off (a Retry-After then only keeps
	// hedges away, as pushback). Env ROUTE__EJECT_FAILURES.
	EjectFailures int
	// EjectBase is the first ejection's length. Default 10s, or EjectMax
	// when that is set lower. Env ROUTE__EJECT_BASE_S.
	EjectBase time.Duration
	// EjectMax caps the length of an ejection for failures (a Retry-After
	// ejects until its time, however far). Default 5m, or EjectBase when
	// that is set higher. Env ROUTE__EJECT_MAX_S.
	EjectMax time.Duration
	// PushbackWait lets a call wait for a route's Retry-After, as an
	// SDK's own retry of a 429 would, instead of failing. When an attempt
	// fails with a transient error before commit, no other attempt is
	// live, and every route refuses the relaunch (its Retry-After or its
	// ejection, docs/design.md §2 rule 3), the call waits for the first
	// route's refusal to end and relaunches there, if that comes within
	// PushbackWait of the failure; refused again at that end (another
	// call took the route), it waits again, within the same bound. It
	// does not wait when the relaunch could not start before the
	// context's deadline or, before any content, TTFTTimeout, or when
	// another call's probe holds every route (no end is known): the
	// failure then ends the call. Each failure starts its own bound. The
	// relaunch takes a budget token and an attempt as any other; the
	// budget may still refuse it at the end. Zero (the default) ends the
	// call at once: the caller's retry decides. docs/performance.md
	// measures what 20s buys under a rate limit: fewer calls failed on a
	// 429, and fewer resumes, as the relaunches take the budget's tokens.
	PushbackWait time.Duration
}

// Validate reports every invalid field of c (joined with errors.Join),
// each naming the field and echoing the value. Zero fields are valid: they
// take their defaults.
func (c *Config) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: a nil *Config", ErrInvalidConfig)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HedgeAfter", c.HedgeAfter},
		{"HedgeMinDelay", c.HedgeMinDelay},
		{"HedgeMaxDelay", c.HedgeMaxDelay},
		{"HedgeWindow", c.HedgeWindow},
		{"TTFTTimeout", c.TTFTTimeout},
		{"StallTimeout", c.StallTimeout},
		{"ResumeRefusedFor", c.ResumeRefusedFor},
		{"EjectBase", c.EjectBase},
		{"EjectMax", c.EjectMax},
		{"PushbackWait", c.PushbackWait},
	} {
		if d.v < 0 {
			bad("%s = %v: must not be negative", d.name, d.v)
		}
	}
	if math.IsNaN(c.HedgeQuantile) || c.HedgeQuantile < 0 || c.HedgeQuantile >= 1 {
		bad("HedgeQuantile = %v: must be in (0, 1), or 0 for the default %v", c.HedgeQuantile, DefaultHedgeQuantile)
	}
	if c.HedgeWarmup < 0 {
		bad("HedgeWarmup = %d: must not be negative", c.HedgeWarmup)
	}
	if c.MaxAttempts < 0 {
		bad("MaxAttempts = %d: must be at least 1 (values above %d are clamped to %d), or 0 for the default %d",
			c.MaxAttempts, MaxAttemptsLimit, MaxAttemptsLimit, DefaultMaxAttempts)
	}
	if math.IsNaN(c.HedgeBudget) || math.IsInf(c.HedgeBudget, 0) || c.HedgeBudget < 0 {
		bad("HedgeBudget = %v: must be a finite number >= 0", c.HedgeBudget)
	}
	switch {
	case math.IsNaN(c.HedgeBurst) || math.IsInf(c.HedgeBurst, 0) || c.HedgeBurst < 0:
		bad("HedgeBurst = %v: must be a finite number >= 0", c.HedgeBurst)
	case c.HedgeBurst > 0 && c.HedgeBurst < 1:
		// A bucket that cannot hold a whole token never launches a
		// hedge or a resume: hedging off, said another way, and likely
		// a burst mistaken for a rate (HedgeBudget).
		bad("HedgeBurst = %v: must be at least 1 (a bucket below one token launches no hedge and no resume; MaxAttempts 1 turns hedging off), or 0 for the default %v",
			c.HedgeBurst, float64(DefaultHedgeBurst))
	}
	if c.Delivery > Buffered {
		bad("Delivery = %d: must be Streaming or Buffered", c.Delivery)
	}
	if c.HoldChunks < 0 {
		bad("HoldChunks = %d: must not be negative", c.HoldChunks)
	}
	if c.ResumeMaxText < 0 {
		bad("ResumeMaxText = %d: must not be negative", c.ResumeMaxText)
	}
	if c.EjectFailures < NoEjection {
		bad("EjectFailures = %d: must be at least 1, 0 for the default %d, or NoEjection (-1)", c.EjectFailures, DefaultEjectFailures)
	}
	// The relations between fields, each judged only when its own fields
	// are valid, so that every invalid field is reported at once.
	d := c.withDefaults()
	if c.HedgeMinDelay >= 0 && c.HedgeMaxDelay >= 0 && d.HedgeMinDelay > d.HedgeMaxDelay {
		bad("HedgeMinDelay = %v is above HedgeMaxDelay = %v", d.HedgeMinDelay, d.HedgeMaxDelay)
	}
	if c.EjectBase >= 0 && c.EjectMax >= 0 && d.EjectBase > d.EjectMax {
		bad("EjectBase = %v is above EjectMax = %v", d.EjectBase, d.EjectMax)
	}
	// The watchdog is the last resort: a resume due after it could never
	// launch.
	if c.StallTimeout >= 0 && d.ResumeAfter > 0 && d.StallTimeout > 0 && d.ResumeAfter >= d.StallTimeout {
		bad("ResumeAfter = %v must be below StallTimeout = %v (or Off)", d.ResumeAfter, d.StallTimeout)
	}
	return errors.Join(errs...)
}

// belowWatchdog is a default delay def that must come before the stall
// watchdog: def, or half of a StallTimeout at or below it (the watchdog
// wins, and the delay waits half of it) — Off where no room is left
// (StallTimeout 1ns), since 0 would read as "the default".
func belowWatchdog(def, stallTimeout time.Duration) time.Duration {
	if stallTimeout <= 0 || def < stallTimeout {
		return def
	}
	if d := stallTimeout / 2; d > 0 {
		return d
	}
	return Off
}

// withDefaults returns c with every zero field set to its default and
// MaxAttempts clamped.
func (c Config) withDefaults() Config {
	if c.HedgeQuantile == 0 {
		c.HedgeQuantile = DefaultHedgeQuantile
	}
	if c.HedgeMinDelay == 0 {
		c.HedgeMinDelay = min(DefaultHedgeMinDelay, max(c.HedgeMaxDelay, 1))
		if c.HedgeMaxDelay == 0 {
			c.HedgeMinDelay = DefaultHedgeMinDelay
		}
	}
	if c.HedgeMaxDelay == 0 {
		c.HedgeMaxDelay = max(DefaultHedgeMaxDelay, c.HedgeMinDelay)
	}
	if c.HedgeWindow == 0 {
		c.HedgeWindow = DefaultHedgeWindow
	}
	if c.HedgeWarmup == 0 {
		c.HedgeWarmup = DefaultHedgeWarmup
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	c.MaxAttempts = min(c.MaxAttempts, MaxAttemptsLimit)
	if c.HedgeBudget == 0 {
		c.HedgeBudget = DefaultHedgeBudget
	}
	if c.HedgeBurst == 0 {
		c.HedgeBurst = DefaultHedgeBurst
	}
	switch {
	case c.StallAfter == 0 && (c.Delivery == Buffered || c.HoldChunks > 1):
		// Without it a silence before commit is waited out: under
		// Buffered, the whole stream. At or past StallTimeout the watchdog
		// would fail the attempt first, and the hedge would start afresh.
		c.StallAfter = belowWatchdog(DefaultStallAfter, c.StallTimeout)
	case c.StallAfter < 0:
		c.StallAfter = Off
	}
	switch {
	case c.ResumeAfter == 0:
		// A StallTimeout at or below the default would make the default
		// invalid: the watchdog is the last resort.
		c.ResumeAfter = belowWatchdog(DefaultResumeAfter, c.StallTimeout)
	case c.ResumeAfter < 0:
		c.ResumeAfter = Off
	}
	if c.ResumeMaxText == 0 {
		c.ResumeMaxText = DefaultResumeMaxText
	}
	if c.ResumeRefusedFor == 0 {
		c.ResumeRefusedFor = DefaultResumeRefusedFor
	}
	if c.EjectFailures == 0 {
		c.EjectFailures = DefaultEjectFailures
	}
	if c.EjectBase == 0 {
		c.EjectBase = min(DefaultEjectBase, max(c.EjectMax, 1))
		if c.EjectMax == 0 {
			c.EjectBase = DefaultEjectBase
		}
	}
	if c.EjectMax == 0 {
		c.EjectMax = max(DefaultEjectMax, c.EjectBase)
	}
	return c
}
