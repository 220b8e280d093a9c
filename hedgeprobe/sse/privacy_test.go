package sse_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// The cases below, from an outside privacy review, say how an upstream's
// words reached the span statuses before they carried
// UpstreamError.StatusText; each asserts that the words now reach no span.

var one = hedgeprobe.Config{MaxAttempts: 1}

var hi = []sse.Message{{Role: "user", Content: "hi"}}

// serveSSE serves body as an event stream on 127.0.0.1 until the test ends.
func serveSSE(t *testing.T, body string) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// A 422 without an error object (FastAPI/pydantic validation, as vLLM and
// many OpenAI-compatible servers send it) quotes the request: its start
// was the UpstreamError's Message.
func TestPromptEchoedInErrorBodyNotInSpans(t *testing.T) {
	spans, s := adaptertest.Traced(t, sse.OpenAIItems, one, sse.OpenAIRoute("r", sse.OpenAIRequest{
		BaseURL: adaptertest.EchoingValidation(t), Model: "m",
		Messages: []sse.Message{{Role: "user", Content: "SECRET-PROMPT my diagnosis is"}}}))
	if s.Err() == nil {
		t.Fatal("want the 422's error")
	}
	adaptertest.NoText(t, spans, "SECRET-PROMPT")
}

// An OpenAI-compatible "event: error" whose data is a chunk of the answer
// (a proxy that tags it so): eventError quoted the data's start.
func TestOpenAIErrorEventDataNotInSpans(t *testing.T) {
	url := serveSSE(t, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n"+
		"event: error\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SECRET-ANSWER the rest\"}}]}\n\n")
	spans, s := adaptertest.Traced(t, sse.OpenAIItems, one, sse.OpenAIRoute("r", sse.OpenAIRequest{BaseURL: url, Model: "m", Messages: hi}))
	if s.Err() == nil {
		t.Fatal("want the error event's error")
	}
	adaptertest.NoText(t, spans, "SECRET-ANSWER")
}

// The same on the Anthropic route, whose payloadError quoted the data.
func TestAnthropicErrorEventDataNotInSpans(t *testing.T) {
	url := serveSSE(t, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"x\",\"model\":\"m\"}}\n\n"+
		"event: error\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"SECRET-ANSWER the rest\"}}\n\n")
	spans, s := adaptertest.Traced(t, sse.AnthropicItems, one, sse.AnthropicRoute("r", sse.AnthropicRequest{BaseURL: url, Model: "m", MaxTokens: 10, Messages: hi}))
	if s.Err() == nil {
		t.Fatal("want the error event's error")
	}
	adaptertest.NoText(t, spans, "SECRET-ANSWER")
}

// A resume sends the delivered text as its prefix; an upstream whose 4xx
// body echoes its input put the answer in the resume attempt's status.
func TestResumePrefixEchoedInErrorBodyNotInSpans(t *testing.T) {
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"SECRET-ANSWER begins \"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stall
	}))
	t.Cleanup(stalled.Close)
	spans, s := adaptertest.Traced(t, sse.OpenAIItems,
		hedgeprobe.Config{MaxAttempts: 2, ResumeAfter: 100 * time.Millisecond, StallTimeout: time.Second},
		sse.OpenAIRoute("a", sse.OpenAIRequest{BaseURL: stalled.URL, Model: "m", Messages: hi}),
		sse.OpenAIRoute("b", sse.OpenAIRequest{BaseURL: adaptertest.EchoingValidation(t), Model: "m", Messages: hi, Continue: sse.ContinuePrefix}))
	if st := s.Stats(); len(st.Attempts) < 2 {
		t.Fatalf("no resume attempt: %+v", st)
	}
	adaptertest.NoText(t, spans, "SECRET-ANSWER")
}

// An error object whose message quotes the input (vLLM's validation
// errors: pydantic's text with input_value=…) was written whole.
func TestPromptQuotedInErrorMessageNotInSpans(t *testing.T) {
	url := answer400(t, func(req string) string {
		return `{"message":` + quote("1 validation error for ChatCompletionRequest [type=string_too_long, input_value='"+req+"']") + `,"type":"BadRequestError","code":400}`
	})
	spans, s := adaptertest.Traced(t, sse.OpenAIItems, one, sse.OpenAIRoute("r", sse.OpenAIRequest{BaseURL: url, Model: "m",
		Messages: []sse.Message{{Role: "user", Content: "SECRET-PROMPT my diagnosis is"}}}))
	if s.Err() == nil {
		t.Fatal("want the 400's error")
	}
	adaptertest.NoText(t, spans, "SECRET-PROMPT")
}

// An error object's type and code were kept whole in the statuses, up to
// 1 KiB each: a validation layer that sends the offending input as the
// code (an object, or a sentence), or a type that quotes it, put the
// prompt there. Only a type or code that reads as a code is kept.
func TestPromptInErrorTypeOrCodeNotInSpans(t *testing.T) {
	for name, object := range map[string]func(req string) string{
		"code object": func(req string) string {
			return `{"message":"validation failed","type":"invalid_request_error","code":{"loc":["body"],"input":` + quote(req) + `}}`
		},
		"code sentence": func(req string) string {
			return `{"message":"x","type":"invalid_request_error","code":` + quote("string_too_long: "+req) + `}`
		},
		"type sentence": func(req string) string { return `{"type":` + quote("string_too_long: "+req) + `}` },
	} {
		t.Run(name, func(t *testing.T) {
			spans, s := adaptertest.Traced(t, sse.OpenAIItems, one, sse.OpenAIRoute("r", sse.OpenAIRequest{BaseURL: answer400(t, object), Model: "m",
				Messages: []sse.Message{{Role: "user", Content: "SECRET-PROMPT my diagnosis is"}}}))
			if s.Err() == nil {
				t.Fatal("want the 400's error")
			}
			adaptertest.NoText(t, spans, "SECRET-PROMPT")
		})
	}
}

// The same mid-stream, where the type of an error event's payload was
// also the spans' error.type.
func TestAnswerInMidStreamErrorTypeNotInSpans(t *testing.T) {
	url := serveSSE(t, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SECRET-ANSWER begins\"}}]}\n\n"+
		"event: error\ndata: {\"type\":\"SECRET-ANSWER begins\",\"message\":\"x\"}\n\n")
	spans, s := adaptertest.Traced(t, sse.OpenAIItems, one, sse.OpenAIRoute("r", sse.OpenAIRequest{BaseURL: url, Model: "m", Messages: hi}))
	if s.Err() == nil {
		t.Fatal("want the payload's error")
	}
	adaptertest.NoText(t, spans, "SECRET-ANSWER")
}

// answer400 serves on 127.0.0.1, until the test ends, a 400 whose error
// object object builds from the request's body (which holds the prompt).
func answer400(t *testing.T, object func(req string) string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":%s}`, object(string(b)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
