package sse_test

import (
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

var (
	openAIAdapter    = adaptertest.Adapter[sse.ChatChunk]{Items: sse.OpenAIItems}
	anthropicAdapter = adaptertest.Adapter[sse.AnthropicEvent]{Items: sse.AnthropicItems}
)

// itemsText reads a stream to its end with items.Text and returns the
// answer text and the stream's error. With id, every item that has one
// must have the first one's, as the chunks of one completion do, resumed
// or not (Items.Relabel).
func itemsText[T any](items hedgeprobe.Items[T], id func(T) string) adaptertest.ReadFunc[T] {
	return func(t testing.TB, s *hedgeprobe.Stream[T]) (string, error) {
		text, first := "", ""
		for s.Next() {
			chunk, _ := items.Text(s.Current())
			text += chunk
			if id == nil {
				continue
			}
			switch got := id(s.Current()); {
			case first == "":
				first = got
			case got != "" && got != first:
				t.Fatalf("a chunk of id %q after %q: one answer has one id", got, first)
			}
		}
		return text, s.Err()
	}
}

// chatID is a ChatChunk's id.
func chatID(c sse.ChatChunk) string { return c.ID }

// TestE2EResumeOpenAI: the raw OpenAI route resumes a stalled stream on
// the next route that continues, once, twice, past a refusal, or leaves it
// to the watchdog; the caller reads fakellm's script byte for byte.
func TestE2EResumeOpenAI(t *testing.T) {
	openAIAdapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[sse.ChatChunk] {
		return openAIResumeRoute(t, up, r.Profile, r.Continuation())
	}, itemsText(sse.OpenAIItems, chatID))
}

// TestE2EResumeSwitches: continue_final_message and "prefix": true reach
// the wire — fakellm's profiles that need them answer afresh without.
func TestE2EResumeSwitches(t *testing.T) {
	openAIAdapter.CheckResumeSwitches(t, openAIResumeRoute, itemsText(sse.OpenAIItems, chatID))
}

// TestE2EResumeAnthropic: the raw Anthropic route resumes with a prefill;
// the delivered text ends in a space, which the prefill loses and the
// continuation repeats, and the caller reads it once.
func TestE2EResumeAnthropic(t *testing.T) {
	anthropicAdapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[sse.AnthropicEvent] {
		return sse.AnthropicRoute(r.Profile, sse.AnthropicRequest{
			BaseURL:  up.ProfileURL(r.Profile),
			APIKey:   "test",
			Model:    "claude-fake",
			Messages: []sse.Message{{Role: "user", Content: "hi"}},
			Client:   client(t),
			Prefill:  r.Continues,
		})
	}, itemsText(sse.AnthropicItems, nil))
}

// TestE2EResumeAfterCallerPrefill: a request that ends in the caller's own
// assistant message is resumed as one assistant message — the caller's,
// extended by the delivered text — on both dialects.
func TestE2EResumeAfterCallerPrefill(t *testing.T) {
	msgs := []sse.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: adaptertest.CallerPrefill}}
	t.Run("anthropic", func(t *testing.T) {
		anthropicAdapter.CheckResumeAfterCallerPrefill(t, func(t *testing.T, up *adaptertest.Upstream, profile string) hedgeprobe.Route[sse.AnthropicEvent] {
			return sse.AnthropicRoute(profile, sse.AnthropicRequest{BaseURL: up.ProfileURL(profile), APIKey: "test", Model: "claude-fake",
				Messages: msgs, Client: client(t), Prefill: true})
		}, itemsText(sse.AnthropicItems, nil))
	})
	t.Run("openai", func(t *testing.T) {
		openAIAdapter.CheckResumeAfterCallerPrefill(t, func(t *testing.T, up *adaptertest.Upstream, profile string) hedgeprobe.Route[sse.ChatChunk] {
			return sse.OpenAIRoute(profile, sse.OpenAIRequest{BaseURL: up.ProfileURL(profile) + "/v1", APIKey: "test", Model: "fake-model",
				Messages: msgs, Client: client(t), Continue: sse.ContinueTrailingAssistant})
		}, itemsText(sse.OpenAIItems, chatID))
	})
}

