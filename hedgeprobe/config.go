package hedgeprobe

import (
	"errors"
	"fmt"
	"math"
	"os"
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
	// the caller receives nothing until then, and the stall trigger covers
	// the whole stream. For agent and batch pipelines.
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

// Defaults applied by New to zero fields of Config.
const (
	DefaultHedgeQuantile = 0.95
	DefaultHedgeMinDelay = 100 * time.Millisecond
	DefaultHedgeMaxDelay = 10 * time.Second
	DefaultHedgeWindow   = 5 * time.Minute
	DefaultHedgeWarmup   = 20
	DefaultMaxAttempts   = 2
	DefaultHedgeBudget   = 0.1
	DefaultHedgeBurst    = 5
)

// Config is the policy of a Prober. The zero value is usable: every zero
// field takes the default named in its comment. New copies it; changing a
// Config after New has no effect on the Prober.
type Config struct {
	// HedgeAfter is a fixed hedge delay: the TTFT trigger launches the next
	// attempt when no live attempt has produced a content chunk this long
	// after the latest launch. Zero (the default) means adaptive: the
	// HedgeQuantile of recent attempt TTFTs of the route × model, clamped
	// to [HedgeMinDelay, HedgeMaxDelay].
	HedgeAfter time.Duration
	// HedgeQuantile is the quantile of the adaptive delay, in (0, 1).
	// Default 0.95 (Tail at Scale: about 5 % extra attempts). Lower hedges
	// more often and cuts the tail harder.
	HedgeQuantile float64
	// HedgeMinDelay is the lowest adaptive delay. Default 100ms.
	HedgeMinDelay time.Duration
	// HedgeMaxDelay is the highest adaptive delay, and the delay used
	// during warm-up, while a route × model has fewer than HedgeWarmup
	// samples in its window. Default 10s.
	HedgeMaxDelay time.Duration
	// HedgeWindow is the sliding window of TTFT samples behind the adaptive
	// delay; samples older than the window are forgotten, in four steps of
	// a quarter window each. Default 5m.
	HedgeWindow time.Duration
	// HedgeWarmup is the number of samples a route × model needs in its
	// window before its quantile is trusted. Default 20.
	HedgeWarmup int
	// StallAfter arms the stall trigger: while no attempt is committed, the
	// newest live attempt has produced content and then no content for this
	// long launches a hedge. It matters with Buffered or HoldChunks > 1.
	// Zero (the default) disables the stall trigger.
	StallAfter time.Duration
	// TTFTTimeout fails the call with a TTFT TimeoutError when no attempt
	// has produced a content chunk this long after the call started
	// (docs/design.md §2 rule 6): content from an attempt that later failed or
	// stalled counts too. Zero (the default) disables it.
	TTFTTimeout time.Duration
	// StallTimeout fails the call with a stall TimeoutError when the
	// committed stream produces no content chunk for this long while the
	// caller waits in Next: only time spent inside Next counts, summed
	// since the latest content chunk. The time the caller spends between
	// Next calls, on any item, does not count (a slow consumer is not a
	// stalled upstream), and keepalive and control items do not reset the
	// sum. Before commit it fails an attempt whose content stopped this
	// long (the caller is not involved yet), which counts as a transient
	// error. The first chunk is exempt. Zero (the default) disables it.
	StallTimeout time.Duration
	// MaxAttempts caps attempts per call, primary included. Default 2;
	// values above 5 are clamped to 5; 1 disables hedging.
	MaxAttempts int
	// HedgeBudget is the number of hedge tokens each call adds to the
	// Prober's bucket; every hedge takes one token. Default 0.1, so hedges
	// stay near 10 % of calls and an outage cannot double the load.
	HedgeBudget float64
	// HedgeBurst is the bucket's capacity, and its content when the Prober
	// is new. Default 5. It must be at least 1 for any hedge to launch.
	HedgeBurst float64
	// Delivery is when an attempt commits. Default Streaming.
	Delivery Delivery
	// HoldChunks, with Streaming, holds an attempt's first HoldChunks
	// content chunks back and commits at the HoldChunks-th, so a stall in
	// the first few chunks can still be hedged. 0 and 1 commit at the first
	// content chunk. An attempt that ends cleanly earlier commits at its end.
	HoldChunks int
}

// Environment variables read by ApplyEnv, names from the seed research.
// Values are seconds as a decimal number ("2.5") or a Go duration ("2500ms").
const (
	EnvHedgeAfter   = "HEDGE__AFTER_S"
	EnvStallAfter   = "HEDGE__STALL_AFTER_S"
	EnvTTFTTimeout  = "STREAM__TTFT_TIMEOUT_S"
	EnvStallTimeout = "STREAM__STALL_TIMEOUT_S"
)

// ErrInvalidConfig is wrapped by every error of Validate and New.
var ErrInvalidConfig = errors.New("hedgeprobe: invalid config")

// ConfigFromEnv returns a zero Config with ApplyEnv applied.
func ConfigFromEnv() (Config, error) {
	var c Config
	err := c.ApplyEnv()
	return c, err
}

// ApplyEnv sets HedgeAfter, StallAfter, TTFTTimeout and StallTimeout from
// HEDGE__AFTER_S, HEDGE__STALL_AFTER_S, STREAM__TTFT_TIMEOUT_S and
// STREAM__STALL_TIMEOUT_S when they are set and not empty; the environment
// wins over the values already in c. "0" disables a timeout or trigger
// (and makes the hedge delay adaptive). A malformed or negative value is an
// error naming the variable, and leaves c unchanged.
func (c *Config) ApplyEnv() error {
	next := *c
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{
		{EnvHedgeAfter, &next.HedgeAfter},
		{EnvStallAfter, &next.StallAfter},
		{EnvTTFTTimeout, &next.TTFTTimeout},
		{EnvStallTimeout, &next.StallTimeout},
	} {
		s, ok := os.LookupEnv(v.name)
		if !ok || strings.TrimSpace(s) == "" {
			continue
		}
		d, err := parseSeconds(s)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, v.name, s, err)
		}
		*v.dst = d
	}
	*c = next
	return nil
}

func parseSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt64/float64(time.Second) {
			return 0, errors.New("want seconds")
		}
		d = time.Duration(f * float64(time.Second))
	} else {
		d, err = time.ParseDuration(s)
		if err != nil {
			return 0, errors.New("want seconds such as 2.5 or a duration such as 2500ms")
		}
	}
	if d < 0 {
		return 0, errors.New("must not be negative")
	}
	return d, nil
}

// Validate reports the first invalid field of c, naming it and echoing
// the value. Zero fields are valid: they take their defaults.
func (c *Config) Validate() error {
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"HedgeAfter", c.HedgeAfter},
		{"HedgeMinDelay", c.HedgeMinDelay},
		{"HedgeMaxDelay", c.HedgeMaxDelay},
		{"HedgeWindow", c.HedgeWindow},
		{"StallAfter", c.StallAfter},
		{"TTFTTimeout", c.TTFTTimeout},
		{"StallTimeout", c.StallTimeout},
	}
	for _, d := range durations {
		if d.v < 0 {
			return fmt.Errorf("%w: %s = %v: must not be negative", ErrInvalidConfig, d.name, d.v)
		}
	}
	if math.IsNaN(c.HedgeQuantile) || c.HedgeQuantile < 0 || c.HedgeQuantile >= 1 {
		return fmt.Errorf("%w: HedgeQuantile = %v: must be in (0, 1), or 0 for the default %v", ErrInvalidConfig, c.HedgeQuantile, DefaultHedgeQuantile)
	}
	if c.HedgeWarmup < 0 {
		return fmt.Errorf("%w: HedgeWarmup = %d: must not be negative", ErrInvalidConfig, c.HedgeWarmup)
	}
	if c.MaxAttempts < 0 {
		return fmt.Errorf("%w: MaxAttempts = %d: must be 1 to %d, or 0 for the default %d", ErrInvalidConfig, c.MaxAttempts, MaxAttemptsLimit, DefaultMaxAttempts)
	}
	if math.IsNaN(c.HedgeBudget) || math.IsInf(c.HedgeBudget, 0) || c.HedgeBudget < 0 {
		return fmt.Errorf("%w: HedgeBudget = %v: must be a finite number >= 0", ErrInvalidConfig, c.HedgeBudget)
	}
	if math.IsNaN(c.HedgeBurst) || math.IsInf(c.HedgeBurst, 0) || c.HedgeBurst < 0 {
		return fmt.Errorf("%w: HedgeBurst = %v: must be a finite number >= 0", ErrInvalidConfig, c.HedgeBurst)
	}
	if c.Delivery > Buffered {
		return fmt.Errorf("%w: Delivery = %d: must be Streaming or Buffered", ErrInvalidConfig, c.Delivery)
	}
	if c.HoldChunks < 0 {
		return fmt.Errorf("%w: HoldChunks = %d: must not be negative", ErrInvalidConfig, c.HoldChunks)
	}
	d := c.withDefaults()
	if d.HedgeMinDelay > d.HedgeMaxDelay {
		return fmt.Errorf("%w: HedgeMinDelay = %v is above HedgeMaxDelay = %v", ErrInvalidConfig, d.HedgeMinDelay, d.HedgeMaxDelay)
	}
	return nil
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
	return c
}
