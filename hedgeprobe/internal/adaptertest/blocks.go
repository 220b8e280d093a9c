package adaptertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// An Anthropic answer whose text is its second content block, after a
// thinking block, for the resume tests of block numbering
// (hedgeprobe.Items.Relabel): a continuation numbers its blocks from 0,
// and its block 0 carries on the answer's block 1.
const (
	// Thinking is the answer's thinking, block 0.
	Thinking = "Let me think."
	// BlockText is the answer's text, block 1: the primary sends
	// BlockPrefix and falls silent, the continuation sends the rest.
	BlockText   = BlockPrefix + " a time."
	BlockPrefix = "Once upon"
)

// BlockScript varies the answer of ServeThinkingThenText.
type BlockScript struct {
	// Name names the subtest.
	Name string
	// Space: the primary's text ends in a space, BlockPrefix + " ", which
	// the prefill cuts and the continuation repeats.
	Space bool
	// TextInStart: the continuation's block start carries its first text
	// (" a"), as some Anthropic-compatible servers send it; Anthropic's
	// carries "".
	TextInStart bool
	// Complete: the primary sends the whole BlockText and a space before
	// it falls silent, and the continuation has no content: its block
	// start carries only that space (cut from the prefill), then the
	// block's end and the message's. The caller reads BlockText + " ".
	Complete bool
	// Follows: the continuation does not carry the text on but begins
	// with a block of another type — "tool_use" (a call of FollowTool with
	// FollowInput), "thinking" (FollowThinking, on a compatible server
	// that reasons again) or "redacted_thinking" (no content) — in its
	// block 0, and with either thinking the rest of BlockText in its
	// block 1. Its blocks follow the answer's (hedgeprobe.Items.Follows,
	// RelabelAfter): the caller reads the answer's text block with
	// BlockPrefix alone, then the continuation's blocks. "text, tool_use"
	// is no such continuation: an empty text block 0, ended, then the tool
	// call in block 1; the text block is the answer's, the call follows it.
	Follows string
}

// The continuation's own blocks of a BlockScript that Follows.
const (
	FollowTool     = "get_weather"
	FollowInput    = `{"city":"Oslo"}`
	FollowThinking = "Again."
)

// Want returns the blocks the caller must read, as BlockRead returns
// them.
func (s BlockScript) Want() []string {
	switch s.Follows {
	case "tool_use":
		return []string{"thinking:" + Thinking, "text:" + BlockPrefix, "tool_use:" + FollowTool + FollowInput}
	case "thinking":
		return []string{"thinking:" + Thinking, "text:" + BlockPrefix, "thinking:" + FollowThinking, "text:" + BlockText[len(BlockPrefix):]}
	case "redacted_thinking":
		return []string{"thinking:" + Thinking, "text:" + BlockPrefix, "redacted_thinking:", "text:" + BlockText[len(BlockPrefix):]}
	case "text, tool_use":
		return []string{"thinking:" + Thinking, "text:" + BlockPrefix, "tool_use:" + FollowTool + FollowInput}
	case "":
	default:
		panic("BlockScript.Follows: " + s.Follows)
	}
	if s.Complete {
		return []string{"thinking:" + Thinking, "text:" + BlockText + " "}
	}
	return []string{"thinking:" + Thinking, "text:" + BlockText}
}

// BlockScripts are the variants every Anthropic adapter runs.
var BlockScripts = []BlockScript{
	{Name: "text in deltas"},
	{Name: "text in the block start", TextInStart: true},
	{Name: "cut space, text in the block start", Space: true, TextInStart: true},
	{Name: "no content, the cut space alone in the block start", Complete: true},
	{Name: "a continuation that calls a tool first", Follows: "tool_use"},
	{Name: "a continuation that thinks first", Follows: "thinking"},
	{Name: "a continuation that begins with redacted thinking", Follows: "redacted_thinking"},
	{Name: "a continuation with an empty text block, then a tool call", Follows: "text, tool_use"},
}

// BlockRead is the caller's loop over a call of ServeThinkingThenText: it
// reads the stream to its end and returns the answer's content blocks, each
// as "type:text" (a thinking block's thinking), and the error the loop
// ended with; a tool_use block as "tool_use:" + its name + its input.
// It fails the test itself on what only it can see (a block started
// twice, say).
type BlockRead[T any] func(t testing.TB, stream *hedgeprobe.Stream[T]) (blocks []string, err error)