// openAIResumeRoute is the raw OpenAI route of one fakellm profile that
// continues in the way how.
func openAIResumeRoute(t *testing.T, up *adaptertest.Upstream, profile string, how sse.Continuation) hedgeprobe.Route[sse.ChatChunk] {
	return openaiProfileRoute(t, up.ProfileURL(profile), profile, how)
}

// TestChatTextCases: ChatText reads the chunks every OpenAI adapter's
// Items.Text reads alike (a last text with its finish reason ends the
// answer: not resumable).
func TestChatTextCases(t *testing.T) { adaptertest.CheckChatText(t, sse.ChatText) }

// TestAnthropicTextCases: AnthropicText reads the events the Anthropic
// adapter's Items.Text reads, alike.
func TestAnthropicTextCases(t *testing.T) { adaptertest.CheckAnthropicText(t, sse.AnthropicText) }

// TestOpeningCases: the items that open an answer, in both dialects.
func TestOpeningCases(t *testing.T) {
	adaptertest.CheckOpening(t, adaptertest.ChatOpeningCases, sse.OpenAIItems.Opening)
	adaptertest.CheckOpening(t, adaptertest.ChatFollowsCases, sse.OpenAIItems.Follows)
	adaptertest.CheckOpening(t, adaptertest.AnthropicOpeningCases, sse.AnthropicItems.Opening)
	adaptertest.CheckOpening(t, adaptertest.AnthropicFollowsCases, sse.AnthropicItems.Follows)
}

// TestE2EResponseOnSpan: the raw routes' items from fakellm describe the
// response on the attempt span, in both dialects.
func TestE2EResponseOnSpan(t *testing.T) {
	up := adaptertest.Start(t)
	msgs := []sse.Message{{Role: "user", Content: "hi"}}
	openAIAdapter.CheckResponseOnSpan(t, sse.OpenAIRoute("steady", sse.OpenAIRequest{BaseURL: up.ProfileURL("steady") + "/v1", APIKey: "test",
		Model: "fake-model", Messages: msgs, Client: client(t)}), "chatcmpl-", "stop")
	anthropicAdapter.CheckResponseOnSpan(t, sse.AnthropicRoute("steady", sse.AnthropicRequest{BaseURL: up.ProfileURL("steady"), APIKey: "test",
		Model: "claude-fake", Messages: msgs, Client: client(t)}), "msg_", "end_turn")
	// Converted to chat chunks: the input tokens come from message_start
	// (message_delta leaves them out), the finish reason is OpenAI's.
	openAIAdapter.CheckResponseOnSpan(t, sse.AnthropicChatRoute("steady", sse.AnthropicRequest{BaseURL: up.ProfileURL("steady"), APIKey: "test",
		Model: "claude-fake", Messages: msgs, Client: client(t)}), "msg_", "stop")
}

// TestResponseCases: the response's id, input tokens and finish reasons,
// in both dialects, as every adapter reads them.
func TestResponseCases(t *testing.T) {
	adaptertest.CheckResponse(t, adaptertest.ChatResponseCases, sse.OpenAIItems)
	adaptertest.CheckResponse(t, adaptertest.AnthropicResponseCases, sse.AnthropicItems)
}

// TestE2EResumeAnthropicKeepsTheBlock: an answer whose text is block 1,
// after a thinking block, falls silent and is continued; the
// continuation's blocks, numbered from 0, reach the caller as blocks 1…
// (AnthropicRelabel), so the text is all in block 1, read once, the
// block started and ended once — also when the continuation's block start
// carries text, and with a space the prefill cut.
func TestE2EResumeAnthropicKeepsTheBlock(t *testing.T) {
	anthropicAdapter.CheckResumeKeepsTheBlock(t, func(t *testing.T, name, url string) hedgeprobe.Route[sse.AnthropicEvent] {
		return sse.AnthropicRoute(name, sse.AnthropicRequest{BaseURL: url, APIKey: "test", Model: "claude-fake",
			Messages: []sse.Message{{Role: "user", Content: "hi"}}, Client: client(t), Prefill: true})
	}, readBlocks)
}

