package sse

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// noMarker fails t for every span name, attribute, event (name or
// attribute), link attribute or status description that holds marker.
func noMarker(t *testing.T, spans tracetest.SpanStubs, marker string) {
	t.Helper()
	if len(spans) == 0 {
		t.Fatal("no spans were recorded")
	}
	for _, sp := range spans {
		texts := []string{"name=" + sp.Name, "status=" + sp.Status.Description}
		for _, kv := range sp.Attributes {
			texts = append(texts, string(kv.Key)+"="+kv.Value.Emit())
		}
		for _, ev := range sp.Events {
			texts = append(texts, "event="+ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, "event "+ev.Name+" "+string(kv.Key)+"="+kv.Value.Emit())
			}
		}
		for _, l := range sp.Links {
			for _, kv := range l.Attributes {
				texts = append(texts, "link "+string(kv.Key)+"="+kv.Value.Emit())
			}
		}
		for _, s := range texts {
			if strings.Contains(s, marker) {
				t.Errorf("span %q records %s: %q", sp.Name, marker, s)
			}
		}
	}
}

// traced runs one call, one attempt, of route through a Prober whose
// spans go to an in-memory exporter, and returns the spans and the error.
func traced[T any](t *testing.T, items hedgeprobe.Items[T], route hedgeprobe.Route[T]) (tracetest.SpanStubs, error) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 1}, items, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stream(t.Context(), route)
	for s.Next() {
	}
	err = s.Err()
	_ = s.Close()
	return exp.GetSpans(), err
}

// The cases below say how an upstream's words reached the span statuses
// before they carried UpstreamError.StatusText; each asserts that the words
// now reach no span.

// Privacy (outside review, case 1): an error response without an "error"
// member (FastAPI/pydantic validation, as vLLM and many OpenAI-compatible
// servers send it) echoes the request's input; fillFromPayload quotes the
// body's first 200 bytes as the UpstreamError's Message, and hedgeprobe
// writes Error() into both span statuses: the user's prompt is recorded.
func TestPromptEchoedInErrorBodyNotInSpans(t *testing.T) {
	const prompt = "SECRET-PROMPT my diagnosis is"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		in, _ := json.Marshal(req.Messages[0].Content)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"detail":[{"type":"string_too_long","loc":["body","messages",0,"content"],"input":%s}]}`, in)
	}))
	defer srv.Close()
	spans, err := traced(t, OpenAIItems, OpenAIRoute("r", OpenAIRequest{BaseURL: srv.URL, Model: "m",
		Messages: []Message{{Role: "user", Content: prompt}}}))
	if err == nil {
		t.Fatal("want the 422's error")
	}
	noMarker(t, spans, "SECRET-PROMPT")
}

// Privacy (outside review, case 2): an OpenAI-compatible "event: error"
// whose data has no error object: eventError keeps the data's start
// (printable) as Message, where NewPayloadError refuses to quote data
// without an error object. A proxy that tags a chunk of the answer "error"
// puts completion text in the span statuses.
func TestOpenAIErrorEventDataNotInSpans(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n")
		fmt.Fprint(w, "event: error\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SECRET-ANSWER the rest\"}}]}\n\n")
	}))
	defer srv.Close()
	spans, err := traced(t, OpenAIItems, OpenAIRoute("r", OpenAIRequest{BaseURL: srv.URL, Model: "m",
		Messages: []Message{{Role: "user", Content: "hi"}}}))
	if err == nil {
		t.Fatal("want the error event's error")
	}
	noMarker(t, spans, "SECRET-ANSWER")
}

// Privacy (outside review, case 3): the same on the Anthropic route:
// payloadError of an "event: error" whose data is not an error payload
// quotes the data.
func TestAnthropicErrorEventDataNotInSpans(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"x\",\"model\":\"m\"}}\n\n")
		fmt.Fprint(w, "event: error\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"SECRET-ANSWER the rest\"}}\n\n")
	}))
	defer srv.Close()
	spans, err := traced(t, AnthropicItems, AnthropicRoute("r", AnthropicRequest{BaseURL: srv.URL, Model: "m", MaxTokens: 10,
		Messages: []Message{{Role: "user", Content: "hi"}}}))
	if err == nil {
		t.Fatal("want the error event's error")
	}
	noMarker(t, spans, "SECRET-ANSWER")
}

// Privacy (outside review, case 1b): the same fallback carries completion
// text: a resume attempt sends the delivered text as the prefix (an
// assistant message), and an upstream whose 4xx body echoes its input puts
// the answer in the resume attempt's span status.
func TestResumePrefixEchoedInErrorBodyNotInSpans(t *testing.T) {
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"SECRET-ANSWER begins \"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stall
	}))
	defer stalled.Close()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		last := len(req.Messages) - 1
		in, _ := json.Marshal(req.Messages[last].Content)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"detail":[{"loc":["body","messages",%d],"input":%s}]}`, last, in)
	}))
	defer echo.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 2, ResumeAfter: 100 * time.Millisecond, StallTimeout: time.Second},
		OpenAIItems, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	s := p.Stream(t.Context(),
		OpenAIRoute("a", OpenAIRequest{BaseURL: stalled.URL, Model: "m", Messages: msgs}),
		OpenAIRoute("b", OpenAIRequest{BaseURL: echo.URL, Model: "m", Messages: msgs, Continue: ContinuePrefix}))
	for s.Next() {
	}
	_ = s.Close()
	if st := s.Stats(); len(st.Attempts) < 2 {
		t.Fatalf("no resume attempt: %+v", st)
	}
	noMarker(t, exp.GetSpans(), "SECRET-ANSWER")
}

// Privacy (outside review, case 4): an error object whose message quotes the
// input (vLLM's validation errors: pydantic's text with input_value=…) is
// written whole into both span statuses.
func TestPromptQuotedInErrorMessageNotInSpans(t *testing.T) {
	const prompt = "SECRET-PROMPT my diagnosis is"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		msg, _ := json.Marshal("1 validation error for ChatCompletionRequest\nmessages.0.content\n  String should have at most 8 characters [type=string_too_long, input_value='" +
			req.Messages[0].Content + "', input_type=str]")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"BadRequestError","code":400}}`, msg)
	}))
	defer srv.Close()
	spans, err := traced(t, OpenAIItems, OpenAIRoute("r", OpenAIRequest{BaseURL: srv.URL, Model: "m",
		Messages: []Message{{Role: "user", Content: prompt}}}))
	if err == nil {
		t.Fatal("want the 400's error")
	}
	noMarker(t, spans, "SECRET-PROMPT")
}
