package streamwatchconnector

import (
	"context"
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/semconv"
)

// FuzzConsume feeds arbitrary attempt and call spans — any figure, type,
// timeline (the caller's view included), gap counts, ejection event or
// timestamps —
// through the connector: it must never panic and
// never emit a NaN, a negative sum or inconsistent buckets.
func FuzzConsume(f *testing.F) {
	f.Add(uint8(0), 100.0, 200.0, int64(1), []byte{1, 0, 2, 0, 3, 0}, uint64(10), uint64(20), 30000.0, "complete")
	f.Add(uint8(0xff), -1.0, 1e308, int64(-4), []byte{0xff, 0xff, 0, 0x80}, uint64(20), uint64(10), -1.0, "anomaly")
	f.Add(uint8(0x5a), 0.0, 0.0, int64(0), []byte{}, uint64(0), uint64(0), 0.0, "")
	f.Fuzz(func(t *testing.T, sel uint8, ttft, gen float64, stalls int64, raw []byte, start, end uint64, stallMs float64, derivation string) {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()

		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		a := sp.Attributes()
		// sel's bits pick which attributes are present and with which type.
		put := func(bit uint, k string, v float64) {
			switch {
			case sel&(1<<bit) == 0:
				a.PutDouble(k, v)
			case bit%2 == 0:
				a.PutStr(k, "x")
			default:
				a.PutInt(k, int64(v))
			}
		}
		a.PutInt(string(semconv.AttemptIndex), stalls%3)
		outcomes := []string{semconv.AttemptOutcomeWinner, semconv.AttemptOutcomeCanceled, semconv.AttemptOutcomeFailed}
		a.PutStr(string(semconv.AttemptOutcome), outcomes[int(sel)%3])
		put(0, string(semconv.TTFTMs), ttft)
		put(1, string(semconv.GenerationMs), gen)
		put(2, string(semconv.ActiveGenerationMs), gen-ttft)
		put(3, string(semconv.StallCount), float64(stalls))
		put(4, string(semconv.ChunkCount), float64(stalls))
		if sel&(1<<5) == 0 {
			a.PutStr(string(semconv.Derivation), derivation)
		}
		offs := a.PutEmptySlice(string(semconv.ChunkOffsetsUs))
		var t0 int64
		for i := 0; i+1 < len(raw); i += 2 {
			t0 += int64(int16(binary.LittleEndian.Uint16(raw[i:]))) * 1000
			offs.AppendEmpty().SetInt(t0)
		}
		if sel&(1<<6) != 0 {
			offs.AppendEmpty().SetDouble(ttft)
		}
		if sel&(1<<7) != 0 {
			// Gap counts from the same bytes: any length, any sign.
			gc := a.PutEmptySlice(string(semconv.GapBucketCounts))
			for _, c := range raw {
				gc.AppendEmpty().SetInt(int64(int8(c)))
			}
		}
		e := sp.Events().AppendEmpty()
		e.SetName(semconv.EventStall)
		e.Attributes().PutDouble(string(semconv.StallDurationMs), stallMs)
		ce := sp.Events().AppendEmpty()
		ce.SetName(semconv.EventChunk)
		ce.SetTimestamp(pcommon.Timestamp(end))

		call := spans.AppendEmpty()
		call.SetName(semconv.CallSpanName)
		call.SetStartTimestamp(pcommon.Timestamp(start))
		call.SetEndTimestamp(pcommon.Timestamp(end))
		call.Attributes().PutStr(string(semconv.Outcome), derivation)
		call.Attributes().PutDouble(string(semconv.GenAIResponseTimeToFirstChunk), ttft/1000)
		// The caller's view, as derived by the processor (figures from the
		// fuzzed values) and raw in an underived twin; an ejection event.
		call.Attributes().PutDouble(string(semconv.StallMs), stallMs)
		call.Attributes().PutInt(string(semconv.StallCount), stalls)
		call.Attributes().PutStr(string(semconv.Derivation), derivation)
		ej := call.Events().AppendEmpty()
		ej.SetName(semconv.EventRouteEjected)
		if sel&(1<<7) == 0 {
			ej.Attributes().PutStr(string(semconv.EventRoute), derivation)
		}
		callTwin := spans.AppendEmpty()
		call.CopyTo(callTwin)
		callTwin.Attributes().Remove(string(semconv.Derivation))
		offs.CopyTo(callTwin.Attributes().PutEmptySlice(string(semconv.CallerChunkOffsetsUs)))
		// The unprocessed twin: the connector derives it itself.
		twin := spans.AppendEmpty()
		sp.CopyTo(twin)
		twin.Attributes().Remove(string(semconv.Derivation))

		sink := &consumertest.MetricsSink{}
		cfg := createDefaultConfig().(*Config)
		cfg.MaxSeries = 2
		c, err := newConnector(connectortest.NewNopSettings(NewFactory().Type()), cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		for _, last := range []bool{false, true} { // the leading zeros, then every count
			if err := c.flush(context.Background(), last); err != nil {
				t.Fatal(err)
			}
		}
		for _, md := range sink.AllMetrics() {
			assertSane(t, md)
		}
	})
}
