package hedgeprobe_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/semconv"
)

// The README shows the function between these markers verbatim;
// TestReadmeTracerProvider keeps the two in step.

// --- README: newTracerProvider ---

// newTracerProvider sends spans over OTLP/HTTP to the collector at endpoint
// ("127.0.0.1:4318" with deploy/collector.yaml).
func newTracerProvider(ctx context.Context, endpoint, service string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		return nil, err
	}
	// service.name becomes the job label of every streamwatch metric (with
	// deploy/prometheus.yml's honor_labels). Without it the SDK reports
	// "unknown_service:<binary>". OTEL_SERVICE_NAME, if set, still wins.
	res, err := resource.New(ctx,
		resource.WithAttributes(otelsemconv.ServiceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// --- end ---

// The TracerProvider a program hands to hedgeprobe: an OTLP exporter to the
// collector, a service.name, and Shutdown before exit so the spans still
// batched in memory are sent.
func Example_tracerProvider() {
	ctx := context.Background()
	tp, err := newTracerProvider(ctx, "127.0.0.1:4318", "my-gateway")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil { // flushes the last batch
			log.Print(err)
		}
	}()

	p, err := hedgeprobe.New(hedgeprobe.Config{StallTimeout: time.Minute}, sse.OpenAIItems,
		hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	_ = p // p.Stream(ctx, routes...) as in the README
}

// otlpCollector is a loopback OTLP/HTTP endpoint that keeps what it receives.
type otlpCollector struct {
	mu     sync.Mutex
	traces []ptrace.Traces
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.traces = append(c.traces, req.Traces())
	c.mu.Unlock()
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// The README's TracerProvider delivers a call's spans, under the service
// name it was given, to an OTLP/HTTP endpoint on loopback by the time
// Shutdown returns.
func TestReadmeTracerProviderExports(t *testing.T) {
	rx := &otlpCollector{}
	srv := httptest.NewServer(rx)
	defer srv.Close()

	t.Setenv("OTEL_SERVICE_NAME", "") // the value in code must be what arrives
	tp, err := newTracerProvider(t.Context(), strings.TrimPrefix(srv.URL, "http://"), "my-gateway")
	if err != nil {
		t.Fatal(err)
	}
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 1},
		hedgeprobe.Items[string]{Classify: func(string) hedgeprobe.Kind { return hedgeprobe.Content }},
		hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stream(t.Context(), route("only", time.Millisecond))
	for s.Next() {
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	rx.mu.Lock()
	defer rx.mu.Unlock()
	services := map[string]int{}
	names := map[string]int{}
	for _, td := range rx.traces {
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get(string(otelsemconv.ServiceNameKey))
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					services[svc.AsString()]++
					names[sp.Name()]++
				}
			}
		}
	}
	if services["my-gateway"] != 2 || len(services) != 1 {
		t.Errorf("spans by service.name = %v, want the call and its attempt under my-gateway", services)
	}
	if names[semconv.CallSpanName] != 1 {
		t.Errorf("span names = %v, want one %s", names, semconv.CallSpanName)
	}
}

// TestReadmeTracerProvider keeps the README's snippet identical to the
// compiled function above.
func TestReadmeTracerProvider(t *testing.T) {
	src, err := os.ReadFile("example_tracing_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(src), "// --- README: newTracerProvider ---\n\n")
	if !ok {
		t.Fatal("start marker missing")
	}
	snippet, _, ok := strings.Cut(after, "\n// --- end ---")
	if !ok {
		t.Fatal("end marker missing")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), snippet) {
		t.Errorf("README.md does not show newTracerProvider as compiled in example_tracing_test.go; copy it:\n%s", snippet)
	}
}
