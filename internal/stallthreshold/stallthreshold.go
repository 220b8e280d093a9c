// Package stallthreshold is the one rule for the stall threshold T of both
// streamwatch collector components (docs/design.md §4): its default, its
// minimum and resolution, and how a value that is not a duration is
// reported. The environment variable STREAM__STALL_THRESHOLD_MS sets it:
// a configuration that leaves it out takes the variable's milliseconds
// (FromEnv), and the shipped collector config builds it from the variable,
// so an error names that variable and what it expects. Both components
// decode their configuration through its Unmarshal, which checks the raw
// values of the threshold and of their other duration and count keys
// before the decoder can change them.
//
// The canonical use, in a component's config:
//
//	type Config struct {
//		StallThreshold time.Duration `mapstructure:"stall_threshold"`
//		thresholdEnv   stallthreshold.EnvError
//	}
//
//	var rawChecks = stallthreshold.RawChecks{Counts: []string{"max_segments"}}
//
//	func createDefaultConfig() component.Config {
//		threshold, err := stallthreshold.FromEnv()
//		cfg := &Config{StallThreshold: threshold}
//		cfg.thresholdEnv.Set(err)
//		return cfg
//	}
//
//	func (c *Config) Unmarshal(conf *confmap.Conf) error {
//		c.thresholdEnv.Clear(conf)
//		return stallthreshold.Unmarshal(conf, c, rawChecks)
//	}
//
//	func (c *Config) Validate() error {
//		return errors.Join(stallthreshold.Check(c.StallThreshold), c.thresholdEnv.Err())
//	}
package stallthreshold

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

// Key is the YAML key of the threshold in both components.
const Key = "stall_threshold"

// EnvVar is the environment variable that sets the threshold, in
// milliseconds (docs/design.md §2 rule 9): a component whose configuration
// leaves stall_threshold out takes it from there (FromEnv), and the shipped
// collector config reads it as "${env:STREAM__STALL_THRESHOLD_MS:-2000}ms".
const EnvVar = "STREAM__STALL_THRESHOLD_MS"

// FromEnv is the threshold of a configuration that leaves stall_threshold
// out: EnvVar's number of milliseconds, read as the shipped config reads
// it (with "ms" appended: 1500 and 0.5 are valid), or Default when the
// variable is unset or blank (as hedgeprobe reads its variables). A value
// that is not such a number, or that Check refuses, gives Default and an
// error naming the variable. A component's default config keeps that
// error (EnvError) and its Validate reports it unless the configuration
// sets the threshold: a collector does not start on a threshold nobody
// meant. Validate, because a component given no configuration at all
// ("streamwatch:") is validated but never unmarshalled.
func FromEnv() (time.Duration, error) {
	v := os.Getenv(EnvVar)
	if strings.TrimSpace(v) == "" {
		return Default, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v) + "ms")
	if err == nil && Check(d) == nil {
		return d, nil
	}
	return Default, fmt.Errorf("%s, which sets %s when the configuration leaves it out, "+
		"must be a number of milliseconds such as 2000, at least 0.001 and a whole number of µs, got %q", EnvVar, Key, v)
}

// Default is T when nothing is configured: 2 s, a few seconds as the seed
// suggests (pi-tps uses 500 ms).
const Default = 2 * time.Second

// Resolution is the timeline's: offsets are whole microseconds, so T is
// used in whole microseconds and cannot be finer.
const Resolution = time.Microsecond

// Check is the rule both components apply to a decoded threshold: at least
// 1µs and a whole number of microseconds. A threshold below 1µs would
// become 0 in the timeline's units and make every gap a stall; a fraction
// of a microsecond would be dropped silently.
func Check(d time.Duration) error {
	switch {
	case d < Resolution:
		return fmt.Errorf("%s must be at least 1µs (the timeline's resolution), got %q", Key, d.String())
	case d%Resolution != 0:
		return fmt.Errorf("%s must be a whole number of microseconds (the timeline's resolution), got %q", Key, d.String())
	}
	return nil
}