// TestE2EResumeAfterFollowing: a second resume continues a following
// continuation's own text block, and a resume before commit (Buffered)
// may follow the answer too, on the raw Anthropic route.
func TestE2EResumeAfterFollowing(t *testing.T) {
	anthropicAdapter.CheckResumeAfterFollowing(t, func(t *testing.T, name, url string) hedgeprobe.Route[sse.AnthropicEvent] {
		return sse.AnthropicRoute(name, sse.AnthropicRequest{BaseURL: url, APIKey: "test", Model: "claude-fake",
			Messages: []sse.Message{{Role: "user", Content: "hi"}}, Client: client(t), Prefill: true})
	}, readBlocks)
}

// readBlocks reads a call's events and returns its blocks; every block
// must be started once, in order, and ended at most once, after its
// start, in order (the answer's text block, which a continuation that
// follows it leaves open, has no end).
func readBlocks(t testing.TB, stream *hedgeprobe.Stream[sse.AnthropicEvent]) ([]string, error) {
	var blocks []string
	stopped := -1
	for stream.Next() {
		switch e := stream.Current(); e.Type {
		case "content_block_start":
			if e.Index != len(blocks) {
				t.Fatalf("block %d started after %d blocks", e.Index, len(blocks))
			}
			blocks = append(blocks, e.ContentBlock.Type+":"+e.ContentBlock.Thinking+e.ContentBlock.Text+e.ContentBlock.Name)
		case "content_block_delta":
			if e.Index >= len(blocks) || e.Index <= stopped {
				t.Fatalf("a delta of block %d, after %d blocks started and block %d ended", e.Index, len(blocks), stopped)
			}
			blocks[e.Index] += e.Delta.Thinking + e.Delta.Text + e.Delta.PartialJSON
		case "content_block_stop":
			if e.Index >= len(blocks) || e.Index <= stopped {
				t.Fatalf("block %d ended, after %d blocks started and block %d ended", e.Index, len(blocks), stopped)
			}
			stopped = e.Index
		}
	}
	if stopped != len(blocks)-1 {
		t.Fatalf("the last block of %d ended: %d", len(blocks), stopped)
	}
	return blocks, stream.Err()
}

// TestChatRelabelCases: ChatRelabel relabels as the SDK adapters' Relabel
// do.
func TestChatRelabelCases(t *testing.T) {
	adaptertest.CheckChatRelabel(t, sse.ChatRelabel, func(c sse.ChatChunk) (string, int64, string) { return c.ID, c.Created, c.Model })
}

// TestE2EResumeOpenAIToolCall: a continuation that goes on from the
// delivered text with a tool call reaches the caller of the raw OpenAI
// route whole — also when the call's id comes alone, before its name, in
// the continuation's opening chunks.
func TestE2EResumeOpenAIToolCall(t *testing.T) {
	openAIAdapter.CheckResumeToolCall(t, func(t *testing.T, name, url string) hedgeprobe.Route[sse.ChatChunk] {
		return openaiProfileRoute(t, url, name, sse.ContinueTrailingAssistant)
	}, func(t testing.TB, stream *hedgeprobe.Stream[sse.ChatChunk]) (string, []string, string, error) {
		content, finish := "", ""
		type call struct{ id, name, args string }
		var calls []call
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				content += ch.Delta.Content
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
				for _, f := range ch.Delta.ToolCalls {
					for len(calls) <= f.Index {
						calls = append(calls, call{})
					}
					if f.ID != "" {
						calls[f.Index].id = f.ID
					}
					calls[f.Index].name += f.Function.Name
					calls[f.Index].args += f.Function.Arguments
				}
			}
		}
		var out []string
		for _, c := range calls {
			out = append(out, c.id+" "+c.name+c.args)
		}
		return content, out, finish, stream.Err()
	})
}

