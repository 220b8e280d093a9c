package adaptertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Traced runs one call over routes, read to its end and closed, through a
// Prober of cfg and items whose spans go to an in-memory exporter, and
// returns the spans and the ended Stream (its Err and Stats).
func Traced[T any](t *testing.T, items hedgeprobe.Items[T], cfg hedgeprobe.Config, routes ...hedgeprobe.Route[T]) (tracetest.SpanStubs, *hedgeprobe.Stream[T]) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	p, err := hedgeprobe.New(cfg, items, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stream(t.Context(), routes...)
	for s.Next() {
	}
	_ = s.Close()
	return exp.GetSpans(), s
}

// NoText fails t for every span name, attribute, event (name or
// attribute), link attribute or status description of spans that holds
// marker: no prompt or completion text is recorded.
func NoText(t *testing.T, spans tracetest.SpanStubs, marker string) {
	t.Helper()
	if len(spans) == 0 {
		t.Fatal("no spans were recorded")
	}
	for _, sp := range spans {
		texts := []string{"name=" + sp.Name, "status=" + sp.Status.Description}
		for _, kv := range sp.Attributes {
			texts = append(texts, string(kv.Key)+"="+kv.Value.String())
		}
		for _, ev := range sp.Events {
			texts = append(texts, "event="+ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, "event "+ev.Name+" "+string(kv.Key)+"="+kv.Value.String())
			}
		}
		for _, l := range sp.Links {
			for _, kv := range l.Attributes {
				texts = append(texts, "link "+string(kv.Key)+"="+kv.Value.String())
			}
		}
		for _, s := range texts {
			if strings.Contains(s, marker) {
				t.Errorf("span %q records %s: %q", sp.Name, marker, s)
			}
		}
	}
}

// EchoingValidation serves, on 127.0.0.1 until the test ends, a status
// 422 whose body has no error object and quotes the whole request, as a
// FastAPI/pydantic validation error quotes its input: the prompt with it.
func EchoingValidation(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		in, _ := json.Marshal(string(b))
		fmt.Fprintf(w, `{"detail":[{"type":"string_too_long","loc":["body"],"input":%s}]}`, in)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}
