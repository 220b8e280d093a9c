package streamwatchprocessor

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
)

// Config is the configuration of the streamwatch processor.
type Config struct {
	// StallThreshold is T: a gap between two content chunks strictly longer
	// than this is a stall. Default 2s. Lower values attribute shorter
	// hiccups to stalls (pi-tps uses 500ms) and lower active generation
	// time; higher values only count long silences. It measures and never
	// acts: the probe's StallAfter is a separate knob. It must be at least
	// 1µs, the resolution of the timeline. The shipped collector config
	// reads it as "${env:STREAM__STALL_THRESHOLD_MS:-2000}ms".
	StallThreshold time.Duration `mapstructure:"stall_threshold"`

	// MaxSegments bounds the stall segments written per span, as
	// streamwatch.stall events and (with stall_spans) child spans. Default
	// 64. Segments past it still count in stall_ms and stall_count; the
	// overflow is written as streamwatch.stall.segments_dropped. Higher
	// values keep every silence attributed at the cost of span size; 0
	// writes no segment at all.
	MaxSegments int `mapstructure:"max_segments"`

	// DropTimeline removes the raw timeline (streamwatch.chunk.offsets_us,
	// streamwatch.keepalive.offsets_us, and the streamwatch.chunk and
	// streamwatch.keepalive events) after deriving. Default false. On, the
	// backend stores the figures and not thousands of offsets, but the
	// figures can no longer be recomputed with another threshold. A span
	// flagged as an anomaly keeps its timeline, as evidence.
	DropTimeline bool `mapstructure:"drop_timeline"`

	// StallSpans adds one synthetic child span per stall segment (name
	// streamwatch.stall, parent the attempt span, same trace) so silences
	// show as bars in a trace waterfall. Default false. The span id is
	// derived from the parent span id and the segment index, so output is
	// the same on any replica and batch split. Costs one span per segment
	// (bounded by max_segments).
	StallSpans bool `mapstructure:"stall_spans"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration; messages name the YAML key and the
// value.
func (c *Config) Validate() error {
	if c.StallThreshold < time.Microsecond {
		return fmt.Errorf("stall_threshold must be at least 1µs (the timeline's resolution), got %q", c.StallThreshold.String())
	}
	if c.MaxSegments < 0 {
		return fmt.Errorf("max_segments must be 0 or more, got %d", c.MaxSegments)
	}
	return nil
}

func createDefaultConfig() component.Config {
	return &Config{
		StallThreshold: 2 * time.Second,
		MaxSegments:    64,
	}
}
