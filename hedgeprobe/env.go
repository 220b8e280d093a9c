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

// Environment variables New reads for fields left zero (docs/design.md §2
// rule 9 gives the names and their origin). Durations are seconds as a decimal number
// ("2.5") or a Go duration ("2500ms"). "0" is off for the watchdogs,
// StallAfter and ResumeAfter (whose zero is otherwise a 2s default); the
// adaptive delay for HedgeAfter; the defaults for EjectBase and EjectMax.
const (
	EnvHedgeAfter    = "HEDGE__AFTER_S"
	EnvStallAfter    = "HEDGE__STALL_AFTER_S"
	EnvResumeAfter   = "HEDGE__RESUME_AFTER_S"
	EnvTTFTTimeout   = "STREAM__TTFT_TIMEOUT_S"
	EnvStallTimeout  = "STREAM__STALL_TIMEOUT_S"
	EnvEjectFailures = "ROUTE__EJECT_FAILURES"
	EnvEjectBase     = "ROUTE__EJECT_BASE_S"
	EnvEjectMax      = "ROUTE__EJECT_MAX_S"
)

// ErrInvalidConfig is wrapped by every error of Validate and New.
var ErrInvalidConfig = errors.New("hedgeprobe: invalid config")

// fillFromEnv sets each zero field that has an environment variable from
// it, when the variable is set and not empty, and returns what it set
// ("HEDGE__AFTER_S=2 (HedgeAfter)"), so that an error of Validate about
// those fields can say where their values came from. A malformed value is
// an error naming the variable and the value, and leaves c unchanged.
func (c *Config) fillFromEnv() (applied []string, err error) {
	next := *c
	var errs []error
	for _, v := range []struct {
		name, field string
		dst         *time.Duration
		// zeroOff: "0" means Off, because zero means a default that is on.
		zeroOff bool
	}{
		{EnvHedgeAfter, "HedgeAfter", &next.HedgeAfter, false},
		{EnvStallAfter, "StallAfter", &next.StallAfter, true},
		{EnvResumeAfter, "ResumeAfter", &next.ResumeAfter, true},
		{EnvTTFTTimeout, "TTFTTimeout", &next.TTFTTimeout, false},
		{EnvStallTimeout, "StallTimeout", &next.StallTimeout, false},
		{EnvEjectBase, "EjectBase", &next.EjectBase, false},
		{EnvEjectMax, "EjectMax", &next.EjectMax, false},
	} {
		s, ok := os.LookupEnv(v.name)
		if !ok || strings.TrimSpace(s) == "" || *v.dst != 0 {
			continue
		}
		d, err := parseSeconds(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, v.name, s, err))
			continue
		}
		if d == 0 && v.zeroOff {
			d = Off
		}
		*v.dst = d
		applied = append(applied, fmt.Sprintf("%s=%s (%s)", v.name, strings.TrimSpace(s), v.field))
	}
	if s, ok := os.LookupEnv(EnvEjectFailures); ok && strings.TrimSpace(s) != "" && next.EjectFailures == 0 {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		switch {
		case err != nil || n < 0:
			errs = append(errs, fmt.Errorf("%w: %s=%q: want a whole number of failures, 0 to turn ejection off", ErrInvalidConfig, EnvEjectFailures, s))
		case n == 0:
			next.EjectFailures = NoEjection
		default:
			next.EjectFailures = n
		}
		if err == nil && n >= 0 {
			applied = append(applied, fmt.Sprintf("%s=%s (EjectFailures)", EnvEjectFailures, strings.TrimSpace(s)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	*c = next
	return applied, nil
}

func parseSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	// The sign is judged on what was written, before rounding: -1e-12
	// would round to 0, which means "off" or "default", not an error.
	negative := errors.New("must not be negative")
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return 0, errors.New("want seconds")
		case f < 0:
			return 0, negative
		case f >= math.MaxInt64/float64(time.Second):
			// float64 rounds the bound up: at it, the product overflows.
			return 0, fmt.Errorf("must be below %.6f seconds, a Go duration's range", math.MaxInt64/float64(time.Second))
		case f > 0 && f < 1e-9:
			// It would round to 0, which turns a watchdog off or a delay
			// adaptive: the opposite of a small value.
			return 0, errors.New("must be 0 or at least 1e-9 (a nanosecond)")
		}
		// Rounded: 1.001 s is 1000999999.99… ns in float64.
		return time.Duration(math.Round(f * float64(time.Second))), nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errors.New("want seconds such as 2.5 or a duration such as 2500ms")
	case d < 0 || strings.HasPrefix(s, "-") && strings.ContainsAny(s, "123456789"):
		return 0, negative
	case d == 0 && strings.ContainsAny(s, "123456789"):
		return 0, errors.New("must be 0 or at least 1ns") // 0.5ns would round to 0, off
	}
	return d, nil
}
