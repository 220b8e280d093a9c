package streamwatchconnector

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite expected.yaml and telemetry.yaml of every scenario from the current output")

// TestGolden runs every scenario under testdata/: a directory with
// input.yaml (traces, OTLP JSON as YAML), an optional config.yaml (merged
// over the default config), expected.yaml (the metrics of one flush) and an
// optional telemetry.yaml (the connector's own counters, "name{k=v,…}: n").
// A new scenario is a new directory, not new code.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "input.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, in := range dirs {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
				cm, err := confmaptest.LoadConf(filepath.Join(dir, "config.yaml"))
				require.NoError(t, err)
				require.NoError(t, cm.Unmarshal(cfg))
			}
			require.NoError(t, cfg.Validate())

			td, err := golden.ReadTraces(in)
			require.NoError(t, err)

			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			set := connectortest.NewNopSettings(NewFactory().Type())
			set.TelemetrySettings = tel.NewTelemetrySettings()
			sink := &consumertest.MetricsSink{}
			c, err := newConnector(set, cfg, sink)
			require.NoError(t, err)

			require.NoError(t, c.ConsumeTraces(context.Background(), td))
			require.NoError(t, c.flush(context.Background()))

			got := pmetric.NewMetrics()
			for _, md := range sink.AllMetrics() {
				md.ResourceMetrics().MoveAndAppendTo(got.ResourceMetrics())
			}
			gotTel := telemetryCounts(t, tel)

			expPath := filepath.Join(dir, "expected.yaml")
			telPath := filepath.Join(dir, "telemetry.yaml")
			if *update {
				require.NoError(t, golden.WriteMetricsToFile(expPath, got))
				writeTelemetry(t, telPath, gotTel)
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
			require.Equal(t, readTelemetry(t, telPath), gotTel, "connector telemetry")
		})
	}
}

// telemetryCounts flattens the connector's own counters to "name{k=v,…}".
func telemetryCounts(t *testing.T, tel *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.Reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				var kv []string
				for _, a := range dp.Attributes.ToSlice() {
					kv = append(kv, string(a.Key)+"="+a.Value.String())
				}
				sort.Strings(kv)
				out[m.Name+"{"+strings.Join(kv, ",")+"}"] += dp.Value
			}
		}
	}
	return out
}

func readTelemetry(t *testing.T, path string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &out))
	return out
}

func writeTelemetry(t *testing.T, path string, m map[string]int64) {
	t.Helper()
	if len(m) == 0 {
		_ = os.Remove(path)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# The connector's own telemetry after the scenario: counter{attributes}: value.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%q: %d\n", k, m[k])
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
}
