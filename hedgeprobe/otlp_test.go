package hedgeprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

// otlpReceiver is an in-memory OTLP/HTTP receiver: an http.RoundTripper
// that decodes each export request with the collector's unmarshaller.
type otlpReceiver struct {
	mu     sync.Mutex
	traces []ptrace.Traces
}

func (r *otlpReceiver) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	ex := ptraceotlp.NewExportRequest()
	if err := ex.UnmarshalProto(body); err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	r.mu.Lock()
	r.traces = append(r.traces, ex.Traces())
	r.mu.Unlock()
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	return &http.Response{
		StatusCode: http.StatusOK, Request: req,
		Header: http.Header{"Content-Type": []string{"application/x-protobuf"}},
		Body:   io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)),
	}, nil
}

// spans returns every span received, in order; each must come from
// hedgeprobe's instrumentation scope.
func (r *otlpReceiver) spans(t *testing.T) []ptrace.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ptrace.Span
	for _, td := range r.traces {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				if ss.Scope().Name() != InstrumentationName {
					t.Fatalf("scope %q", ss.Scope().Name())
				}
				for _, sp := range ss.Spans().All() {
					out = append(out, sp)
				}
			}
		}
	}
	return out
}

// exportedTo returns a receiver and a tracer provider whose spans the
// SDK's OTLP/HTTP exporter sends it, each as it ends.
func exportedTo(t *testing.T) (*otlpReceiver, *sdktrace.TracerProvider) {
	rx := &otlpReceiver{}
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL("http://collector.invalid/v1/traces"),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: rx}), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rx, tp
}

// The timeline survives an OTLP export unchanged: the SDK's OTLP/HTTP
// exporter encodes it, the collector's pdata decodes it.
func TestTelemetryOTLPRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rx, tp := exportedTo(t)

		const n = 3000
		steps := make([]step, 0, n+20)
		want := make([]int64, 0, n)
		var at time.Duration
		for i := range n {
			d := time.Duration(500+i%977) * time.Microsecond
			if i == 0 {
				d = 1600 * time.Millisecond
			}
			if i == 1500 {
				d = 55 * time.Second // the mid-stream silence
				at += 10 * time.Second
				steps = append(steps, keepalive(10*time.Second))
				d -= 10 * time.Second
			}
			at += d
			steps = append(steps, content(d, "x"))
			want = append(want, at.Microseconds())
		}
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", steps)
		p := mustNew(t, Config{HedgeAfter: 800 * time.Millisecond, StallTimeout: time.Minute, MaxAttempts: 2}, WithTracerProvider(tp))
		if g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now()); g.err != nil {
			t.Fatal(g.err)
		}
		found := map[int64]ptrace.Span{}
		var call ptrace.Span
		for _, sp := range rx.spans(t) {
			if sp.Name() == semconv.CallSpanName {
				call = sp
				continue
			}
			idx, _ := sp.Attributes().Get(string(semconv.AttemptIndex))
			found[idx.Int()] = sp
		}
		if len(found) != 2 || call.Name() == "" {
			t.Fatalf("received %d attempt spans", len(found))
		}
		w := found[1]
		if w.ParentSpanID() != call.SpanID() || w.Kind() != ptrace.SpanKindClient {
			t.Fatal("parentage or kind lost")
		}
		v, ok := w.Attributes().Get(string(semconv.ChunkOffsetsUs))
		if !ok || v.Slice().Len() != n {
			t.Fatalf("timeline missing or short: %v", v.Slice().Len())
		}
		for i := range n {
			if got := v.Slice().At(i).Int(); got != want[i] {
				t.Fatalf("offset %d = %d, want %d", i, got, want[i])
			}
		}
		ka, _ := w.Attributes().Get(string(semconv.KeepaliveOffsetsUs))
		if ka.Slice().Len() != 1 || ka.Slice().At(0).Int() != want[1499]+10_000_000 {
			t.Fatalf("keepalive offsets %v", ka.AsRaw())
		}
		lo, _ := w.Attributes().Get(string(semconv.AttemptLaunchOffsetMs))
		if lo.Double() != 800 {
			t.Fatalf("launch offset %v", lo.AsRaw())
		}
		// Offsets count from the span's start as exported.
		if got := w.StartTimestamp().AsTime().Sub(call.StartTimestamp().AsTime()); got != 800*time.Millisecond {
			t.Fatalf("attempt starts %v after the call", got)
		}
	})
}

