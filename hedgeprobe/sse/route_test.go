package sse

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// captured is one request an upstream saw.
type captured struct {
	path   string
	header http.Header
	body   map[string]any
}

func capture(t *testing.T, reply string) (*httptest.Server, chan captured) {
	t.Helper()
	ch := make(chan captured, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		ch <- captured{path: r.URL.Path, header: r.Header.Clone(), body: body}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(ts.Close)
	return ts, ch
}

func TestOpenAIRouteRequest(t *testing.T) {
	ts, ch := capture(t, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n")
	route := OpenAIRoute("primary", OpenAIRequest{
		BaseURL:  ts.URL + "/v1/",
		APIKey:   "sk-test",
		Model:    "gpt-x",
		Messages: []Message{{Role: "user", Content: "hi"}},
		Params:   map[string]any{"temperature": 0.5, "stream": false},
		Header:   http.Header{"X-Fakellm-Profile": {"steady"}},
	})
	if route.Name != "primary" || route.Provider != "openai" || route.Model != "gpt-x" {
		t.Fatalf("route %+v", route)
	}
	src, err := route.Open(t.Context(), hedgeprobe.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for src.Next() {
		n++
	}
	if src.Err() != nil || n != 1 {
		t.Fatalf("items %d err %v", n, src.Err())
	}
	got := <-ch
	if got.path != "/v1/chat/completions" || got.header.Get("Authorization") != "Bearer sk-test" ||
		got.header.Get("Accept") != "text/event-stream" || got.header.Get("X-Fakellm-Profile") != "steady" {
		t.Fatalf("request %s %v", got.path, got.header)
	}
	if got.body["model"] != "gpt-x" || got.body["stream"] != true || got.body["temperature"] != 0.5 {
		t.Fatalf("body %v", got.body)
	}
	if so, _ := got.body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options %v", got.body["stream_options"])
	}
	if msgs, _ := got.body["messages"].([]any); len(msgs) != 1 {
		t.Fatalf("messages %v", got.body["messages"])
	}
}

func TestAnthropicRouteRequest(t *testing.T) {
	ts, ch := capture(t, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	route := AnthropicRoute("claude", AnthropicRequest{
		BaseURL:  ts.URL,
		APIKey:   "ak",
		Model:    "claude-x",
		System:   "be brief",
		Messages: []Message{{Role: "user", Content: "hi"}},
	})
	src, err := route.Open(t.Context(), hedgeprobe.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	for src.Next() {
	}
	if src.Err() != nil {
		t.Fatal(src.Err())
	}
	got := <-ch
	if got.path != "/v1/messages" || got.header.Get("X-Api-Key") != "ak" || got.header.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("request %s %v", got.path, got.header)
	}
	if got.body["max_tokens"] != float64(1024) || got.body["system"] != "be brief" || got.body["stream"] != true {
		t.Fatalf("body %v", got.body)
	}
}

func TestRouteConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	route := OpenAIRoute("r", OpenAIRequest{BaseURL: "http://" + addr + "/v1", Model: "m"})
	_, err = route.Open(t.Context(), hedgeprobe.Attempt{})
	var ce *ConnectionError
	if !errors.As(err, &ce) || ce.Connected || !ce.Transient() {
		t.Fatalf("err %v (%T)", err, err)
	}
}

// The routes name their server from the base URL, for the attempt span's
// server.address and server.port: the URL's port, else its scheme's; an
// IPv6 address without its brackets; nothing for a URL without a host.
func TestRouteServer(t *testing.T) {
	for _, c := range []struct {
		base string
		addr string
		port int
	}{
		{"https://api.openai.com/v1", "api.openai.com", 443},
		{"http://127.0.0.1:8000/v1", "127.0.0.1", 8000},
		{"http://localhost/v1", "localhost", 80},
		{"https://[::1]:8443", "::1", 8443},
		{"HTTPS://API.example.com", "API.example.com", 443},
		{"unix:///tmp/llm.sock", "", 0},
		{"api.openai.com/v1", "", 0},
		{"http://host:99999/v1", "host", 0},
		{"://bad", "", 0},
	} {
		for _, r := range []hedgeprobe.Route[ChatChunk]{
			OpenAIRoute("o", OpenAIRequest{BaseURL: c.base, Model: "m"}),
			AnthropicChatRoute("a", AnthropicRequest{BaseURL: c.base, Model: "m"}),
		} {
			if r.ServerAddress != c.addr || r.ServerPort != c.port {
				t.Errorf("%s route on %q: server %q port %d, want %q %d", r.Name, c.base, r.ServerAddress, r.ServerPort, c.addr, c.port)
			}
		}
		if r := AnthropicRoute("a", AnthropicRequest{BaseURL: c.base, Model: "m"}); r.ServerAddress != c.addr || r.ServerPort != c.port {
			t.Errorf("Anthropic route on %q: server %q port %d, want %q %d", c.base, r.ServerAddress, r.ServerPort, c.addr, c.port)
		}
	}
}

// Mistral's API refuses stream_options (422, extra_forbidden), so a
// Mistral route — provider mistral_ai, or ContinuePrefixEcho — sends none,
// on its first attempt and on a resume; a nil Params["stream_options"]
// leaves it out on any route; and every other route asks for usage.
func TestOpenAIRouteStreamOptions(t *testing.T) {
	if ProviderMistralAI != otelsemconv.GenAIProviderNameMistralAI.Value.AsString() {
		t.Fatalf("ProviderMistralAI %q is not the semantic conventions' %q", ProviderMistralAI, otelsemconv.GenAIProviderNameMistralAI.Value.AsString())
	}
	for _, tc := range []struct {
		name     string
		provider string
		cont     Continuation
		params   map[string]any
		resume   bool
		sent     bool
	}{
		{"default", "", ContinueNone, nil, false, true},
		{"vLLM resume", "", ContinueFinalMessage, map[string]any{"continue_final_message": true}, true, true},
		{"Mistral by continuation", "", ContinuePrefixEcho, nil, false, false},
		{"Mistral by continuation, resume", "", ContinuePrefixEcho, nil, true, false},
		{"Mistral by provider", ProviderMistralAI, ContinueNone, nil, false, false},
		{"left out", "", ContinueNone, map[string]any{"stream_options": nil}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, ch := capture(t, "data: [DONE]\n\n")
			r := OpenAIRoute("r", OpenAIRequest{BaseURL: ts.URL + "/v1", Model: "m", Provider: tc.provider, Continue: tc.cont, Params: tc.params,
				Messages: []Message{{Role: "user", Content: "a story"}}})
			at := hedgeprobe.Attempt{}
			if tc.resume {
				at = hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once upon"}
			}
			src, err := r.Open(t.Context(), at)
			if err != nil {
				t.Fatal(err)
			}
			for src.Next() {
			}
			_ = src.Close()
			body := (<-ch).body
			so, sent := body["stream_options"]
			if sent != tc.sent {
				t.Fatalf("stream_options %v (sent: %v), want sent: %v; body %v", so, sent, tc.sent, body)
			}
			if sent && fmt.Sprint(so) != "map[include_usage:true]" {
				t.Fatalf("stream_options %v", so)
			}
		})
	}
}
