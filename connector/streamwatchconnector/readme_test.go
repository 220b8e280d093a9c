package streamwatchconnector

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/measure"
	"github.com/streamwatch/streamwatch/semconv"
)

// prometheusName is the name contrib's Prometheus exporter gives a metric
// with its default translation strategy, for the units this connector uses:
// "s" appends _seconds, a unit in braces appends nothing, sums get _total.
func prometheusName(d aggregate.Desc) string {
	n := strings.ReplaceAll(d.Name, ".", "_")
	if d.Unit == semconv.UnitSeconds {
		n += "_seconds"
	}
	if d.Kind == aggregate.Sum {
		n += "_total"
	}
	return n
}

// TestReadmeMetricTable keeps the README's metric table in step with the
// metrics the connector emits.
func TestReadmeMetricTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	readme := string(b)
	for _, d := range measure.Descs {
		row := "| `" + d.Name + "` | `" + prometheusName(d) + "` |"
		assert.Contains(t, readme, row, "README row for %s", d.Name)
	}
	for _, name := range []string{telemetryInvalid, telemetryOverflow, telemetryDerived, telemetryNoGaps} {
		assert.Contains(t, readme, "`"+name+"`")
	}
}
