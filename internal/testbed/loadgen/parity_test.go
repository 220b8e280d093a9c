package loadgen

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm/fakellmtest"
	"github.com/streamwatch/streamwatch/semconv"
)

// TestShapeIsHedgeprobes compares the attribute keys of a generated call
// with those hedgeprobe itself records for one: an OpenAI-compatible
// streaming call through the sse adapter to fakellm, unhedged, that ends
// well. A key hedgeprobe starts to write that the generator does not
// (or the other way round) fails here, so the load test keeps measuring
// the spans users send.
func TestShapeIsHedgeprobes(t *testing.T) {
	ts := fakellmtest.Start(t, 0.05)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := hedgeprobe.New(hedgeprobe.Config{}, sse.OpenAIItems, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	stream := p.Stream(t.Context(), sse.OpenAIRoute("primary", sse.OpenAIRequest{
		BaseURL:  ts.URL + "/p/steady/v1",
		APIKey:   "test",
		Model:    "gpt-load",
		Messages: []sse.Message{{Role: "user", Content: "hi"}},
		Client:   &http.Client{Transport: transport},
	}))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	real := map[string][]string{}
	for _, s := range rec.Ended() {
		var keys []string
		for _, kv := range s.Attributes() {
			keys = append(keys, string(kv.Key))
		}
		real[kindOf(s.Name())] = sorted(keys)
	}

	shape := DefaultShape()
	// fakellm's steady profile sends no keepalive, and hedgeprobe writes
	// streamwatch.keepalive.offsets_us only for an attempt that had one.
	shape.CallsPerRequest, shape.HedgeFraction, shape.StallFraction, shape.ErrorFraction = 1, 0, 0, 0
	shape.KeepaliveEvery = 0
	reqs, err := shape.Requests(1, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	generated := map[string][]string{}
	spans := decode(t, reqs[0]).ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		s := spans.At(i)
		generated[kindOf(s.Name())] = sorted(keysOf(s))
	}
	for _, kind := range []string{"call", "attempt"} {
		if !slices.Equal(real[kind], generated[kind]) {
			t.Errorf("%s span: hedgeprobe writes %q\nthe generator writes %q", kind, real[kind], generated[kind])
		}
	}
}

func kindOf(name string) string {
	if name == semconv.CallSpanName {
		return "call"
	}
	return "attempt"
}

func keysOf(s ptrace.Span) []string {
	var keys []string
	s.Attributes().Range(func(k string, _ pcommon.Value) bool {
		keys = append(keys, k)
		return true
	})
	return keys
}

func sorted(keys []string) []string { slices.Sort(keys); return keys }
