package semconv

import otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"

// Resource keys of the connector's metrics.
const (
	// ServiceInstanceID names the collector replica that produced a
	// connector's metrics: the collector's own service.instance.id (set
	// with service::telemetry::resource, a random UUID otherwise). Two
	// replicas pushing to one backend keep apart by it, so their
	// cumulative counters never land in one series (docs/scale.md).
	ServiceInstanceID = otelsemconv.ServiceInstanceIDKey
)
