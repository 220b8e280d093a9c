package streamwatchprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/metadata"
)

// The batch of docs/design.md §6 and issue 6: 100 attempt spans × 2,000 chunks,
// each with its keepalives and a few silences.
const (
	benchSpans  = 100
	benchChunks = 2000
)

// BenchmarkDerive measures the processor on the batch, through the factory
// and processorhelper as a pipeline runs it, in ns per chunk. Each
// iteration derives a fresh copy; the copy is outside the timer.
//
//	go test ./processor/streamwatchprocessor -run '^$' -bench 'Derive|Unmarshal' -benchmem
func BenchmarkDerive(b *testing.B) {
	batch := attemptBatch(benchSpans, benchChunks)
	ctx := context.Background()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	p, err := NewFactory().CreateTraces(ctx, set, NewFactory().CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(b, err)
	require.NoError(b, p.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(b, p.Shutdown(ctx)) }()

	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		td := ptrace.NewTraces()
		batch.CopyTo(td)
		b.StartTimer()
		if err := p.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	reportPerChunk(b)
}

// BenchmarkUnmarshal is the baseline: unmarshalling the same batch from
// OTLP protobuf, the least work a collector does for it.
func BenchmarkUnmarshal(b *testing.B) {
	buf, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(attemptBatch(benchSpans, benchChunks))
	require.NoError(b, err)
	var u ptrace.ProtoUnmarshaler

	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		td, err := u.UnmarshalTraces(buf)
		if err != nil || td.SpanCount() != benchSpans {
			b.Fatal(err)
		}
	}
	reportPerChunk(b)
}

func reportPerChunk(b *testing.B) {
	chunks := float64(b.N) * benchSpans * benchChunks
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/chunks, "ns/chunk")
}
