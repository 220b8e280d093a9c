package sse

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/semconv"
)

func TestUpstreamErrorType(t *testing.T) {
	for _, tc := range []struct {
		err  UpstreamError
		want string
	}{
		{UpstreamError{StatusCode: 429, Type: "rate_limit_error"}, "429"},
		{UpstreamError{StatusCode: 503}, "503"},
		{UpstreamError{MidStream: true, Type: "overloaded_error"}, "overloaded_error"},
		{UpstreamError{MidStream: true}, "error_payload"},
		{UpstreamError{MidStream: true, Type: strings.Repeat("x", 65)}, "error_payload"},
		{UpstreamError{MidStream: true, Type: "RESOURCE_EXHAUSTED"}, "RESOURCE_EXHAUSTED"},
		// A type that is a sentence is upstream text, which can quote the
		// answer: it was the spans' error.type, and so a metric label.
		{UpstreamError{MidStream: true, Type: "SECRET-ANSWER begins"}, "error_payload"},
		{UpstreamError{MidStream: true, Type: `{"input":"x"}`}, "error_payload"},
	} {
		if got := tc.err.ErrorType(); got != tc.want {
			t.Errorf("%+v: ErrorType %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestMidStreamTransient: an error payload inside a stream is as transient
// as the status its type is paired with — Anthropic's billing_error is a
// 402, fatal, and was hedged mid-stream.
func TestMidStreamTransient(t *testing.T) {
	for typ, status := range map[string]int{
		"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
		"permission_error": 403, "not_found_error": 404, "request_too_large": 413,
		"rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
		"server_error": 500,
	} {
		mid := (&UpstreamError{MidStream: true, Type: typ}).Transient()
		if http := (&UpstreamError{StatusCode: status, Type: typ}).Transient(); mid != http {
			t.Errorf("%s: transient %v mid-stream, %v as HTTP %d", typ, mid, http, status)
		}
	}
}

// TestErrorTypeOnSpans: a provider's HTTP error is reported on the attempt
// and call spans by its status, the code the GenAI conventions ask for
// (it was the Go type, "*sse.UpstreamError", for every status).
func TestErrorTypeOnSpans(t *testing.T) {
	for _, code := range []int{429, 500, 400} {
		spans, _ := oneCall(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"error":{"type":"x_error","message":"m"}}`))
		})
		if len(spans) != 2 {
			t.Fatalf("HTTP %d: %d spans, want the attempt's and the call's", code, len(spans))
		}
		for _, sp := range spans {
			got := ""
			for _, kv := range sp.Attributes {
				if kv.Key == semconv.ErrorType {
					got = kv.Value.AsString()
				}
			}
			if got != strconv.Itoa(code) {
				t.Errorf("HTTP %d: span %q error.type %q", code, sp.Name, got)
			}
		}
	}
}

// Regression: a 200 response that was not an event stream was quoted in
// the error's text, and hedgeprobe writes that text into the attempt's and
// the call's span status — a whole answer, from a server that ignored
// "stream": true, in telemetry. The body reaches the caller in the error's
// Body and nowhere in the spans.
func TestNotAStreamBodyOutOfSpans(t *testing.T) {
	const answer = `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"QUOKKA secret answer"}}]}`
	spans, err := oneCall(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(answer))
	})
	var pe *ProtocolError
	if !errors.As(err, &pe) || string(pe.Body) != answer {
		t.Fatalf("err %v: want a ProtocolError holding the body", err)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the attempt's and the call's", len(spans))
	}
	for _, sp := range spans {
		if sp.Status.Code != codes.Error || !strings.Contains(sp.Status.Description, "want text/event-stream") {
			t.Errorf("span %q status %v %q", sp.Name, sp.Status.Code, sp.Status.Description)
		}
		texts := []string{sp.Status.Description}
		for _, kv := range sp.Attributes {
			texts = append(texts, kv.Value.String())
		}
		for _, ev := range sp.Events {
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, s := range texts {
			if strings.Contains(s, "QUOKKA") {
				t.Errorf("span %q carries the answer: %q", sp.Name, s)
			}
		}
	}
}

// oneCall makes one call, with one attempt, on an OpenAI route to an
// upstream served by h, and returns the spans it ended and its error.
func oneCall(t *testing.T, h http.HandlerFunc) (tracetest.SpanStubs, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 1}, OpenAIItems, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stream(t.Context(), OpenAIRoute("r", OpenAIRequest{BaseURL: srv.URL, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}))
	for s.Next() {
	}
	err = s.Err()
	_ = s.Close()
	return exp.GetSpans(), err
}
