package goopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/streamend"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Chunk is the item type of a go-openai chat-completions stream.
type Chunk = openai.ChatCompletionStreamResponse

// Classify is the hedgeprobe.Classifier of go-openai chunks, with the
// rule of sse.ClassifyOpenAI: non-empty content, reasoning_content,
// refusal, or a tool-call (or function-call) name or arguments fragment is
// Content; a role, a finish reason or usage is Control; anything else — an
// empty chunk, such as a tapped keepalive — is Keepalive.
func Classify(c Chunk) hedgeprobe.Kind {
	return classify.Chat(c.Usage != nil, c.Choices, choiceParts)
}

// choiceParts describes a go-openai choice for classify.Chat.
func choiceParts(ch *openai.ChatCompletionStreamChoice) classify.ChatParts {
	d := &ch.Delta
	return classify.ChatParts{
		Content:      d.Content != "",
		Reasoning:    d.ReasoningContent != "",
		Refusal:      d.Refusal != "",
		ToolCallText: toolCallText(d.ToolCalls),
		ToolCalls:    len(d.ToolCalls) > 0,
		FunctionCall: d.FunctionCall != nil && (d.FunctionCall.Name != "" || d.FunctionCall.Arguments != ""),
		Role:         d.Role != "",
		FinishReason: ch.FinishReason != "",
	}
}

// toolCallText reports a tool-call fragment with a name or arguments.
func toolCallText(tcs []openai.ToolCall) bool {
	for i := range tcs {
		if f := &tcs[i].Function; f.Name != "" || f.Arguments != "" {
			return true
		}
	}
	return false
}

// Tokens is the hedgeprobe.TokenCount of go-openai chunks:
// usage.completion_tokens of the usage chunk.
func Tokens(c Chunk) (int64, bool) {
	if c.Usage == nil {
		return 0, false
	}
	return int64(c.Usage.CompletionTokens), true
}

// Source wraps a go-openai stream as a hedgeprobe.Source: Next calls Recv,
// io.EOF once each choice has a finish_reason is the clean end, and errors
// are typed for hedging (MapError). go-openai reports a body cut before
// [DONE] as io.EOF; before a finish_reason of each choice Source reports it
// as an *sse.ConnectionError wrapping io.ErrUnexpectedEOF. Close closes the stream and calls cancel
// (when not nil), which must cancel the stream's request context, so that a
// Recv blocked on a silent upstream returns.
//
// A Source is not safe for concurrent use, except that Close may be called
// while Next blocks.
type Source struct {
	stream   *openai.ChatCompletionStream
	ctx      context.Context
	cancel   context.CancelFunc
	provider string

	cur      Chunk
	err      error
	done     bool
	finished bool
	items    int
	// choices follows the finish reasons: with n > 1 the stream is
	// complete once each choice has one, not at the first.
	choices streamend.Choices

	closeOnce sync.Once
	closeErr  error
}

// NewSource wraps stream, opened with ctx.
func NewSource(ctx context.Context, provider string, stream *openai.ChatCompletionStream, cancel context.CancelFunc) *Source {
	if provider == "" {
		provider = "openai"
	}
	return &Source{stream: stream, ctx: ctx, cancel: cancel, provider: provider}
}

// Next receives the next chunk.
func (s *Source) Next() bool {
	if s.done {
		return false
	}
	c, err := s.recv()
	if err != nil {
		s.done = true
		if errors.Is(err, io.EOF) {
			err = nil // go-openai's clean end, with or without [DONE]
		}
		var undecoded *sse.UpstreamError
		if !errors.As(err, &undecoded) {
			err = MapError(s.ctx, s.provider, err)
		}
		s.err = streamend.Err(streamend.End{
			Provider:  s.provider,
			Err:       err,
			Terminal:  s.finished,
			Connected: true, // CreateChatCompletionStream had the response
			Events:    s.items,
		})
		s.closeAtEnd()
		return false
	}
	s.items++
	for _, ch := range c.Choices {
		s.finished = s.choices.Add(int64(ch.Index), ch.FinishReason != "")
	}
	s.cur = c
	return true
}

// recv is go-openai's Recv, but for an error payload it reads and cannot
// decode: a payload after a comment line (": keepalive", an "event:"
// line), which it reads with that line glued before it, or a chunk that
// begins {"error":null. Recv then fails to decode nothing and the call
// would end as a fatal ProtocolError, where the upstream reported an
// error: it is a transient mid-stream *sse.UpstreamError, so the call is
// hedged or resumed as after any other.
func (s *Source) recv() (Chunk, error) {
	var c Chunk
	raw, err := s.stream.RecvRaw()
	switch {
	case err != nil:
		return c, err
	case raw == nil:
		return c, sse.NewHTTPError(s.provider, http.StatusOK, nil, "", "",
			"an error payload go-openai could not decode", nil)
	}
	return c, json.Unmarshal(raw, &c)
}

