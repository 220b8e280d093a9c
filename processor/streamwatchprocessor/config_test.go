package streamwatchprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/internal/stallthreshold"
	"github.com/streamwatch/streamwatch/internal/stallthreshold/stallthresholdtest"
)

func TestConfigDefaults(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 2*time.Second, cfg.StallThreshold)
	assert.Equal(t, 64, cfg.MaxSegments)
	assert.False(t, cfg.DropTimeline)
	assert.False(t, cfg.StallSpans)
	assert.NoError(t, cfg.Validate())
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	tests := []struct {
		id      string
		want    *Config
		wantErr string
	}{
		{id: "", want: &Config{StallThreshold: 2 * time.Second, MaxSegments: 64}},
		{id: "custom", want: &Config{StallThreshold: 500 * time.Millisecond, MaxSegments: 8, DropTimeline: true, StallSpans: true}},
		{id: "env_ms", want: &Config{StallThreshold: 2 * time.Second, MaxSegments: 64}},
		{id: "no_segments", want: &Config{StallThreshold: 2 * time.Second, MaxSegments: 0}},
		{id: "zero_threshold", wantErr: `stall_threshold must be at least 1µs (the timeline's resolution), got "0s"`},
		{id: "negative_threshold", wantErr: `stall_threshold must be at least 1µs (the timeline's resolution), got "-1s"`},
		{id: "sub_microsecond_threshold", wantErr: `stall_threshold must be at least 1µs (the timeline's resolution), got "500ns"`},
		{id: "fractional_microsecond_threshold", wantErr: `stall_threshold must be a whole number of microseconds (the timeline's resolution), got "1.5µs"`},
		{id: "negative_segments", wantErr: "max_segments must be 0 or more, got -3"},
	}
	for _, tt := range tests {
		t.Run("streamwatch/"+tt.id, func(t *testing.T) {
			key := "streamwatch"
			if tt.id != "" {
				key += "/" + tt.id
			}
			sub, err := cm.Sub(key)
			require.NoError(t, err)
			cfg := NewFactory().CreateDefaultConfig()
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

// TestConfigThresholdFromEnv decodes the value the shipped collector config
// produces from ${env:STREAM__STALL_THRESHOLD_MS:-2000}ms, for a few values
// of the variable.
func TestConfigThresholdFromEnv(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"2000ms": 2 * time.Second,
		"500ms":  500 * time.Millisecond,
		"1ms":    time.Millisecond,
	} {
		cfg := NewFactory().CreateDefaultConfig()
		require.NoError(t, confmap.NewFromStringMap(map[string]any{"stall_threshold": in}).Unmarshal(cfg))
		assert.Equal(t, want, cfg.(*Config).StallThreshold, in)
	}
}

// TestConfigThresholdEnvErrors: the shipped collector config's line with
// a bad STREAM__STALL_THRESHOLD_MS gives an error naming the variable and
// what it expects, not "time: unknown unit".
func TestConfigThresholdEnvErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value *string
		want  string // empty: valid
		got   time.Duration
	}{
		{"unset", nil, "", 2 * time.Second},
		{"milliseconds", ptr("500"), "", 500 * time.Millisecond},
		{"with a unit", ptr("2s"), "STREAM__STALL_THRESHOLD_MS (the shipped collector config appends \"ms\" to it), that variable must be a number of milliseconds such as 2000, got \"2s\"", 0},
		{"set but empty", ptr(""), "STREAM__STALL_THRESHOLD_MS (the shipped collector config appends \"ms\" to it), that variable is set but empty", 0},
		{"zero", ptr("0"), "stall_threshold must be at least 1µs (the timeline's resolution), got \"0s\": if it comes from STREAM__STALL_THRESHOLD_MS (the shipped collector config appends \"ms\" to it), that variable is \"0\"", 0},
		{"an exponent", ptr("2e3"), "that variable must be a number of milliseconds such as 2000, got \"2e3\"", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			err := stallthresholdtest.Unmarshal(t, cfg, tt.value)
			if tt.want != "" {
				require.ErrorContains(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.got, cfg.StallThreshold)
		})
	}
}

func ptr(s string) *string { return &s }

func TestConfigUnknownKey(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	err := confmap.NewFromStringMap(map[string]any{"stall_treshold": "1s"}).Unmarshal(cfg)
	require.ErrorContains(t, err, "stall_treshold")
}

