package adaptertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// An OpenAI-compatible answer whose text falls silent and whose
// continuation calls a tool, for the resume tests of tool-call fragments
// before the continuation's first content (hedgeprobe.Items.Follows).
const (
	// ToolPrefix is the answer's text: the primary sends it and falls
	// silent, and the continuation goes on from it with a tool call.
	ToolPrefix = "Let me look that up."
	// ToolCallID, ToolName and ToolArgs are the continuation's call.
	ToolCallID = "call_1"
	ToolName   = "get_weather"
	ToolArgs   = `{"city":"Oslo"}`
)

// ToolScript varies how the continuation of ServeTextThenToolCall begins
// its tool call: the fragments of its first chunks, each a JSON
// tool_calls entry of the delta.
type ToolScript struct {
	// Name names the subtest.
	Name string
	// RoleWithCall: the first fragment comes in the role chunk.
	RoleWithCall bool
	// Fragments are the call's fragments, in order, each its own chunk.
	Fragments []string
	// UsageFirst: a usage-only chunk (no choices) comes after the role
	// chunk, before the first fragment, as a server that reports usage
	// early may send it. It must not end the search for the call's id.
	UsageFirst bool
}

// ToolScripts are the variants every OpenAI-compatible adapter runs. A
// fragment with only the call's id and type (some compatible servers send
// one before the name) carries no content: it comes before the
// continuation's first content, where what opens an answer is not
// delivered again, yet the caller needs the id.
var ToolScripts = []ToolScript{
	{Name: "id and name in one fragment", Fragments: []string{
		`{"index":0,"id":"` + ToolCallID + `","type":"function","function":{"name":"` + ToolName + `","arguments":""}}`,
		`{"index":0,"function":{"arguments":` + quote(ToolArgs) + `}}`,
	}},
	{Name: "the id alone first", Fragments: []string{
		`{"index":0,"id":"` + ToolCallID + `","type":"function"}`,
		`{"index":0,"function":{"name":"` + ToolName + `"}}`,
		`{"index":0,"function":{"arguments":` + quote(ToolArgs) + `}}`,
	}},
	{Name: "the id alone in the role chunk", RoleWithCall: true, Fragments: []string{
		`{"index":0,"id":"` + ToolCallID + `","type":"function"}`,
		`{"index":0,"function":{"name":"` + ToolName + `","arguments":` + quote(ToolArgs) + `}}`,
	}},
	{Name: "usage, then the id alone", UsageFirst: true, Fragments: []string{
		`{"index":0,"id":"` + ToolCallID + `","type":"function"}`,
		`{"index":0,"function":{"name":"` + ToolName + `"}}`,
		`{"index":0,"function":{"arguments":` + quote(ToolArgs) + `}}`,
	}},
}

// WantToolCall is the call the caller must read, as ToolRead returns it.
const WantToolCall = ToolCallID + " " + ToolName + ToolArgs

// ToolRead is the caller's loop over a call of ServeTextThenToolCall: it
// reads the stream to its end and returns the content the caller
// received, its tool calls, each as "id name" + arguments, its finish
// reason and the error the loop ended with.
type ToolRead[T any] func(t testing.TB, stream *hedgeprobe.Stream[T]) (content string, calls []string, finish string, err error)

// CheckResumeToolCall runs a call per ToolScripts entry: route builds a
// route that continues with a trailing assistant message on an API root,
// read is the caller's loop. The continuation must win, and the caller
// must read ToolPrefix, then the whole call, id included, and the finish
// reason tool_calls.
func (a Adapter[T]) CheckResumeToolCall(t *testing.T, route func(t *testing.T, name, url string) hedgeprobe.Route[T], read ToolRead[T]) {
	t.Helper()
	for _, script := range ToolScripts {
		t.Run(script.Name, func(t *testing.T) {
			stalls, continues := ServeTextThenToolCall(t, script)
			stream := a.NewProber(t, ResumeConfig).Stream(t.Context(), route(t, "stalls", stalls), route(t, "continues", continues))
			defer stream.Close()
			content, calls, finish, err := read(t, stream)
			if err != nil {
				t.Fatal(err)
			}
			if st := stream.Stats(); st.Winner != 1 || st.Attempts[1].Trigger != hedgeprobe.TriggerResume {
				t.Fatalf("stats %+v: the continuation must win", st)
			}
			if content != ToolPrefix || !slices.Equal(calls, []string{WantToolCall}) || finish != "tool_calls" {
				t.Fatalf("the caller read content %q, calls %q, finish %q; want %q, [%q], tool_calls", content, calls, finish, ToolPrefix, WantToolCall)
			}
		})
	}
}

// ServeTextThenToolCall serves two scripted OpenAI-compatible upstreams
// on 127.0.0.1 until the test ends and returns their API roots: stalls
// sends the role chunk and ToolPrefix, then nothing until its request ends
// (or 5 s pass); continues answers a request whose last message is the
// assistant's ToolPrefix with the script's tool call, and anything else
// with a 400.
func ServeTextThenToolCall(t testing.TB, s ToolScript) (stalls, continues string) {
	t.Helper()
	chunk := func(id, delta, finish string) string {
		return fmt.Sprintf(`{"id":"chatcmpl-%s","object":"chat.completion.chunk","created":1,"model":"gpt-fake","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, id, delta, finish)
	}
	stalling := []string{
		chunk("stalls", `{"role":"assistant","content":""}`, "null"),
		chunk("stalls", `{"content":`+quote(ToolPrefix)+`}`, "null"),
	}
	var continuing []string
	fragments := s.Fragments
	if s.RoleWithCall {
		continuing = append(continuing, chunk("continues", `{"role":"assistant","tool_calls":[`+fragments[0]+`]}`, "null"))
		fragments = fragments[1:]
	} else {
		continuing = append(continuing, chunk("continues", `{"role":"assistant","content":""}`, "null"))
	}
	if s.UsageFirst {
		continuing = append(continuing, `{"id":"chatcmpl-continues","object":"chat.completion.chunk","created":1,"model":"gpt-fake","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}
	for _, f := range fragments {
		continuing = append(continuing, chunk("continues", `{"tool_calls":[`+f+`]}`, "null"))
	}
	continuing = append(continuing, chunk("continues", `{}`, `"tool_calls"`))

	stalls = serveEvents(t, func(w http.ResponseWriter, r *http.Request) {
		writeChunks(w, stalling, false)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	continues = serveEvents(t, func(w http.ResponseWriter, r *http.Request) {
		if prefill(r) != ToolPrefix {
			http.Error(w, `{"error":{"type":"invalid_request_error","message":"not a continuation of the script"}}`, http.StatusBadRequest)
			return
		}
		writeChunks(w, continuing, true)
	})
	return stalls, continues
}

// writeChunks writes chat chunks as SSE data lines, then [DONE] when done,
// and flushes them.
func writeChunks(w http.ResponseWriter, chunks []string, done bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, data := range chunks {
		_, _ = io.WriteString(w, "data: "+data+"\n\n")
	}
	if done {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
	w.(http.Flusher).Flush()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
