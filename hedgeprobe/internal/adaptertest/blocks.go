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
	// BlockPrefix alone (and the space, with Space), then the
	// continuation's blocks (the text one without the repeated space).
	// "text, tool_use", "text, thinking" and "text, redacted_thinking" are
	// no such continuations: an empty text block 0, ended, then that block
	// (and the text) after it; the empty block is the answer's, what comes
	// after it follows it, and must reach the caller from its start,
	// whether the start carries content (a tool call's name) or not.
	Follows string
	// UsageFirst: the continuation sends a message_delta with its usage
	// (no stop reason yet) before its first block's start, as a
	// compatible server may. It closes nothing the caller reads: the
	// blocks are read as without it.
	UsageFirst bool
	// Pings: the continuation sends a ping after each of its events, the
	// first after message_start as Anthropic does. A ping is a keepalive:
	// the caller reads the blocks as without them.
	Pings bool
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
	// With Space the caller has the space already, and the
	// continuation's own text block, which repeats it, is read without.
	sent, rest := BlockPrefix, BlockText[len(BlockPrefix):]
	if s.Space {
		sent, rest = sent+" ", rest[1:]
	}
	switch s.Follows {
	case "tool_use", "text, tool_use":
		return []string{"thinking:" + Thinking, "text:" + sent, "tool_use:" + FollowTool + FollowInput}
	case "thinking", "text, thinking":
		return []string{"thinking:" + Thinking, "text:" + sent, "thinking:" + FollowThinking, "text:" + rest}
	case "redacted_thinking", "text, redacted_thinking":
		return []string{"thinking:" + Thinking, "text:" + sent, "redacted_thinking:", "text:" + rest}
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
	{Name: "a continuation with an empty text block, then thinking", Follows: "text, thinking"},
	{Name: "a continuation with an empty text block, then redacted thinking", Follows: "text, redacted_thinking"},
	{Name: "cut space, a continuation that thinks first, then text in the block start", Follows: "thinking", Space: true, TextInStart: true},
	{Name: "cut space, a continuation that thinks first, then text in deltas", Follows: "thinking", Space: true},
	{Name: "usage before the block start", UsageFirst: true},
	{Name: "usage before the block start, text in it", UsageFirst: true, TextInStart: true},
	{Name: "usage before a tool call", UsageFirst: true, Follows: "tool_use"},
	{Name: "pings between the events", Pings: true},
	{Name: "pings, usage before an empty text block, then a tool call", Pings: true, UsageFirst: true, Follows: "text, tool_use"},
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
	// The continuation's blocks that are not text, at index i.
	thinking := func(i int) []string {
		return []string{
			fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i),
			fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":"%s"}}`, i, FollowThinking),
			fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":"sig"}}`, i),
			fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i),
		}
	}
	redacted := func(i int) []string {
		return []string{
			fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"redacted_thinking","data":"opaque"}}`, i),
			fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i),
		}
	}
	emptyText := []string{
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_stop","index":0}`,
	}
	// textAfter puts the continuation's text block after the given
	// blocks of its own, numbered after them.
	textAfter := func(blocks ...[]string) {
		before := slices.Concat(blocks...)
		continuing = slices.Insert(continuing, 1, before...)
		for i := len(before) + 1; i <= len(before)+3; i++ {
			continuing[i] = strings.Replace(continuing[i], `"index":0`, fmt.Sprintf(`"index":%d`, len(blocks)), 1)
		}
	}
	switch s.Follows {
	case "tool_use":
		continuing = append([]string{fmt.Sprintf(start, "continues")}, toolCall(0)...)
	case "text, tool_use":
		continuing = slices.Concat([]string{fmt.Sprintf(start, "continues")}, emptyText, toolCall(1))
	case "thinking":
		textAfter(thinking(0))
	case "redacted_thinking":
		textAfter(redacted(0))
	case "text, thinking":
		textAfter(emptyText, thinking(1))
	case "text, redacted_thinking":
		textAfter(emptyText, redacted(1))
	}
	if s.UsageFirst {
		continuing = slices.Insert(continuing, 1, `{"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":null},"usage":{"output_tokens":1}}`)
	}
	if s.Pings {
		for i := len(continuing); i > 0; i-- {
			continuing = slices.Insert(continuing, i, `{"type":"ping"}`)
		}
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
		if prefill(r) != prefix {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"not a continuation of the script"}}`, http.StatusBadRequest)
			return
		}
		writeEvents(w, continuing)
	})
	return stalls, continues
}

// prefill returns the text of the request's last message when the
// assistant's (a prefill: what a continuation must carry on), or "".
func prefill(r *http.Request) string {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == "assistant" {
		return prefillText(body.Messages[n-1].Content)
	}
	return ""
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

// CheckResumeAfterFollowing runs the calls where a continuation that
// follows the answer meets another rule of resume, on scripted upstreams;
// route and read as for CheckResumeKeepsTheBlock:
//
//   - resumed twice: the first continuation thinks, then carries on the
//     text in its own block and falls silent in it; the second continues
//     that block (the block numbers compound) and then calls a tool;
//   - Buffered, resumed before commit: the answer falls silent before it
//     commits and a continuation that calls a tool first wins.
func (a Adapter[T]) CheckResumeAfterFollowing(t *testing.T, route func(t *testing.T, name, url string) hedgeprobe.Route[T], read BlockRead[T]) {
	t.Helper()
	start := func(id string) string {
		return `{"type":"message_start","message":{"id":"msg_` + id + `","type":"message","role":"assistant","model":"claude-fake","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}`
	}
	text := func(i int, s string) []string {
		return []string{
			fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i),
			fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%q}}`, i, s),
		}
	}
	stop := func(i int) string { return fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i) }
	thinking := func(i int, s string) []string {
		return []string{
			fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i),
			fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%q}}`, i, s),
			fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":"sig"}}`, i),
			stop(i),
		}
	}
	input, _ := json.Marshal(FollowInput)
	tool := []string{
		fmt.Sprintf(`{"type":"content_block_start","index":%%d,"content_block":{"type":"tool_use","id":"toolu_1","name":"%s","input":{}}}`, FollowTool),
		`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":` + string(input) + `}}`,
		`{"type":"content_block_stop","index":%d}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	}
	toolAt := func(i int) []string {
		out := slices.Clone(tool)
		for j := range 3 {
			out[j] = fmt.Sprintf(out[j], i)
		}
		return out
	}
	answer := slices.Concat([]string{start("a")}, thinking(0, Thinking), text(1, BlockPrefix))
	wantCall := "tool_use:" + FollowTool + FollowInput
	for _, c := range []struct {
		name     string
		cfg      func(*hedgeprobe.Config)
		upstream [][]string // the last answers; the others fall silent
		want     []string
	}{
		{"resumed twice, the second continuing the first's own text block",
			// The first continuation's events must come before a second
			// resume is due, or the second would continue the first
			// answer's text instead: 500 ms, not ResumeConfig's 80.
			func(c *hedgeprobe.Config) { c.MaxAttempts, c.ResumeAfter = 3, 500*time.Millisecond },
			[][]string{
				answer,
				slices.Concat([]string{start("b")}, thinking(0, FollowThinking), text(1, " a")),
				slices.Concat([]string{start("c")}, text(0, " time."), []string{stop(0)}, toolAt(1)),
			},
			[]string{"thinking:" + Thinking, "text:" + BlockPrefix, "thinking:" + FollowThinking, "text: a time.", wantCall}},
		{"buffered, resumed before commit by a tool call",
			func(c *hedgeprobe.Config) { c.Delivery, c.StallAfter = hedgeprobe.Buffered, ResumeConfig.ResumeAfter },
			[][]string{answer, slices.Concat([]string{start("b"), `{"type":"ping"}`}, toolAt(0))},
			[]string{"thinking:" + Thinking, "text:" + BlockPrefix, wantCall}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ResumeConfig
			c.cfg(&cfg)
			var routes []hedgeprobe.Route[T]
			for i, events := range c.upstream {
				last := i == len(c.upstream)-1
				url := serveEvents(t, func(w http.ResponseWriter, r *http.Request) {
					writeEvents(w, events)
					if !last {
						select {
						case <-r.Context().Done():
						case <-time.After(5 * time.Second):
						}
					}
				})
				routes = append(routes, route(t, fmt.Sprint("r", i), url))
			}
			stream := a.NewProber(t, cfg).Stream(t.Context(), routes...)
			defer stream.Close()
			blocks, err := read(t, stream)
			if err != nil {
				t.Fatal(err)
			}
			if st := stream.Stats(); st.Winner != len(routes)-1 || st.Attempts[st.Winner].Trigger != hedgeprobe.TriggerResume {
				t.Fatalf("stats %+v: the last continuation must win", st)
			}
			if !slices.Equal(blocks, c.want) {
				t.Fatalf("the caller read blocks %q, want %q", blocks, c.want)
			}
		})
	}
}
