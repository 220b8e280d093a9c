package streamwatchconnector

import (
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamwatch/streamwatch/internal/stagetest"
)

var update = flag.Bool("update", false, "rewrite expected.yaml and telemetry.yaml of every scenario from the current output")

// TestGolden runs every stage directory under testdata/ (the layout of
// internal/stagetest, shared with the processor): expected.yaml holds the
// metrics of one flush after the leading zeros, compared ignoring
// timestamps and order.
func TestGolden(t *testing.T) {
	for _, dir := range stagetest.Dirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			stagetest.LoadConfig(t, dir, cfg)
			td, err := golden.ReadTraces(filepath.Join(dir, stagetest.Input))
			require.NoError(t, err)

			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			set := connectortest.NewNopSettings(NewFactory().Type())
			set.TelemetrySettings = tel.NewTelemetrySettings()
			sink := &consumertest.MetricsSink{}
			c, err := newConnector(set, cfg, sink)
			require.NoError(t, err)

			require.NoError(t, c.ConsumeTraces(context.Background(), td))
			// The flush loop's first snapshot is every series' leading
			// zero; the second holds what the series count.
			require.NoError(t, c.flush(context.Background(), false))
			require.NoError(t, c.flush(context.Background(), false))
			got := pmetric.NewMetrics()
			if flushed := sink.AllMetrics(); len(flushed) > 0 { // nothing is sent before anything is counted
				require.Len(t, flushed, 2)
				leadingZeros(t, flushed[0], flushed[1])
				got = flushed[1]
			}
			expPath := filepath.Join(dir, stagetest.Expected)
			if *update {
				require.NoError(t, golden.WriteMetricsToFile(expPath, got))
			}
			want, err := golden.ReadMetrics(expPath)
			require.NoError(t, err)
			require.NoError(t, pmetrictest.CompareMetrics(want, got,
				pmetrictest.IgnoreTimestamp(),
				pmetrictest.IgnoreStartTimestamp(),
				pmetrictest.IgnoreResourceMetricsOrder(),
				pmetrictest.IgnoreMetricsOrder(),
				pmetrictest.IgnoreMetricDataPointsOrder(),
				pmetrictest.IgnoreScopeVersion(),
			))
			stagetest.CheckCounters(t, dir, stagetest.Counters(t, tel), *update)
		})
	}
}
