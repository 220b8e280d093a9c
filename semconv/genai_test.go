package semconv

import (
	"testing"

	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// The three gen_ai.* metrics are the semantic conventions' own, name and
// unit: the contract invents no gen_ai.* name.
func TestGenAIMetricsAreTheConventions(t *testing.T) {
	for _, tc := range []struct{ ours, name, unit string }{
		{MetricTimeToFirstChunk, genaiconv.ClientOperationTimeToFirstChunk{}.Name(), genaiconv.ClientOperationTimeToFirstChunk{}.Unit()},
		{MetricTimePerOutputChunk, genaiconv.ClientOperationTimePerOutputChunk{}.Name(), genaiconv.ClientOperationTimePerOutputChunk{}.Unit()},
		{MetricOperationDuration, genaiconv.ClientOperationDuration{}.Name(), genaiconv.ClientOperationDuration{}.Unit()},
	} {
		if tc.ours != tc.name || tc.unit != UnitSeconds {
			t.Errorf("%s: the conventions say %s in %s (ours in %s)", tc.ours, tc.name, tc.unit, UnitSeconds)
		}
	}
}
