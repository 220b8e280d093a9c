package streamwatchprocessor

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/streamwatch/streamwatch/internal/stallthreshold"
)

// Config is the configuration of the streamwatch processor.
type Config struct {
	// StallThreshold is T: a gap between two content chunks strictly longer
	// than this is a stall. Default 2s, or STREAM__STALL_THRESHOLD_MS
	// milliseconds when that variable is set. Lower values attribute shorter
	// hiccups to stalls (pi-tps uses 500ms) and lower active generation
	// time; higher values only count long silences. It measures and never
	// acts: the probe's StallAfter is a separate knob. It must be at least
	// 1µs and a whole number of microseconds, the resolution of the
	// timeline — the connector's rule too (internal/stallthreshold). The
	// shipped collector config reads it as
	// "${env:STREAM__STALL_THRESHOLD_MS:-2000}ms"; a value that is not a
	// duration is rejected with an error naming that variable.
	StallThreshold time.Duration `mapstructure:"stall_threshold"`
	// thresholdEnv: STREAM__STALL_THRESHOLD_MS could not be used for the
	// default; Validate reports it unless stall_threshold is set.
	thresholdEnv stallthreshold.EnvError

	// MaxSegments bounds the stall segments written per span, as
	// streamwatch.stall events and (with stall_spans) child spans. Default
	// 64. Segments past it still count in stall_ms and stall_count; the
	// overflow is written as streamwatch.stall.segments_dropped. Higher
	// values keep every silence attributed at the cost of span size; 0
	// writes no segment at all.
	MaxSegments int `mapstructure:"max_segments"`

	// DropTimeline removes the raw timeline (streamwatch.chunk.offsets_us,
	// streamwatch.keepalive.offsets_us, a call span's
	// streamwatch.caller.chunk.offsets_us, and the streamwatch.chunk and
	// streamwatch.keepalive events) after deriving. Default false. On, the
	// backend stores the figures and not thousands of offsets, but the
	// figures can no longer be recomputed with another threshold. A span
	// flagged as an anomaly keeps its timeline, as evidence.
	DropTimeline bool `mapstructure:"drop_timeline"`

	// StallSpans adds one synthetic child span per stall segment (name
	// streamwatch.stall, same trace, parent the span whose silence it is:
	// the attempt span, or the call span for the caller's view) so silences
	// show as bars in a trace waterfall. Default false. The span id is
	// derived from the parent span id and the segment index, so output is
	// the same on any replica and batch split. Costs one span per segment
	// (bounded by max_segments).
	StallSpans bool `mapstructure:"stall_spans"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var (
	_ confmap.Validator   = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

// Unmarshal decodes the configuration; a stall_threshold that is not a
// duration is reported with where it most likely came from, and a
// max_segments with a fraction is rejected instead of cut to a whole
// number (-0.5 would become 0 and pass as valid).
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	c.thresholdEnv.Clear(conf)
	return stallthreshold.Unmarshal(conf, c, rawChecks)
}

// rawChecks are the keys whose raw values Unmarshal checks: every count
// and duration of Config (TestConfigRawChecksCoverFields).
var rawChecks = stallthreshold.RawChecks{Counts: []string{"max_segments"}}

// Validate checks the configuration and reports every invalid field;
// messages name the YAML key and the value.
func (c *Config) Validate() error {
	errs := []error{stallthreshold.Check(c.StallThreshold), c.thresholdEnv.Err()}
	if c.MaxSegments < 0 {
		errs = append(errs, fmt.Errorf("max_segments must be 0 or more, got %d", c.MaxSegments))
	}
	return errors.Join(errs...)
}

// createDefaultConfig takes the threshold from STREAM__STALL_THRESHOLD_MS
// when it is set (stallthreshold.FromEnv); Validate reports a value it
// cannot use, unless the configuration sets stall_threshold itself.
func createDefaultConfig() component.Config {
	threshold, err := stallthreshold.FromEnv()
	cfg := &Config{
		StallThreshold: threshold,
		MaxSegments:    64,
	}
	cfg.thresholdEnv.Set(err)
	return cfg
}
