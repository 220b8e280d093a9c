package stallthreshold

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{2 * time.Second, ""},
		{time.Microsecond, ""},
		{1500 * time.Microsecond, ""},
		{0, `stall_threshold must be at least 1µs (the timeline's resolution), got "0s"`},
		{-time.Second, `stall_threshold must be at least 1µs (the timeline's resolution), got "-1s"`},
		{500 * time.Nanosecond, `stall_threshold must be at least 1µs (the timeline's resolution), got "500ns"`},
		{1500 * time.Nanosecond, `stall_threshold must be a whole number of microseconds (the timeline's resolution), got "1.5µs"`},
	} {
		err := Check(tt.d)
		if tt.want == "" {
			assert.NoError(t, err, tt.d)
			continue
		}
		require.Error(t, err, tt.d)
		assert.Equal(t, tt.want, err.Error())
	}
}

// TestCheckRaw: what "${env:STREAM__STALL_THRESHOLD_MS:-2000}ms" expands
// to for a few values of the variable, and values written by hand.
func TestCheckRaw(t *testing.T) {
	for _, tt := range []struct {
		name string
		raw  any
		want []string // substrings of the error; none means valid
	}{
		{"absent", nil, nil},
		{"env 2000", "2000ms", nil},
		{"env 1.5", "1.5ms", nil},
		{"by hand", "2s", nil},
		{"decoded", 2 * time.Second, nil},
		{"env 2s", "2sms", []string{`stall_threshold is "2sms", not a duration`, "STREAM__STALL_THRESHOLD_MS", "number of milliseconds such as 2000", `got "2s"`}},
		// Beyond a Go duration's ~292 years: a number all the same.
		{"env huge", "99999999999999ms", []string{`stall_threshold is "99999999999999ms", out of range`, "STREAM__STALL_THRESHOLD_MS", "at most 9223372036854", `got "99999999999999"`}},
		{"env NaN", "NaNms", []string{`stall_threshold is "NaNms", not a duration`, `got "NaN"`}},
		// Numbers ParseDuration does not read are not out of range.
		{"env exponent", "1e3ms", []string{`stall_threshold is "1e3ms", not a duration`, "number of milliseconds such as 2000", `got "1e3"`}},
		{"env trailing space", "2000 ms", []string{`not a duration`, `got "2000 "`}},
		{"env leading space", " 2000ms", []string{`not a duration`, `got " 2000"`}},
		{"env underscore", "2_000ms", []string{`not a duration`, `got "2_000"`}},
		{"env two points", "2.0.0ms", []string{`not a duration`, `got "2.0.0"`}},
		// Durations Check refuses name the variable too.
		{"env zero", "0ms", []string{"must be at least 1µs", "STREAM__STALL_THRESHOLD_MS", `that variable is "0"`}},
		{"env negative", "-500ms", []string{"must be at least 1µs", `got "-500ms"`, `that variable is "-500"`}},
		{"env below a µs", "0.0005ms", []string{"at least 1µs", `that variable is "0.0005"`}},
		{"env a fraction of a µs", "1.0005ms", []string{"whole number of microseconds", `that variable is "1.0005"`}},
		{"by hand, zero: left to Validate", "0s", nil},
		{"env huge, signed", "+99999999999999.5ms", []string{"out of range", "at most 9223372036854"}},
		{"env set but empty", "ms", []string{`stall_threshold is "ms"`, "STREAM__STALL_THRESHOLD_MS", "set but empty", "number of milliseconds"}},
		{"env blank", " ms", []string{"STREAM__STALL_THRESHOLD_MS", "set but empty"}},
		{"by hand, no unit known", "2 seconds", []string{`stall_threshold must be a duration such as "2s" or "2000ms", got "2 seconds"`}},
		{"bare number", 2000, []string{`stall_threshold must be a duration with a unit, such as "2s" or "2000ms", got 2000`}},
		{"bool", true, []string{"must be a duration with a unit", "got true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRaw(tt.raw)
			if len(tt.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// WithUnit on the connector's interval: what the decoder would take for
// nanoseconds, or fail on with its own nested error, is refused with the
// key's name and where the shipped configs read it from.
func TestWithUnit(t *testing.T) {
	for _, tt := range []struct {
		name string
		raw  any
		want string // "" passes
	}{
		{"absent", nil, ""},
		{"a duration", "15s", ""},
		{"decoded", 15 * time.Second, ""},
		{"zero: left to Validate", "0s", ""},
		{"bare number", 15, `interval must be a duration with a unit, such as "15s", got 15 (the shipped configs read it from STREAMWATCH_METRICS_INTERVAL: set STREAMWATCH_METRICS_INTERVAL=15s)`},
		{"number as a string", "15", `interval must be a duration with a unit, such as "15s", got 15 (the shipped configs read it from STREAMWATCH_METRICS_INTERVAL: set STREAMWATCH_METRICS_INTERVAL=15s)`},
		{"not a duration", "15 seconds", `interval must be a duration such as "15s", got "15 seconds" (the shipped configs read it from STREAMWATCH_METRICS_INTERVAL)`},
		{"empty", "", `interval must be a duration such as "15s", got "" (the shipped configs read it from STREAMWATCH_METRICS_INTERVAL)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := WithUnit("interval", tt.raw)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
	// A key no shipped config reads from a variable.
	require.EqualError(t, WithUnit("timeout", "soon"), `timeout must be a duration such as "2s" or "2000ms", got "soon"`)
}

func TestWhole(t *testing.T) {
	for _, tt := range []struct {
		raw  any
		want string // "" passes
	}{
		{nil, ""},
		{5, ""},
		{-1, ""}, // a whole number: its range is Validate's
		{2.0, ""},
		{float64(1 << 53), ""},
		{"5", ""}, // left to the decoder
		{1.5, "max_series must be a whole number, got 1.5"},
		{-0.5, "max_series must be a whole number, got -0.5"},
		{math.NaN(), "max_series must be a whole number, got NaN"},
		{math.Inf(1), "max_series is out of range, got +Inf"},
		{uint64(math.MaxInt64), ""},
		{uint64(math.MaxInt64) + 1, "max_series is out of range, got 9223372036854775808"},
		{1e20, "max_series is out of range, got 1e+20"},
		{-1e300, "max_series is out of range, got -1e+300"},
	} {
		err := Whole("max_series", tt.raw)
		if tt.want == "" {
			assert.NoError(t, err, tt.raw)
			continue
		}
		assert.EqualError(t, err, tt.want, tt.raw)
	}
}

// configWithCount is a component config holding the threshold and a
// nested count, for Unmarshal.
type configWithCount struct {
	StallThreshold time.Duration `mapstructure:"stall_threshold"`
	Limit          int           `mapstructure:"limit"`
	Exemplars      struct {
		Max int `mapstructure:"max"`
	} `mapstructure:"exemplars"`
}

func (c *configWithCount) Validate() error {
	if c.Limit < 0 {
		return fmt.Errorf("limit must be 0 or more, got %d", c.Limit)
	}
	return nil
}

// Regression: the decoder cut a fractional count to a whole number, so
// limit: -0.5 became 0 and passed Validate. A fraction is an error naming
// the key and the value as written, nested keys included, and every other
// key is still decoded and validated.
func TestUnmarshalCounts(t *testing.T) {
	keys := RawChecks{Counts: []string{"limit", "exemplars::max"}}
	for _, tt := range []struct {
		name string
		conf map[string]any
		want []string // the error's lines, in any order; none means valid
		cfg  configWithCount
	}{
		{"whole", map[string]any{"limit": 3, "exemplars": map[string]any{"max": 2.0}}, nil,
			configWithCount{Limit: 3, Exemplars: struct {
				Max int `mapstructure:"max"`
			}{2}}},
		{"negative fraction", map[string]any{"limit": -0.5}, []string{"limit must be a whole number, got -0.5"}, configWithCount{}},
		{"nested fraction", map[string]any{"limit": 4, "exemplars": map[string]any{"max": 2.5}},
			[]string{"exemplars::max must be a whole number, got 2.5"}, configWithCount{Limit: 4}},
		{"with a threshold and Validate", map[string]any{"limit": -2, "exemplars": map[string]any{"max": -0.5}, "stall_threshold": "soon"},
			[]string{"exemplars::max must be a whole number, got -0.5", `stall_threshold must be a duration such as "2s" or "2000ms", got "soon"`, "limit must be 0 or more, got -2"},
			configWithCount{Limit: -2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cfg configWithCount
			err := Unmarshal(confmap.NewFromStringMap(tt.conf), &cfg, keys)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.ElementsMatch(t, tt.want, strings.Split(err.Error(), "\n"))
			}
			assert.Equal(t, tt.cfg, cfg)
		})
	}
}

// TestFromEnv: STREAM__STALL_THRESHOLD_MS sets the threshold of a
// configuration that leaves it out, read as the shipped config reads it;
// a value it cannot use gives Default and an error naming the variable.
func TestFromEnv(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  time.Duration
		bad   bool
	}{
		{"", Default, false},
		{"  ", Default, false},
		{"1500", 1500 * time.Millisecond, false},
		{" 250 ", 250 * time.Millisecond, false},
		{"0.5", 500 * time.Microsecond, false},
		{"0.001", time.Microsecond, false},
		{"0.0001", Default, true}, // 100ns: below the resolution
		{"1.0005", Default, true}, // 1000.5µs: not a whole number of µs
		{"0", Default, true},
		{"-5", Default, true},
		{"2s", Default, true},
		{"2e3", Default, true},
		{"abc", Default, true},
		{"99999999999999999999", Default, true},
	} {
		t.Run(fmt.Sprintf("%q", tt.value), func(t *testing.T) {
			t.Setenv(EnvVar, tt.value)
			got, err := FromEnv()
			assert.Equal(t, tt.want, got)
			if !tt.bad {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, fmt.Sprintf("STREAM__STALL_THRESHOLD_MS, which sets stall_threshold when the configuration leaves it out, "+
				"must be a number of milliseconds such as 2000, at least 0.001 and a whole number of µs, got %q", tt.value))
		})
	}
}

// TestEnvError: the error a default config keeps of FromEnv is dropped
// only by a configuration that sets the threshold.
func TestEnvError(t *testing.T) {
	var e EnvError
	require.NoError(t, e.Err())
	e.Set(errors.New("bad variable"))
	e.Clear(confmap.NewFromStringMap(map[string]any{"limit": 1}))
	require.EqualError(t, e.Err(), "bad variable")
	e.Clear(confmap.NewFromStringMap(map[string]any{"stall_threshold": "3s"}))
	require.NoError(t, e.Err())
}
