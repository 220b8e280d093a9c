package streamwatchconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/metadata"
	"github.com/streamwatch/streamwatch/internal/stallthreshold"
	"github.com/streamwatch/streamwatch/internal/stallthreshold/stallthresholdtest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id   component.ID
		want *Config
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig().(*Config)},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: &Config{
			Interval:       time.Second,
			MaxSeries:      50,
			Exemplars:      ExemplarsConfig{MaxPerDataPoint: 0},
			StallThreshold: 500 * time.Millisecond,
			Dimensions:     []string{"deployment.environment.name", "streamwatch.delivery"},
			LeadingZero:    false,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	c := cfg.(*Config)
	assert.Equal(t, 15*time.Second, c.Interval)
	assert.Equal(t, 1000, c.MaxSeries)
	assert.Equal(t, 5, c.Exemplars.MaxPerDataPoint)
	assert.Equal(t, 2*time.Second, c.StallThreshold)
	assert.Empty(t, c.Dimensions)
	assert.True(t, c.LeadingZero)
}

// TestConfigInvalid: every bad case names its YAML key and echoes the value.
func TestConfigInvalid(t *testing.T) {
	tests := []struct {
		name string
		raw  map[string]any
		want string
	}{
		{"zero interval", map[string]any{"interval": "0s"}, "interval must be at least 100ms (each flush copies every series), got 0s"},
		{"negative interval", map[string]any{"interval": "-5s"}, "interval must be at least 100ms (each flush copies every series), got -5s"},
		{"zero max_series", map[string]any{"max_series": 0}, "max_series must be at least 1, got 0"},
		{"negative max_series", map[string]any{"max_series": -3}, "max_series must be at least 1, got -3"},
		{"negative exemplars", map[string]any{"exemplars": map[string]any{"max_per_data_point": -1}},
			"exemplars::max_per_data_point must not be negative, got -1"},
		{"zero stall_threshold", map[string]any{"stall_threshold": "0s"}, `stall_threshold must be at least 1µs (the timeline's resolution), got "0s"`},
		// The processor's rule: 500ns would be 0µs, making every gap a stall.
		{"sub-microsecond stall_threshold", map[string]any{"stall_threshold": "500ns"}, `stall_threshold must be at least 1µs (the timeline's resolution), got "500ns"`},
		{"fractional stall_threshold", map[string]any{"stall_threshold": "2500ns"}, `stall_threshold must be a whole number of microseconds (the timeline's resolution), got "2.5µs"`},
		{"empty dimension", map[string]any{"dimensions": []any{"a", ""}}, "dimensions[1] must not be empty"},
		{"builtin dimension", map[string]any{"dimensions": []any{"streamwatch.route"}},
			`dimensions[0] "streamwatch.route" is already an attribute of the connector's metrics`},
		{"overflow dimension", map[string]any{"dimensions": []any{"otel.metric.overflow"}},
			`dimensions[0] "otel.metric.overflow" is already an attribute of the connector's metrics`},
		{"derivation dimension", map[string]any{"dimensions": []any{"streamwatch.derivation"}},
			`dimensions[0] "streamwatch.derivation" is already an attribute of the connector's metrics`},
		// The gen_ai.client.* metrics carry it: as a dimension too, their
		// series would hold it twice.
		{"operation dimension", map[string]any{"dimensions": []any{"gen_ai.operation.name"}},
			`dimensions[0] "gen_ai.operation.name" is already an attribute of the connector's metrics`},
		{"operation's label", map[string]any{"dimensions": []any{"gen_ai_operation_name"}},
			`dimensions[0] "gen_ai_operation_name" would be the Prometheus label gen_ai_operation_name, as "gen_ai.operation.name" is`},
		// gen_ai.client.operation.duration carries it on failed calls.
		{"error.type dimension", map[string]any{"dimensions": []any{"error.type"}},
			`dimensions[0] "error.type" is already an attribute of the connector's metrics`},
		// A label key that no exporter can send (an env variable with
		// odd bytes, say).
		{"dimension not UTF-8", map[string]any{"dimensions": []any{"tenant\xff"}}, `dimensions[0] "tenant\xff" is not valid UTF-8`},
		{"duplicate dimension", map[string]any{"dimensions": []any{"env", "env"}}, `dimensions[1] "env" is listed twice`},
		// Text an instrumentation captured would be a label on every series.
		{"prompt dimension", map[string]any{"dimensions": []any{"env", "gen_ai.input.messages"}},
			`dimensions[1] "gen_ai.input.messages" holds prompt or answer text, which no metric label may carry`},
		{"indexed prompt dimension", map[string]any{"dimensions": []any{"gen_ai.completion.0.content"}},
			`dimensions[0] "gen_ai.completion.0.content" holds prompt or answer text, which no metric label may carry`},
		{"OpenInference output", map[string]any{"dimensions": []any{"output.value"}},
			`dimensions[0] "output.value" holds prompt or answer text, which no metric label may carry`},
		{"OpenLLMetry prompt", map[string]any{"dimensions": []any{"llm.prompts.0.content"}},
			`dimensions[0] "llm.prompts.0.content" holds prompt or answer text, which no metric label may carry`},
		{"Langfuse output", map[string]any{"dimensions": []any{"langfuse.observation.output"}},
			`dimensions[0] "langfuse.observation.output" holds prompt or answer text, which no metric label may carry`},
		// Two keys that become one Prometheus label would give a series
		// the label twice, which the Prometheus exporter drops.
		{"dimension as a builtin's label", map[string]any{"dimensions": []any{"streamwatch_route"}},
			`dimensions[0] "streamwatch_route" would be the Prometheus label streamwatch_route, as "streamwatch.route" is`},
		{"two dimensions, one label", map[string]any{"dimensions": []any{"k8s.pod", "k8s_pod"}},
			`dimensions[1] "k8s_pod" would be the Prometheus label k8s_pod, as "k8s.pod" is`},
		{"dimension le", map[string]any{"dimensions": []any{"le"}},
			`dimensions[0] "le" would be the Prometheus label le, which the exporter or Prometheus sets itself`},
		{"dimension job", map[string]any{"dimensions": []any{"job"}}, `dimensions[0] "job" would be the Prometheus label job`},
		{"dimension instance", map[string]any{"dimensions": []any{"instance"}}, `dimensions[0] "instance" would be the Prometheus label instance`},
		{"dimension scope", map[string]any{"dimensions": []any{"otel.scope.name"}}, `dimensions[0] "otel.scope.name" would be the Prometheus label otel_scope_name`},
		// The exporter puts "key_" before a leading digit.
		{"leading digit", map[string]any{"dimensions": []any{"1x", "key_1x"}},
			`dimensions[1] "key_1x" would be the Prometheus label key_1x, as "1x" is`},
		{"leading digit, dotted", map[string]any{"dimensions": []any{"key_9_a", "9.a"}},
			`dimensions[1] "9.a" would be the Prometheus label key_9_a, as "key_9_a" is`},
		// The exporter refuses a label of underscores only, and drops the metric.
		{"underscores only", map[string]any{"dimensions": []any{"_"}},
			`dimensions[0] "_" would be the Prometheus label _, which is not a valid label name`},
		{"no letter", map[string]any{"dimensions": []any{".-"}},
			`dimensions[0] ".-" would be the Prometheus label __, which is not a valid label name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			require.NoError(t, confmap.NewFromStringMap(tt.raw).Unmarshal(cfg))
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestConfigThresholdFromEnv: the shipped collector config's line, with
// STREAM__STALL_THRESHOLD_MS good, with a unit, and set but empty.
func TestConfigThresholdFromEnv(t *testing.T) {
	value := func(s string) *string { return &s }
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, stallthresholdtest.Unmarshal(t, cfg, value("1500")))
	assert.Equal(t, 1500*time.Millisecond, cfg.StallThreshold)

	err := stallthresholdtest.Unmarshal(t, createDefaultConfig(), value("2s"))
	require.ErrorContains(t, err, `STREAM__STALL_THRESHOLD_MS (the shipped collector config appends "ms" to it), that variable must be a number of milliseconds such as 2000, got "2s"`)
	err = stallthresholdtest.Unmarshal(t, createDefaultConfig(), value(""))
	require.ErrorContains(t, err, "STREAM__STALL_THRESHOLD_MS (the shipped collector config appends \"ms\" to it), that variable is set but empty")
}

// A duration without a unit would decode as nanoseconds: interval: 15 — or
// the shipped config's STREAMWATCH_METRICS_INTERVAL=15 — would flush every
// 15ns. And a key the decoder cannot take does not hide the others: the
// error names every invalid key, as Validate's does.
func TestConfigEveryInvalidKeyAtOnce(t *testing.T) {
	cfg := createDefaultConfig()
	err := confmap.NewFromStringMap(map[string]any{"interval": 15}).Unmarshal(cfg)
	require.ErrorContains(t, err, `interval must be a duration with a unit, such as "15s", got 15 (the shipped configs read it from STREAMWATCH_METRICS_INTERVAL: set STREAMWATCH_METRICS_INTERVAL=15s)`)
	// A string that is not a duration is named as plainly, not with the
	// decoder's nested error (confmap still prefixes what an Unmarshal
	// method returns with its own "decoding failed" and '').
	err = confmap.NewFromStringMap(map[string]any{"interval": "15 seconds"}).Unmarshal(createDefaultConfig())
	require.ErrorContains(t, err, `interval must be a duration such as "15s", got "15 seconds" (the shipped configs read it from STREAMWATCH_METRICS_INTERVAL)`)

	cfg = createDefaultConfig()
	err = confmap.NewFromStringMap(map[string]any{
		"stall_threshold": "2sms", "interval": 15, "max_series": 0, "dimensions": []any{"le"},
	}).Unmarshal(cfg)
	require.Error(t, err)
	for _, want := range []string{
		`STREAM__STALL_THRESHOLD_MS`, `interval must be a duration with a unit`,
		`max_series must be at least 1, got 0`, `dimensions[0] "le"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	// Two bad keys of the same kind, and a key the decoder rejects.
	err = confmap.NewFromStringMap(map[string]any{"stall_threshold": 2000, "interval": 15, "flush_interval": "1s"}).Unmarshal(createDefaultConfig())
	require.Error(t, err)
	for _, want := range []string{"stall_threshold must be a duration with a unit", "interval must be a duration with a unit", "flush_interval"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestConfigUnknownKey(t *testing.T) {
	cfg := createDefaultConfig()
	err := confmap.NewFromStringMap(map[string]any{"flush_interval": "1s"}).Unmarshal(cfg)
	require.ErrorContains(t, err, "flush_interval")
}

// TestConfigIntervalFloor: an interval in micro- or nanoseconds (a typo
// for seconds) is refused; 100ms is the shortest.
func TestConfigIntervalFloor(t *testing.T) {
	for in, ok := range map[string]bool{"15us": false, "99ms": false, "100ms": true, "15s": true} {
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, confmap.NewFromStringMap(map[string]any{"interval": in}).Unmarshal(cfg))
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("interval %s: Validate() = %v, want accepted: %v", in, err, ok)
		}
	}
}

func TestConfigSeveralErrors(t *testing.T) {
	cfg := &Config{Interval: 0, MaxSeries: 0, StallThreshold: time.Second}
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "interval must be at least 100ms (each flush copies every series), got 0s")
	assert.Contains(t, err.Error(), "max_series must be at least 1")
}

// FuzzConfig decodes arbitrary YAML as the connector's configuration, the
// way the collector does (Unmarshal, then Validate): bad input gives an
// error, never a panic, and what passes keeps the documented bounds.
func FuzzConfig(f *testing.F) {
	f.Add("interval: 15\nstall_threshold: 2sms\nmax_series: 0\n")
	f.Add("dimensions: [le, k8s.pod, k8s_pod, '']\nexemplars: {max_per_data_point: -1}\n")
	f.Add("stall_threshold: 99999999999999ms\ninterval: 1s\n")
	f.Add("stall_threshold:\nflush_interval: 1s\n")
	f.Fuzz(func(t *testing.T, doc string) {
		cfg := createDefaultConfig().(*Config)
		if !stallthresholdtest.Accepts(doc, cfg) {
			return
		}
		if cfg.Interval < MinInterval || cfg.MaxSeries < 1 || cfg.Exemplars.MaxPerDataPoint < 0 || stallthreshold.Check(cfg.StallThreshold) != nil {
			t.Fatalf("accepted %+v from %q", cfg, doc)
		}
		for _, d := range cfg.Dimensions {
			if d == "" || builtin[d] || reservedLabels[promLabel(d)] {
				t.Fatalf("accepted dimension %q from %q", d, doc)
			}
		}
	})
}

// Regression: the decoder cut a fractional count to a whole number, so
// max_series: 2.5 became 2 and exemplars' -0.5 became 0, turning exemplars
// off while passing the "not negative" check; max_series: 0.5 was reported
// as 0. A fraction is rejected, naming the key and the value as written,
// and the other keys are still checked.
func TestConfigFractionalCounts(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      []string // nil: valid
	}{
		{"fraction", "max_series: 2.5", []string{"max_series must be a whole number, got 2.5"}},
		{"fraction below 1", "max_series: 0.5", []string{"max_series must be a whole number, got 0.5"}},
		{"past int64", "max_series: 18446744073709551615", []string{"max_series is out of range, got 18446744073709551615"}},
		{"nested", "exemplars: {max_per_data_point: -0.5}", []string{
			"exemplars::max_per_data_point must be a whole number, got -0.5"}},
		{"with other errors", "max_series: 2.5\nexemplars: {max_per_data_point: 1.5}\ninterval: 0s", []string{
			"max_series must be a whole number, got 2.5",
			"exemplars::max_per_data_point must be a whole number, got 1.5",
			"interval must be at least 100ms (each flush copies every series), got 0s"}},
		{"whole", "max_series: 2.0\nexemplars: {max_per_data_point: 3.0}", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var raw map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tt.doc), &raw))
			cfg := createDefaultConfig().(*Config)
			err := confmap.NewFromStringMap(raw).Unmarshal(cfg)
			if tt.want == nil {
				require.NoError(t, err)
				assert.Equal(t, 2, cfg.MaxSeries)
				assert.Equal(t, 3, cfg.Exemplars.MaxPerDataPoint)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Every count and duration of Config has its raw value checked before it
// is decoded: a field added later cannot be decoded unchecked.
func TestConfigRawChecksCoverFields(t *testing.T) {
	stallthresholdtest.CoversFields(t, &Config{}, rawChecks)
}

// TestConfigDefaultThresholdFromEnv: as the processor's, the connector's
// threshold for spans it derives itself comes from STREAM__STALL_THRESHOLD_MS
// when the configuration leaves it out.
func TestConfigDefaultThresholdFromEnv(t *testing.T) {
	t.Setenv(stallthreshold.EnvVar, "750")
	cfg := createDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"max_series": 10}).Unmarshal(cfg))
	assert.Equal(t, 750*time.Millisecond, cfg.(*Config).StallThreshold)

	t.Setenv(stallthreshold.EnvVar, "soon")
	cfg = createDefaultConfig()
	sub, err := confmap.NewFromStringMap(map[string]any{"streamwatch": nil}).Sub("streamwatch")
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(&cfg))
	require.ErrorContains(t, confmap.Validate(cfg), `STREAM__STALL_THRESHOLD_MS, which sets stall_threshold when the configuration leaves it out`)
	cfg = createDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"stall_threshold": "1s"}).Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
}
