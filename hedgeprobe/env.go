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

// Environment variables New reads for fields left zero, names in the
// style of the seed research. Durations are seconds as a decimal number
// ("2.5") or a Go duration ("2500ms"); "0" disables.
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
// it, when the variable is set and not empty. A malformed value is an
// error naming the variable and the value, and leaves c unchanged.
func (c *Config) fillFromEnv() error {
	next := *c
	var errs []error
	for _, v := range []struct {
		name string
		dst  *time.Duration
		// zeroOff: "0" means Off, because zero means a default that is on.
		zeroOff bool
	}{
		{EnvHedgeAfter, &next.HedgeAfter, false},
		{EnvStallAfter, &next.StallAfter, false},
		{EnvResumeAfter, &next.ResumeAfter, true},
		{EnvTTFTTimeout, &next.TTFTTimeout, false},
		{EnvStallTimeout, &next.StallTimeout, false},
		{EnvEjectBase, &next.EjectBase, false},
		{EnvEjectMax, &next.EjectMax, false},
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
	}
	if err := errors.Join(errs...); err != nil {
		return err
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
