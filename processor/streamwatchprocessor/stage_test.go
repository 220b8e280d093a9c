package streamwatchprocessor

import (
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamwatch/streamwatch/internal/stagetest"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/metadata"
)

// TestStages runs every stage directory under testdata/ (the layout of
// internal/stagetest, shared with the connector): expected.yaml holds the
// output traces.
func TestStages(t *testing.T) {
	for _, dir := range stagetest.Dirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { runStage(t, dir) })
	}
}

func runStage(t *testing.T, dir string) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	stagetest.LoadConfig(t, dir, cfg)
	in, err := golden.ReadTraces(filepath.Join(dir, stagetest.Input))
	require.NoError(t, err)

	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	got := runProcessor(t, cfg, tel, in)

	outPath := filepath.Join(dir, stagetest.Expected)
	if *update {
		require.NoError(t, golden.WriteTracesToFile(outPath, got))
	}
	want, err := golden.ReadTraces(outPath)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(want, got))
	stagetest.CheckCounters(t, dir, stagetest.Counters(t, tel), *update)
}

// runProcessor sends one batch through a started processor and returns
// what came out.
func runProcessor(t testing.TB, cfg *Config, tel *componenttest.Telemetry, in ptrace.Traces) ptrace.Traces {
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
	return all[0]
}

// -update rewrites every stage's expected.yaml and telemetry.yaml from the
// processor's current output. Review the diff before committing it.
var update = flag.Bool("update", false, "rewrite the expected output of every stage in testdata/")