// A Mistral route — by its provider or by its way of continuing — sends no
// stream_options, which fakellm's Mistral stand-in (steady-prefix-echo)
// answers with a 422, and still counts the answer's tokens from the usage
// on its last chunk, on a first attempt and on a resume.
func TestE2EMistralUsage(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range []struct {
		name     string
		provider string
		how      sse.Continuation
	}{
		{"by provider", sse.ProviderMistralAI, sse.ContinuePrefix},
		{"by continuation", "", sse.ContinuePrefixEcho},
	} {
		r := sse.OpenAIRoute("mistral", sse.OpenAIRequest{BaseURL: up.ProfileURL("steady-prefix-echo") + "/v1", Model: "m",
			Provider: tc.provider, Continue: tc.how, Messages: []sse.Message{{Role: "user", Content: "a story"}}})
		for _, a := range []hedgeprobe.Attempt{
			{Index: 0, Trigger: hedgeprobe.TriggerPrimary},
			{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: fakellm.Script(7)},
		} {
			src, err := r.Open(t.Context(), a)
			if err != nil {
				t.Fatal(err)
			}
			var tokens int64
			var text strings.Builder
			for src.Next() {
				if n, ok := sse.OpenAITokens(src.Current()); ok {
					tokens = n
				}
				s, _ := sse.ChatText(src.Current())
				text.WriteString(s)
			}
			if err := src.Err(); err != nil || tokens == 0 {
				t.Errorf("%s, %s: err %v, %d output tokens", tc.name, a.Trigger, err, tokens)
			}
			// The stand-in repeats the prefix, as Mistral's API does: a
			// route taken for Mistral's by its provider drops it too.
			if got := text.String(); got == "" || (a.Prefix != "" && strings.HasPrefix(got, a.Prefix)) {
				t.Errorf("%s, %s: text %.40q…, want the continuation alone", tc.name, a.Trigger, got)
			}
			_ = src.Close()
		}
	}
}

// TestContinuationAsksForTheRest: a resume attempt after 30 content
// chunks asks for the request's token limit less 30 (sse.ContinuationLimit),
// on the OpenAI-compatible route (max_tokens and max_completion_tokens in
// Params) and on the Anthropic one (MaxTokens), also when the prefix is
// all whitespace and no prefill is sent; other attempts ask for the
// limit as it is.
func TestContinuationAsksForTheRest(t *testing.T) {
	up := adaptertest.CaptureBodies(t)
	client := adaptertest.HTTPClient(t, adaptertest.ClientOptions{})
	openAI := sse.OpenAIRoute("vllm", sse.OpenAIRequest{BaseURL: up.URL, Model: "m", Client: client,
		Messages: []sse.Message{{Role: "user", Content: "a story"}}, Continue: sse.ContinueTrailingAssistant,
		Params: map[string]any{"max_tokens": 100, "max_completion_tokens": int64(200)}})
	anthropic := sse.AnthropicRoute("claude", sse.AnthropicRequest{BaseURL: up.URL, Model: "m", Client: client,
		Messages: []sse.Message{{Role: "user", Content: "a story"}}, MaxTokens: 100, Prefill: true})
	for _, tc := range []struct {
		name  string
		open  func(a hedgeprobe.Attempt) error
		a     hedgeprobe.Attempt
		limit map[string]float64
	}{
		{"openai primary", opener(t, openAI), hedgeprobe.Attempt{}, map[string]float64{"max_tokens": 100, "max_completion_tokens": 200}},
		{"openai resume", opener(t, openAI), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once", PrefixChunks: 30},
			map[string]float64{"max_tokens": 70, "max_completion_tokens": 170}},
		{"anthropic primary", opener(t, anthropic), hedgeprobe.Attempt{}, map[string]float64{"max_tokens": 100}},
		{"anthropic resume", opener(t, anthropic), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once", PrefixChunks: 30},
			map[string]float64{"max_tokens": 70}},
		{"anthropic resume, whitespace", opener(t, anthropic), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "\n\n", PrefixChunks: 2},
			map[string]float64{"max_tokens": 98}},
	} {
		if err := tc.open(tc.a); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body := up.Next(t)
		for k, want := range tc.limit {
			if body[k] != want {
				t.Errorf("%s: %s = %v, want %v", tc.name, k, body[k], want)
			}
		}
	}
}

// opener returns a function that opens an attempt of r and drains it,
// so that its request is sent.
func opener[T any](t *testing.T, r hedgeprobe.Route[T]) func(a hedgeprobe.Attempt) error {
	return func(a hedgeprobe.Attempt) error {
		src, err := r.Open(t.Context(), a)
		if err != nil {
			return err
		}
		for src.Next() {
		}
		return src.Close()
	}
}