// RawChecks names the keys of a component's configuration, besides Key,
// whose raw values Unmarshal checks before they are decoded. A nested key
// is written with confmap.KeyDelimiter: "exemplars::max_per_data_point".
// stallthresholdtest.CoversFields holds it to the config's fields, so that
// a count or duration added later is not decoded unchecked.
type RawChecks struct {
	// Durations must be written with a unit (WithUnit).
	Durations []string
	// Counts must be whole numbers (Whole).
	Counts []string
}

// Unmarshal decodes conf into cfg, a component config holding Key, after
// checking the raw values of Key (CheckRaw) and of the component's other
// keys (WithUnit, Whole). A key whose raw value fails is left out and the
// rest is decoded and validated all the same, so that the error names every
// invalid key at once, as Validate does: the collector validates a config
// only once it has decoded.
func Unmarshal(conf *confmap.Conf, cfg confmap.Validator, keys RawChecks) error {
	var errs []error
	var bad []string
	check := func(k string, err error) {
		if err != nil {
			errs, bad = append(errs, err), append(bad, k)
		}
	}
	check(Key, CheckRaw(conf.Get(Key)))
	for _, k := range keys.Durations {
		check(k, WithUnit(k, conf.Get(k)))
	}
	for _, k := range keys.Counts {
		check(k, Whole(k, conf.Get(k)))
	}
	if len(errs) == 0 {
		return conf.Unmarshal(cfg)
	}
	rest := conf.ToStringMap()
	for _, k := range bad {
		deleteKey(rest, k)
	}
	if err := confmap.NewFromStringMap(rest).Unmarshal(cfg); err != nil {
		return errors.Join(append(errs, err)...)
	}
	return errors.Join(append(errs, cfg.Validate())...)
}

// EnvError is what a component's config keeps of FromEnv's error: Set by
// the default config, cleared by Clear when the configuration sets the
// threshold itself, reported by Err in Validate. Its zero value holds no
// error.
type EnvError struct{ err error }

// Set keeps err, FromEnv's error.
func (e *EnvError) Set(err error) { e.err = err }

// Clear drops the kept error when conf sets the threshold.
func (e *EnvError) Clear(conf *confmap.Conf) {
	if conf.IsSet(Key) {
		e.err = nil
	}
}

// Err is the kept error, nil when there is none.
func (e *EnvError) Err() error { return e.err }

// CheckRaw checks the configured value before it is decoded, so that a
// value that is not a duration gets an error that says where it came from
// instead of the decoder's "time: unknown unit". raw is nil when the key is
// absent, and the default applies — or present but empty, and the value
// decodes as 0, which Check rejects.
func CheckRaw(raw any) error {
	if v, ok := raw.(string); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return stringError(v)
		}
		// A number of milliseconds Check refuses: name the variable it
		// most likely came from, with its value, as for one that is not a
		// duration. Any other duration is left to Validate.
		env, fromEnv := strings.CutSuffix(v, "ms")
		if err := Check(d); err != nil && fromEnv {
			return fmt.Errorf("%w: if it comes from %s (the shipped collector config appends \"ms\" to it), "+
				"that variable is %q", err, EnvVar, env)
		}
		return nil
	}
	return WithUnit(Key, raw)
}

// WithUnit checks the raw value of the duration key k before it is
// decoded: a bare number would decode as nanoseconds (stall_threshold: 2000
// would be 2µs, interval: 15 a flush every 15ns), so only a duration, or a
// string that parses as one, passes. A string that does not gets an error
// of its own rather than the decoder's, which names the key only after
// two lines of "decoding failed" and an empty key name.
func WithUnit(k string, raw any) error {
	env, shipped := shippedEnv[k]
	example := `"2s" or "2000ms"`
	if shipped {
		example = `"15s"`
	}
	switch v := raw.(type) {
	case nil, time.Duration:
		return nil
	case string:
		if _, err := time.ParseDuration(v); err == nil {
			return nil
		}
		if !decimal(strings.TrimSpace(v)) {
			hint := ""
			if shipped {
				hint = fmt.Sprintf(" (the shipped configs read it from %s)", env)
			}
			return fmt.Errorf("%s must be a duration such as %s, got %q%s", k, example, v, hint)
		}
	}
	if shipped {
		return fmt.Errorf("%s must be a duration with a unit, such as %s, got %v (the shipped configs read it from %s: set %s=%vs)",
			k, example, raw, env, env, raw)
	}
	return fmt.Errorf("%s must be a duration with a unit, such as %s, got %v", k, example, raw)
}

