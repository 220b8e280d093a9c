package streamwatchprocessor

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/metadata"
)

// -update rewrites every stage's out.yaml and telemetry.yaml from the
// processor's current output. Review the diff before committing it.
var update = flag.Bool("update", false, "rewrite the expected output of every stage in testdata/")

// Stage files, one directory per scenario under testdata/:
//
//	config.yaml     optional processor config (defaults otherwise)
//	in.yaml         input traces (OTLP JSON as YAML, read by pkg/golden)
//	out.yaml        expected output traces
//	telemetry.yaml  expected value of each of the processor's own counters
//
// A new scenario is a new directory; no Go code changes.
const (
	stageConfig    = "config.yaml"
	stageIn        = "in.yaml"
	stageOut       = "out.yaml"
	stageTelemetry = "telemetry.yaml"
)

// ownCounters are the processor's own counters, checked in every stage.
var ownCounters = []string{
	"otelcol_processor_streamwatch_spans_derived",
	"otelcol_processor_streamwatch_spans_partial",
	"otelcol_processor_streamwatch_spans_anomaly",
	"otelcol_processor_streamwatch_spans_burst",
	"otelcol_processor_streamwatch_segments_dropped",
}

func TestStages(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		dir := filepath.Join("testdata", e.Name())
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, stageIn)); err != nil {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) { runStage(t, dir) })
	}
	require.Positive(t, n, "no stage under testdata/")
}

func runStage(t *testing.T, dir string) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if path := filepath.Join(dir, stageConfig); fileExists(path) {
		cm, err := confmaptest.LoadConf(path)
		require.NoError(t, err)
		require.NoError(t, cm.Unmarshal(cfg))
		require.NoError(t, cfg.Validate())
	}
	in, err := golden.ReadTraces(filepath.Join(dir, stageIn))
	require.NoError(t, err)

	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	got, counters := runProcessor(t, cfg, tel, in)

	outPath, telPath := filepath.Join(dir, stageOut), filepath.Join(dir, stageTelemetry)
	if *update {
		require.NoError(t, golden.WriteTracesToFile(outPath, got))
		b, err := yaml.Marshal(counters)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(telPath, b, 0o600))
	}
	want, err := golden.ReadTraces(outPath)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(want, got))

	b, err := os.ReadFile(telPath)
	require.NoError(t, err)
	var wantCounters map[string]int64
	require.NoError(t, yaml.Unmarshal(b, &wantCounters))
	require.Equal(t, wantCounters, counters)
}

// runProcessor sends one batch through a started processor and returns
// what came out and the processor's own counters.
func runProcessor(t testing.TB, cfg *Config, tel *componenttest.Telemetry, in ptrace.Traces) (ptrace.Traces, map[string]int64) {
	ctx := context.Background()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(ctx, set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(ctx, in))
	require.NoError(t, p.Shutdown(ctx))
	all := sink.AllTraces()
	require.Len(t, all, 1)
	return all[0], readCounters(t, tel)
}

func readCounters(t testing.TB, tel *componenttest.Telemetry) map[string]int64 {
	out := make(map[string]int64, len(ownCounters))
	for _, name := range ownCounters {
		out[name] = 0
		m, err := tel.GetMetric(name)
		if err != nil {
			continue // never recorded
		}
		sum, ok := m.Data.(metricdata.Sum[int64])
		require.True(t, ok, "%s is not an int64 sum", name)
		for _, dp := range sum.DataPoints {
			out[name] += dp.Value
		}
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
