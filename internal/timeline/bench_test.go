package timeline

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/semconv"
)

// benchTraces is one attempt span in the compact form hedgeprobe emits:
// chunks offsets 20 ms apart and a keepalive every 5 s.
func benchTraces(chunks int) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	a := sp.Attributes()
	a.PutInt(string(semconv.AttemptIndex), 0)
	a.PutInt(string(semconv.ChunkCount), int64(chunks))
	offs := a.PutEmptySlice(string(semconv.ChunkOffsetsUs))
	kas := a.PutEmptySlice(string(semconv.KeepaliveOffsetsUs))
	for i := range chunks {
		offs.AppendEmpty().SetInt(300_000 + int64(i)*20_000)
	}
	for t := int64(5_000_000); t < 300_000+int64(chunks)*20_000; t += 5_000_000 {
		kas.AppendEmpty().SetInt(t)
	}
	return td
}

func perChunk(b *testing.B, chunks int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(chunks), "ns/chunk")
}

// BenchmarkRead: reading a 300-chunk timeline off its span, against its
// baseline, unmarshalling that span from OTLP (the receiver's work).
//
//	go test -run '^$' -bench Read ./internal/timeline/
func BenchmarkRead(b *testing.B) {
	const chunks = 300
	td := benchTraces(chunks)
	b.Run("read", func(b *testing.B) {
		sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		var buf Buffers
		b.ReportAllocs()
		for b.Loop() {
			if in := Read(sp, &buf); len(in.Chunks) != chunks {
				b.Fatal(in.Malformed)
			}
		}
		perChunk(b, chunks)
	})
	b.Run("unmarshal_otlp", func(b *testing.B) {
		raw, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			b.Fatal(err)
		}
		var u ptrace.ProtoUnmarshaler
		b.ReportAllocs()
		for b.Loop() {
			if _, err := u.UnmarshalTraces(raw); err != nil {
				b.Fatal(err)
			}
		}
		perChunk(b, chunks)
	})
}