// Current returns the current chunk.
func (s *Source) Current() Chunk { return s.cur }

// Err returns the error that ended the stream; nil after [DONE].
func (s *Source) Err() error { return s.err }

// closeAtEnd is Close for the stream's end, where no read is under way:
// the stream is closed before the request is cancelled, so a body read to
// its [DONE] has its end read first (Transport), which the cancel would cut,
// and its connection is kept.
func (s *Source) closeAtEnd() {
	s.closeOnce.Do(func() {
		s.closeErr = s.stream.Close()
		if s.cancel != nil {
			s.cancel()
		}
	})
}

// Close cancels the request and closes the stream; it is idempotent.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.closeErr = s.stream.Close()
	})
	return s.closeErr
}

// Items tells a hedgeprobe.Prober about go-openai chunks: Classify,
// Tokens, the response's model, id, input tokens and finish reasons, and
// Text and Relabel for resume.
var Items = hedgeprobe.Items[Chunk]{
	Classify:      Classify,
	OutputTokens:  Tokens,
	ResponseModel: func(c Chunk) (string, bool) { return c.Model, c.Model != "" },
	ResponseID:    func(c Chunk) (string, bool) { return c.ID, c.ID != "" },
	InputTokens: func(c Chunk) (int64, bool) {
		if c.Usage == nil {
			return 0, false
		}
		return int64(c.Usage.PromptTokens), true // the cached tokens counted in
	},
	FinishReasons: func(c Chunk, finished func(int, string)) {
		for i := range c.Choices {
			finished(c.Choices[i].Index, string(c.Choices[i].FinishReason))
		}
	},
	Text:    Text,
	Relabel: Relabel,
	Follows: Follows,
	Opening: Opening,
}

// RouteOptions configures Route.
type RouteOptions struct {
	// Provider is the gen_ai.provider.name; default "openai".
	Provider string
	// TapKeepalives yields an empty chunk (Keepalive) for each comment the
	// client's sse.Tap saw, so hedgeprobe times keepalives go-openai drops.
	// It needs the client's HTTPClient built with &sse.Tap{} as transport.
	TapKeepalives bool
	// Continue says how the upstream continues a partial answer
	// (docs/design.md §2 rule 10). go-openai sends no field it does not
	// know, so it supports sse.ContinueTrailingAssistant only (llama.cpp's
	// server, Ollama): a resume attempt appends the delivered text as a
	// trailing assistant message, and the route can resume
	// (Route.Continues). When the request's messages already end in an
	// assistant message (a prefill of your own), the delivered text is
	// appended to its text instead, so the upstream continues one message;
	// one with a refusal, tool calls or a non-text part cannot be
	// continued, and the resume attempt fails with
	// hedgeprobe.ErrCannotContinue (the resume is skipped; the call goes
	// on). sse.ContinueFinalMessage, sse.ContinuePrefix and
	// sse.ContinuePrefixEcho need body fields go-openai cannot send: a
	// route with any of them fails every attempt with ErrContinuation
	// (use openaigo or sse.OpenAIRoute for vLLM, SGLang, DeepSeek or
	// Mistral). A request for more than one choice (N above 1) never
	// continues, whatever Continue says: a continuation would carry
	// choice 0's text into every choice.
	Continue sse.Continuation
}

// ErrContinuation is the error of every attempt on a route whose
// RouteOptions.Continue go-openai cannot send.
var ErrContinuation = errors.New("goopenai: RouteOptions.Continue: go-openai can only send sse.ContinueTrailingAssistant")

