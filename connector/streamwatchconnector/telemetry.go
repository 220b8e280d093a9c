package streamwatchconnector

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/metadata"
)

// telemetry is the connector's own telemetry (metadata.yaml); it
// implements measure.Problems.
type telemetry struct{ *metadata.TelemetryBuilder }

// Invalid implements measure.Problems.
func (t telemetry) Invalid(key, reason string) {
	t.ConnectorStreamwatchInvalidValues.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("attribute", key), attribute.String("reason", reason)))
}

// Derived implements measure.Problems.
func (t telemetry) Derived() { t.ConnectorStreamwatchDerivedSpans.Add(context.Background(), 1) }

// NoGaps implements measure.Problems.
func (t telemetry) NoGaps() { t.ConnectorStreamwatchGapsUnavailable.Add(context.Background(), 1) }

// SegmentsDropped implements measure.Problems.
func (t telemetry) SegmentsDropped(n int) {
	t.ConnectorStreamwatchSegmentsDropped.Add(context.Background(), int64(n))
}

// overflowed records measurements routed to the overflow series of metric.
func (t telemetry) overflowed(metricName string, n int64) {
	t.ConnectorStreamwatchOverflow.Add(context.Background(), n, metric.WithAttributes(attribute.String("metric", metricName)))
}