// An error text or a response model that is not UTF-8 reaches the
// collector, replaced: OTLP sends them as protobuf strings, and the SDK's
// exporter failed the whole export on one that is not UTF-8 (the call's
// spans were lost).
func TestTelemetryOTLPInvalidUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rx, tp := exportedTo(t)
		a := newUpstream("a", []step{content(time.Second, "x"), fail(time.Second, errors.New("upstream said \xff\xfe"))})
		p := mustNew(t, Config{}, WithTracerProvider(tp), withModel(func(chunk) (string, bool) { return "model-\xc3", true }))
		if g := drain(p.Stream(t.Context(), a.route()), time.Now()); g.err == nil {
			t.Fatal("the call did not fail")
		}
		var got []string
		for _, sp := range rx.spans(t) {
			m, _ := sp.Attributes().Get(string(semconv.GenAIResponseModel))
			got = append(got, sp.Status().Message()+"|"+m.Str())
		}
		slices.Sort(got)
		if want := []string{"upstream said \uFFFD|", "upstream said \uFFFD|model-\uFFFD"}; !slices.Equal(got, want) {
			t.Fatalf("spans received (status|response model): %q, want %q", got, want)
		}
	})
}

// Past the keepalive cap the list holds the first keepalives and the
// span counts the rest; the collector's derivation then leaves the count
// of a stall that outlasts the list unknown, not short. (With the
// default cap of 1,000 a chatty upstream reached it and a long silence
// read as one with no keepalives.)
func TestTelemetryOTLPKeepaliveCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rx, tp := exportedTo(t)
		// A 2 s stall with keepalives at 1.5 and 2.5 s, then a 3 s stall
		// with keepalives at 3.51, 4.51 and 5.51 s.
		a := newUpstream("a", []step{content(time.Second, "x"), keepalive(500 * time.Millisecond), keepalive(time.Second),
			content(500*time.Millisecond, "x"), content(10*time.Millisecond, "x"),
			keepalive(500 * time.Millisecond), keepalive(time.Second), keepalive(time.Second),
			content(500*time.Millisecond, "x"), content(10*time.Millisecond, "x")})
		p := mustNew(t, Config{}, WithTracerProvider(tp), WithKeepaliveOffsets(3))
		if g := drain(p.Stream(t.Context(), a.route()), time.Now()); g.err != nil {
			t.Fatal(g.err)
		}
		var attempt ptrace.Span
		for _, sp := range rx.spans(t) {
			if sp.Name() != semconv.CallSpanName {
				attempt = sp
			}
		}
		ka, _ := attempt.Attributes().Get(string(semconv.KeepaliveOffsetsUs))
		dropped, _ := attempt.Attributes().Get(string(semconv.KeepalivesDropped))
		if got := ka.Slice().AsRaw(); !slices.Equal(got, []any{int64(1_500_000), int64(2_500_000), int64(3_510_000)}) || dropped.Int() != 2 {
			t.Fatalf("keepalive offsets %v, dropped %v: want the first three, 2 dropped", got, dropped.AsRaw())
		}
		var b timeline.Buffers
		d := timeline.Derive(attempt, &b, 1_000_000, 16)
		var got []int
		for _, seg := range d.Result.Segments {
			got = append(got, seg.Keepalives)
		}
		if want := []int{2, -1}; !slices.Equal(got, want) {
			t.Fatalf("derived keepalives per stall %v, want %v (-1: unknown)", got, want)
		}
	})
}