// Route returns a hedgeprobe route named name that streams req with
// client: each attempt calls CreateChatCompletionStream under its own
// context and wraps the stream in a Source. It sets
// stream_options.include_usage unless req sets StreamOptions. Where
// sse.RefusesStreamOptions says the upstream refuses the field (Mistral's
// API, provider sse.ProviderMistralAI, which reports usage on its last
// chunk all the same), it sends none, even when req sets it — a request
// is often shared by every route of a call.
//
// go-openai has no retries of its own; its errors carry no headers, so a
// 429 from it reaches hedgeprobe without its Retry-After.
func Route(name string, client *openai.Client, req openai.ChatCompletionRequest, o RouteOptions) hedgeprobe.Route[Chunk] {
	if o.Provider == "" {
		o.Provider = "openai"
	}
	switch {
	case sse.RefusesStreamOptions(o.Provider, o.Continue):
		req.StreamOptions = nil
	case req.StreamOptions == nil:
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	open := func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[Chunk], error) {
		if o.Continue != sse.ContinueNone && o.Continue != sse.ContinueTrailingAssistant {
			return nil, fmt.Errorf("%w (route %s)", ErrContinuation, name)
		}
		req := req
		if a.Trigger == hedgeprobe.TriggerResume && o.Continue == sse.ContinueTrailingAssistant {
			msgs, err := continuation(req.Messages, a.Prefix)
			if err != nil {
				return nil, fmt.Errorf("%w: route %s: %w", hedgeprobe.ErrCannotContinue, name, err)
			}
			req.Messages = msgs
			//lint:ignore SA1019 callers still set it, and Ollama, llama.cpp and vLLM read it
			req.MaxTokens = int(sse.ContinuationLimit(int64(req.MaxTokens), a.PrefixChunks))
			req.MaxCompletionTokens = int(sse.ContinuationLimit(int64(req.MaxCompletionTokens), a.PrefixChunks))
		}
		ctx, cancel := context.WithCancel(ctx)
		stream, err := client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			err = MapError(ctx, o.Provider, err)
			cancel()
			return nil, err
		}
		if err := notAStream(o.Provider, stream.Header()); err != nil {
			_ = stream.Close()
			cancel()
			return nil, err
		}
		return NewSource(ctx, o.Provider, stream, cancel), nil
	}
	r := hedgeprobe.Route[Chunk]{Name: name, Provider: o.Provider, Model: req.Model, Open: open,
		Continues: o.Continue == sse.ContinueTrailingAssistant && req.N <= 1}
	if o.TapKeepalives {
		r = sse.KeepaliveRoute(r)
	}
	return r
}

// MapError types a go-openai error for hedging: an *openai.APIError or
// *openai.RequestError with an HTTP status becomes an *sse.UpstreamError,
// an error payload mid-stream (status 0) an *sse.UpstreamError with
// MidStream set, and anything else an *sse.ConnectionError; once ctx is
// done, whatever the SDK reported, it is ctx's error (a cancelled request
// fails in many ways). Else the result unwraps to err.
func MapError(ctx context.Context, provider string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0 {
		// The body as it came, read as the raw route reads it: go-openai
		// puts an APIError of status 0 inside when the body's "error" is
		// text, which would read as a payload in a 200 stream.
		return sse.NewResponseError(provider, reqErr.HTTPStatusCode, nil, reqErr.Body, err)
	}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		status := apiErr.HTTPStatusCode
		if status == 0 {
			status = 200 // an error payload inside the stream
		}
		code := ""
		if apiErr.Code != nil {
			code = fmt.Sprint(apiErr.Code)
		}
		return sse.NewHTTPError(provider, status, nil, apiErr.Type, code, apiErr.Message, err)
	}
	if pe, ok := streamend.Malformed(provider, err); ok {
		return pe
	}
	return &sse.ConnectionError{Provider: provider, Err: err}
}

// notAStream returns the *sse.ProtocolError of a 200 response that is
// neither an event stream nor JSON (a login page, a proxy's notice), which
// go-openai would read as an empty stream; nil otherwise. A JSON body is
// go-openai's to read: it reports an error object in it.
func notAStream(provider string, h http.Header) error {
	switch mediaType(h) {
	case "", "text/event-stream", "application/json":
		return nil
	}
	return &sse.ProtocolError{Provider: provider, Err: fmt.Errorf("got %s, want text/event-stream", h.Get("Content-Type"))}
}

// mediaType is the media type of h's Content-Type, in lower case, its
// parameters left out; "" without one.
func mediaType(h http.Header) string {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// Receiver gives a hedgeprobe stream of go-openai chunks the shape of
// *openai.ChatCompletionStream, so the caller's Recv loop stays as it was:
// Recv returns io.EOF at the clean end and the stream's error otherwise.
type Receiver struct {
	src hedgeprobe.Source[Chunk]
}

// NewReceiver wraps src, typically a *hedgeprobe.Stream.
func NewReceiver(src hedgeprobe.Source[Chunk]) *Receiver { return &Receiver{src: src} }

// Recv returns the next chunk, or io.EOF at the clean end.
func (r *Receiver) Recv() (Chunk, error) {
	if r.src.Next() {
		return r.src.Current(), nil
	}
	if err := r.src.Err(); err != nil {
		return Chunk{}, err
	}
	return Chunk{}, io.EOF
}

// Close closes the stream.
func (r *Receiver) Close() error { return r.src.Close() }