// A threshold the decoder cannot take does not hide the other invalid keys:
// the error names every one, as Validate's does.
func TestConfigEveryInvalidKeyAtOnce(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	err := confmap.NewFromStringMap(map[string]any{"stall_threshold": "2sms", "max_segments": -3}).Unmarshal(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "STREAM__STALL_THRESHOLD_MS")
	assert.Contains(t, err.Error(), "max_segments must be 0 or more, got -3")
}

// FuzzConfig decodes arbitrary YAML as the processor's configuration, the
// way the collector does (Unmarshal, then Validate): bad input gives an
// error, never a panic, and what passes keeps the documented bounds.
func FuzzConfig(f *testing.F) {
	f.Add("stall_threshold: 2sms\nmax_segments: -3\n")
	f.Add("stall_threshold: 2000\ndrop_timeline: yes\n")
	f.Add("stall_threshold: 99999999999999ms\nstall_spans: true\n")
	f.Add("stall_threshold:\nstall_treshold: 1s\n")
	f.Fuzz(func(t *testing.T, doc string) {
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		if !stallthresholdtest.Accepts(doc, cfg) {
			return
		}
		if cfg.MaxSegments < 0 || stallthreshold.Check(cfg.StallThreshold) != nil {
			t.Fatalf("accepted %+v from %q", cfg, doc)
		}
	})
}

// Regression: the decoder cut a fractional max_segments to a whole number,
// so -0.5 became 0 and passed the "0 or more" check. A fraction is
// rejected, naming the key and the value as written; a whole number
// written as 8.0 is 8.
func TestConfigFractionalSegments(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{"max_segments: 1.5", "max_segments must be a whole number, got 1.5"},
		{"max_segments: -0.5", "max_segments must be a whole number, got -0.5"},
		{"max_segments: .nan", "max_segments must be a whole number, got NaN"},
		{"max_segments: 1e30", "max_segments is out of range, got 1e+30"},
		// Past int64: the decoder would wrap it to a negative number.
		{"max_segments: 9223372036854775808", "max_segments is out of range, got 9223372036854775808"},
		{"max_segments: 8.0", ""},
	} {
		t.Run(tt.doc, func(t *testing.T) {
			var raw map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tt.doc), &raw))
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			err := confmap.NewFromStringMap(raw).Unmarshal(cfg)
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, 8, cfg.MaxSegments)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// Every count and duration of Config has its raw value checked before it
// is decoded: a field added later cannot be decoded unchecked.
func TestConfigRawChecksCoverFields(t *testing.T) {
	stallthresholdtest.CoversFields(t, &Config{}, rawChecks)
}

// TestConfigDefaultThresholdFromEnv: with STREAM__STALL_THRESHOLD_MS set,
// a configuration that leaves stall_threshold out takes the variable's
// milliseconds (docs/design.md §2 rule 9); one that sets it keeps its own,
// and a variable it cannot use fails only the configuration that needs it.
func TestConfigDefaultThresholdFromEnv(t *testing.T) {
	t.Setenv(stallthreshold.EnvVar, "750")
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"max_segments": 8}).Unmarshal(cfg))
	assert.Equal(t, 750*time.Millisecond, cfg.(*Config).StallThreshold)

	t.Setenv(stallthreshold.EnvVar, "soon")
	const want = `STREAM__STALL_THRESHOLD_MS, which sets stall_threshold when the configuration leaves it out, must be a number of milliseconds such as 2000`
	// "streamwatch:" with no body: the collector never unmarshals it, and
	// validates it.
	cfg = NewFactory().CreateDefaultConfig()
	sub, err := confmap.NewFromStringMap(map[string]any{"streamwatch": nil}).Sub("streamwatch")
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(&cfg))
	require.ErrorContains(t, confmap.Validate(cfg), want)
	// A body without the key.
	cfg = NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"max_segments": 8}).Unmarshal(cfg))
	require.ErrorContains(t, confmap.Validate(cfg), want)
	// The key set: the variable is not read.
	cfg = NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"stall_threshold": "1s"}).Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, time.Second, cfg.(*Config).StallThreshold)
	// A bad key and the bad variable: the key's error alone.
	err = confmap.NewFromStringMap(map[string]any{"stall_threshold": "abc"}).Unmarshal(NewFactory().CreateDefaultConfig())
	require.ErrorContains(t, err, `stall_threshold must be a duration`)
	assert.NotContains(t, err.Error(), "leaves it out")
}
