package streamwatchconnector

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/measure"
	"github.com/streamwatch/streamwatch/internal/owntelemetry/owntelemetrytest"
	"github.com/streamwatch/streamwatch/semconv"
)

// TestReadmeMetricTable keeps the README's metric table in step with the
// metrics the connector emits.
func TestReadmeMetricTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	readme := string(b)
	for _, d := range measure.Descs {
		row := "| `" + d.Name + "` | `" + semconv.PromName(d.Name, d.Unit, d.Kind == aggregate.Sum) + "` |"
		assert.Contains(t, readme, row, "README row for %s", d.Name)
	}
	for _, c := range owntelemetrytest.Declared(t, "metadata.yaml") {
		assert.Contains(t, readme, "`"+c.Name+"`")
	}
}
