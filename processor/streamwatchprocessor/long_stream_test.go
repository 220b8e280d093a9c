package streamwatchprocessor

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/stagetest"
	"github.com/streamwatch/streamwatch/semconv"
)

// -generate rewrites the generated stage inputs (testdata/long_stream/input.yaml).
var generate = flag.Bool("generate", false, "rewrite generated stage inputs under testdata/")

const longStreamDir = "testdata/long_stream"

// TestGenerateLongStream writes the input of the 5,000-chunk stage. Run it
// with -generate, then -update to refresh the expected output.
func TestGenerateLongStream(t *testing.T) {
	if !*generate {
		t.Skip("run with -generate to rewrite " + longStreamDir + "/input.yaml")
	}
	td := ptrace.NewTraces()
	chunks, kas := syntheticStream(5000, 42)
	appendAttempt(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1, chunks, kas)
	require.NoError(t, os.MkdirAll(longStreamDir, 0o755))
	require.NoError(t, golden.WriteTracesToFile(filepath.Join(longStreamDir, stagetest.Input), td))
}

// TestLongStreamFigures checks the figures of the 5,000-chunk stage against
// a naive reading of docs/design.md §4, independent of the breakdown package.
func TestLongStreamFigures(t *testing.T) {
	in, err := golden.ReadTraces(filepath.Join(longStreamDir, stagetest.Input))
	require.NoError(t, err)
	span := in.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	v, _ := span.Attributes().Get(string(semconv.ChunkOffsetsUs))
	offs := make([]int64, v.Slice().Len())
	for i := range offs {
		offs[i] = v.Slice().At(i).Int()
	}
	require.Len(t, offs, 5000)

	const T = 2_000_000
	var stall, active, stalls int64
	prevStalled := false
	for i := 1; i < len(offs); i++ {
		g := offs[i] - offs[i-1]
		if g > T {
			stall += g
			if !prevStalled {
				stalls++
			}
		} else {
			active += g
		}
		prevStalled = g > T
	}
	gen := offs[len(offs)-1] - offs[0]

	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(t.Context())) }()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	out := runProcessor(t, cfg, tel, in)
	got := out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	f := func(k string) float64 { v, ok := got.Get(k); require.True(t, ok, k); return v.Double() }

	assert.Equal(t, float64(offs[0])/1000, f(string(semconv.TTFTMs)))
	assert.Equal(t, float64(offs[len(offs)-1])/1000, f(string(semconv.E2EMs)))
	assert.Equal(t, float64(gen)/1000, f(string(semconv.GenerationMs)))
	assert.Equal(t, float64(stall)/1000, f(string(semconv.StallMs)))
	assert.Equal(t, float64(active)/1000, f(string(semconv.ActiveGenerationMs)))
	assert.InDelta(t, float64(gen)/1000/4999, f(string(semconv.ITLMeanMs)), 1e-9)
	assert.InDelta(t, float64(gen)/1000/14999, f(string(semconv.TPOTMs)), 1e-9)
	assert.InDelta(t, 14999/(float64(active)/1e6), f(string(semconv.ActiveTPS)), 1e-6)
	sc, _ := got.Get(string(semconv.StallCount))
	assert.Equal(t, stalls, sc.Int())
	assert.Equal(t, int64(9), stalls, "the generator puts a silence at every 500th gap")
}
