// Package owntelemetry creates a streamwatch collector component's own
// counters from the declarations of its metadata.yaml. It is the common
// runtime of the internal/metadata packages both components keep in the
// shape of mdatagen's output (mdatagen cannot be installed here), so the
// two hold only what differs: their names, descriptions and units.
//
// The canonical use, in a component's internal/metadata:
//
//	b := new(TelemetryBuilder)
//	err := owntelemetry.Create(settings, ScopeName, []owntelemetry.Counter{
//		{Into: &b.ProcessorStreamwatchSpansDerived, Name: "otelcol_processor_streamwatch_spans_derived", Unit: "{span}", Description: "…"},
//	})
package owntelemetry

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Counter declares one monotonic int64 sum, as a telemetry.metrics entry
// of metadata.yaml does, and where it goes.
type Counter struct {
	// Into is the builder field the created counter is stored in.
	Into *metric.Int64Counter
	// Name is the full metric name, "otelcol_" included.
	Name string
	// Description is metadata.yaml's description; the stability is
	// appended as mdatagen does (" [Alpha]").
	Description string
	// Unit is the UCUM unit, such as "{span}".
	Unit string
	// Attributes are the keys its data points carry (documentation; the
	// component sets them when it records).
	Attributes []string
}

// Create creates every declared counter on the meter of scope and stores
// it in its Into. Every creation error is reported, joined; a counter that
// failed is the no-op the meter returned.
func Create(settings component.TelemetrySettings, scope string, decls []Counter) error {
	meter := settings.MeterProvider.Meter(scope)
	var errs []error
	for _, d := range decls {
		c, err := meter.Int64Counter(d.Name, metric.WithDescription(d.Description+" [Alpha]"), metric.WithUnit(d.Unit))
		*d.Into = c
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