// CheckResumeKeepsTheBlock runs a call per BlockScripts entry: route builds
// a route that can continue (a prefill) on an API root, read is the
// caller's loop. The continuation must win, and the caller must read the
// thinking in block 0 and BlockText, once, in block 1 — or, where the
// continuation Follows, BlockPrefix in block 1 and its blocks after it.
func (a Adapter[T]) CheckResumeKeepsTheBlock(t *testing.T, route func(t *testing.T, name, url string) hedgeprobe.Route[T], read BlockRead[T]) {
	t.Helper()
	for _, script := range BlockScripts {
		t.Run(script.Name, func(t *testing.T) {
			stalls, continues := ServeThinkingThenText(t, script)
			stream := a.NewProber(t, ResumeConfig).Stream(t.Context(), route(t, "stalls", stalls), route(t, "continues", continues))
			defer stream.Close()
			blocks, err := read(t, stream)
			if err != nil {
				t.Fatal(err)
			}
			if st := stream.Stats(); st.Winner != 1 || st.Attempts[1].Trigger != hedgeprobe.TriggerResume {
				t.Fatalf("stats %+v: the continuation must win", st)
			}
			if want := script.Want(); !slices.Equal(blocks, want) {
				t.Fatalf("the caller read blocks %q, want %q", blocks, want)
			}
		})
	}
}

// ServeThinkingThenText serves two scripted Anthropic upstreams on
// 127.0.0.1 until the test ends and returns their API roots: stalls sends
// the thinking block and BlockPrefix in block 1, then nothing until its
// request ends (or 5 s pass: then it ends the response without
// message_stop); continues answers a request whose last message is the
// assistant's BlockPrefix (a prefill) with the rest of BlockText in its
// own block 0, and anything else with a 400.
func ServeThinkingThenText(t testing.TB, s BlockScript) (stalls, continues string) {
	t.Helper()
	sent := BlockPrefix
	if s.Space {
		sent += " "
	}
	rest := BlockText[len(BlockPrefix):] // " a time."
	startText, deltaText := "", rest
	if s.TextInStart {
		startText, deltaText = rest[:2], rest[2:]
	}
	prefix := BlockPrefix // the prefill the continuation expects
	if s.Complete {
		sent, prefix, startText = BlockText+" ", BlockText, " "
	}
	start := `{"type":"message_start","message":{"id":"msg_%s","type":"message","role":"assistant","model":"claude-fake","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}`
	stalling := []string{
		fmt.Sprintf(start, "stalls"),
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"` + Thinking + `"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"` + sent + `"}}`,
	}
	continuing := []string{
		fmt.Sprintf(start, "continues"),
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"` + startText + `"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + deltaText + `"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	}
	if s.Complete {
		continuing = slices.Delete(continuing, 2, 3) // no delta
	}
	input, _ := json.Marshal(FollowInput)
	toolCall := func(index int) []string {
		return []string{
			fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_1","name":"%s","input":{}}}`, index, FollowTool),
			fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, input),
			fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index),
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`,
			`{"type":"message_stop"}`,
		}
	}
	// textAfter puts the continuation's text block after the given
	// block 0 (one of its own).
	textAfter := func(block0 ...string) {
		continuing = slices.Insert(continuing, 1, block0...)
		for i := len(block0) + 1; i <= len(block0)+3; i++ { // the text block is block 1
			continuing[i] = strings.Replace(continuing[i], `"index":0`, `"index":1`, 1)
		}
	}
	switch s.Follows {
	case "tool_use":
		continuing = append([]string{fmt.Sprintf(start, "continues")}, toolCall(0)...)
	case "text, tool_use":
		continuing = append([]string{fmt.Sprintf(start, "continues"),
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_stop","index":0}`}, toolCall(1)...)
	case "thinking":
		textAfter(`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"`+FollowThinking+`"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
			`{"type":"content_block_stop","index":0}`)
	case "redacted_thinking":
		textAfter(`{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"opaque"}}`,
			`{"type":"content_block_stop","index":0}`)
	}
	stalls = serveEvents(t, func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, stalling)
		// Silent until the request ends; a test that does not resume
		// fails in seconds (a stream cut before message_stop), not at its
		// timeout.
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	continues = serveEvents(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if n := len(body.Messages); n == 0 || body.Messages[n-1].Role != "assistant" || prefillText(body.Messages[n-1].Content) != prefix {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"not a continuation of the script"}}`, http.StatusBadRequest)
			return
		}
		writeEvents(w, continuing)
	})
	return stalls, continues
}

// prefillText is the text of a message's content, a string or text
// blocks.
func prefillText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct{ Text string }
	_ = json.Unmarshal(content, &blocks)
	for _, b := range blocks {
		s += b.Text
	}
	return s
}

// serveEvents serves h on 127.0.0.1 until the test ends.
func serveEvents(t testing.TB, h http.HandlerFunc) string {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// writeEvents writes Anthropic SSE events, each named by its type, and
// flushes them.
func writeEvents(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, data := range events {
		var e struct{ Type string }
		_ = json.Unmarshal([]byte(data), &e)
		_, _ = io.WriteString(w, "event: "+e.Type+"\ndata: "+data+"\n\n")
	}
	w.(http.Flusher).Flush()
}