// maxWhole is the largest count Whole lets through written as a float
// (1e6, 2.0): every integer up to 2^53 is exact as a float64, and every
// component's counts are far below. An integer is checked against int64.
const maxWhole = 1 << 53

// Whole checks the raw value of the count key k before it is decoded. A
// YAML number with a fraction or an exponent arrives as a float64, which
// the decoder cuts to an int without a word: 1.5 would become 1 and -0.5
// would become 0, passing a check such as "0 or more" as a value nobody
// wrote. An integer past int64, which YAML gives as a uint64 and the
// decoder would wrap to a negative number, is out of range. Any other
// type is left to the decoder.
func Whole(k string, raw any) error {
	switch v := raw.(type) {
	case float64:
		switch {
		case math.IsInf(v, 0) || !math.IsNaN(v) && math.Abs(v) > maxWhole:
			return fmt.Errorf("%s is out of range, got %v", k, v)
		case v != math.Trunc(v): // NaN included
			return fmt.Errorf("%s must be a whole number, got %v", k, v)
		}
	case uint64:
		if v > math.MaxInt64 {
			return fmt.Errorf("%s is out of range, got %d", k, v)
		}
	}
	return nil
}

// deleteKey removes the key k, nested with confmap.KeyDelimiter, from m.
func deleteKey(m map[string]any, k string) {
	parent, leaf, nested := strings.Cut(k, confmap.KeyDelimiter)
	if !nested {
		delete(m, k)
		return
	}
	if sub, ok := m[parent].(map[string]any); ok {
		deleteKey(sub, leaf)
	}
}

// shippedEnv names the environment variable the shipped configs
// (deploy/) read a duration key from without a unit of their own, so that
// an error for a bare number there says where it most likely came from.
var shippedEnv = map[string]string{"interval": "STREAMWATCH_METRICS_INTERVAL"}

// stringError words the error for a string that is not a duration. One
// that ends in "ms" most likely comes from the shipped config's
// "${env:STREAM__STALL_THRESHOLD_MS:-2000}ms": the variable's value is
// what precedes the suffix.
func stringError(v string) error {
	env, fromEnv := strings.CutSuffix(v, "ms")
	switch {
	case fromEnv && strings.TrimSpace(env) == "":
		return fmt.Errorf("%s is %q, not a duration: if it comes from %s (the shipped collector config appends \"ms\" to it), "+
			"that variable is set but empty; set it to a number of milliseconds such as 2000, or unset it for the default",
			Key, v, EnvVar)
	case fromEnv && decimal(env):
		// A number written as ParseDuration reads one, which it refused:
		// out of its range.
		return fmt.Errorf("%s is %q, out of range: if it comes from %s (the shipped collector config appends \"ms\" to it), "+
			"that variable must be a number of milliseconds such as 2000, at most %d, got %q",
			Key, v, EnvVar, int64(math.MaxInt64/int64(time.Millisecond)), env)
	case fromEnv:
		return fmt.Errorf("%s is %q, not a duration: if it comes from %s (the shipped collector config appends \"ms\" to it), "+
			"that variable must be a number of milliseconds such as 2000, got %q",
			Key, v, EnvVar, env)
	default:
		return fmt.Errorf("%s must be a duration such as \"2s\" or \"2000ms\", got %q", Key, v)
	}
}

// decimal reports whether s is a number as ParseDuration reads one: an
// optional sign, digits, an optional fraction; no space, exponent or '_'.
func decimal(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	digits := func(d string) bool { return strings.Trim(d, "0123456789") == "" }
	return whole+frac != "" && digits(whole) && digits(frac)
}
