// Package owntelemetry creates a streamwatch collector component's own
// counters from the declarations of its metadata.yaml. It is the common
// runtime of the internal/metadata packages both components keep in the
// shape of mdatagen's output (mdatagen cannot be installed here), so the
// two hold only what differs: their names, descriptions and units.
//
// The canonical use, in a component's internal/metadata:
//
//	cs, err := owntelemetry.Int64Counters(Meter(settings), []owntelemetry.Counter{
//		{Name: "otelcol_processor_streamwatch_spans_derived", Unit: "{span}", Description: "…"},
//	})
package owntelemetry

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// Counter declares one monotonic int64 sum, as a telemetry.metrics entry
// of metadata.yaml does.
type Counter struct {
	// Name is the full metric name, "otelcol_" included.
	Name string
	// Description is metadata.yaml's description; the stability is
	// appended as mdatagen does (" [Alpha]").
	Description string
	// Unit is the UCUM unit, such as "{span}".
	Unit string
}

// Int64Counters creates one counter per declaration on meter, in order.
// Every creation error is reported, joined; a counter that failed is the
// no-op the meter returned.
func Int64Counters(meter metric.Meter, decls []Counter) ([]metric.Int64Counter, error) {
	out := make([]metric.Int64Counter, len(decls))
	var errs []error
	for i, d := range decls {
		c, err := meter.Int64Counter(d.Name, metric.WithDescription(d.Description+" [Alpha]"), metric.WithUnit(d.Unit))
		out[i] = c
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
