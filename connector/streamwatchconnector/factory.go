package streamwatchconnector

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/metadata"
	"github.com/streamwatch/streamwatch/internal/stallthreshold"
)

// NewFactory returns the factory of the streamwatch connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type, createDefaultConfig,
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability))
}

// createDefaultConfig takes the threshold from STREAM__STALL_THRESHOLD_MS
// when it is set (stallthreshold.FromEnv); Validate reports a value it
// cannot use, unless the configuration sets stall_threshold itself.
func createDefaultConfig() component.Config {
	threshold, err := stallthreshold.FromEnv()
	cfg := &Config{
		Interval:       15 * time.Second,
		MaxSeries:      1000,
		Exemplars:      ExemplarsConfig{MaxPerDataPoint: 5},
		StallThreshold: threshold,
		LeadingZero:    true,
	}
	cfg.thresholdEnv.Set(err)
	return cfg
}

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return newConnector(set, cfg.(*Config), next)
}
