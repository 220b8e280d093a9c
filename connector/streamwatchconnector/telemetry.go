package streamwatchconnector

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Names of the connector's own telemetry.
const (
	telemetryInvalid  = "otelcol_connector_streamwatch_invalid_values"
	telemetryOverflow = "otelcol_connector_streamwatch_overflow"
	telemetryDerived  = "otelcol_connector_streamwatch_derived_spans"
	telemetryNoGaps   = "otelcol_connector_streamwatch_gaps_unavailable"
)

// telemetry is the connector's own telemetry; it implements
// measure.Problems.
type telemetry struct {
	invalid, overflow, derived, noGaps metric.Int64Counter
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	m := mp.Meter(scopeName)
	t := &telemetry{}
	var err error
	if t.invalid, err = m.Int64Counter(telemetryInvalid, metric.WithUnit("{value}"),
		metric.WithDescription("Span values the connector could not use, by attribute and reason.")); err != nil {
		return nil, err
	}
	if t.overflow, err = m.Int64Counter(telemetryOverflow, metric.WithUnit("{measurement}"),
		metric.WithDescription("Measurements recorded in a metric's overflow series because max_series was reached.")); err != nil {
		return nil, err
	}
	if t.derived, err = m.Int64Counter(telemetryDerived, metric.WithUnit("{span}"),
		metric.WithDescription("Attempt spans derived by the connector from their raw timeline because the processor had not.")); err != nil {
		return nil, err
	}
	if t.noGaps, err = m.Int64Counter(telemetryNoGaps, metric.WithUnit("{span}"),
		metric.WithDescription("Winning attempts with two or more chunks whose timeline was dropped, missing from time_per_output_chunk.")); err != nil {
		return nil, err
	}
	return t, nil
}

// Invalid implements measure.Problems.
func (t *telemetry) Invalid(key, reason string) {
	t.invalid.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("attribute", key), attribute.String("reason", reason)))
}

// Derived implements measure.Problems.
func (t *telemetry) Derived() { t.derived.Add(context.Background(), 1) }

// NoGaps implements measure.Problems.
func (t *telemetry) NoGaps() { t.noGaps.Add(context.Background(), 1) }

// overflowed records measurements routed to the overflow series of metric.
func (t *telemetry) overflowed(metricName string, n int64) {
	t.overflow.Add(context.Background(), n, metric.WithAttributes(attribute.String("metric", metricName)))
}
