package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
)

// serverOf is the host and port of an API root, for the attempt span's
// server.address and server.port: the port the URL names, else its
// scheme's. A URL without a host, or one that does not parse, names
// neither (its requests fail with their own error).
func serverOf(baseURL string) (string, int) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" || !utf8.ValidString(u.Hostname()) {
		return "", 0
	}
	port, err := strconv.Atoi(u.Port())
	switch {
	case err == nil && port > 0 && port <= 65535:
	case u.Port() != "":
		port = 0
	case u.Scheme == "https":
		port = 443
	case u.Scheme == "http":
		port = 80
	default:
		port = 0
	}
	return u.Hostname(), port
}

// Message is one chat message of a request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// OpenAIRequest describes a chat-completions call on an OpenAI-compatible
// upstream. The route always sends "stream": true, and
// "stream_options": {"include_usage": true} unless RefusesStreamOptions
// says the upstream refuses it or Params["stream_options"] is nil (for
// another server that refuses fields it does not know).
type OpenAIRequest struct {
	// Provider is the gen_ai.provider.name; default "openai".
	Provider string
	// BaseURL is the API root including its version, such as
	// "https://api.openai.com/v1"; the route posts to
	// BaseURL + "/chat/completions". Required: without an http(s) scheme
	// and a host, or with a query, every attempt fails with
	// ErrInvalidBaseURL, fatally (as a 401 does: the call ends, also when
	// the attempt was a hedge).
	BaseURL string
	// APIKey is sent as "Authorization: Bearer …" when set.
	APIKey string
	// Model is the model asked for. Required.
	Model string
	// Messages is the conversation.
	Messages []Message
	// Params holds further body fields (temperature, max_tokens, tools…);
	// they cannot override model, messages, stream or stream_options —
	// but a nil Params["stream_options"] leaves stream_options out.
	Params map[string]any
	// Header holds extra request headers (Azure's api-key, say); none of
	// them follows a redirect to another host.
	Header http.Header
	// Client sends the request; default DefaultClient(). Its Timeout must
	// be 0 (every attempt fails with ErrClientTimeout otherwise): a stream
	// outlives any whole-request timeout.
	Client *http.Client
	// MaxEventSize bounds one SSE line and one event; default 1 MiB.
	MaxEventSize int
	// Continue says how the upstream continues a partial answer; with
	// anything but ContinueNone the route can resume (Route.Continues).
	// A resume attempt sends the delivered text as a trailing assistant
	// message or, when Messages already ends in one (a prefill of your
	// own), appended to its content, so the upstream continues one
	// message. When Messages ends in your own prefill, ContinueFinalMessage
	// also needs Params["continue_final_message"] = true (so that the
	// upstream continued your message rather than answering after it):
	// without it the resume attempt's Open fails with
	// hedgeprobe.ErrCannotContinue, the resume is skipped and the call goes
	// on. Without a prefill of your own nothing needs setting. A request for more than one choice
	// (Params["n"] above 1) never continues, whatever Continue says: a
	// continuation would carry choice 0's text into every choice.
	Continue Continuation
}

// ProviderMistralAI is Mistral's gen_ai.provider.name in the OpenTelemetry
// GenAI semantic conventions.
const ProviderMistralAI = "mistral_ai"

// RefusesStreamOptions reports whether an OpenAI-compatible upstream
// refuses the request field stream_options: Mistral's API answers it with
// a 422 (extra_forbidden) on every request, and reports usage on its last
// chunk without being asked. A route is taken for Mistral's by its
// provider (ProviderMistralAI) or by the way it continues an answer
// (ContinuePrefixEcho, Mistral's). The routes of this package, openaigo
// and goopenai leave the field out for such an upstream.
func RefusesStreamOptions(provider string, c Continuation) bool {
	return provider == ProviderMistralAI || c == ContinuePrefixEcho
}

// ContinuationOf is how a route continues an answer, given its provider
// and its Continue: ContinuePrefix on Mistral's API (ProviderMistralAI),
// whose answer repeats the prefix, is ContinuePrefixEcho — else the
// caller would read the delivered text twice. The routes of this package
// and openaigo continue so.
func ContinuationOf(provider string, c Continuation) Continuation {
	if provider == ProviderMistralAI && c == ContinuePrefix {
		return ContinuePrefixEcho
	}
	return c
}

// OpenAIRoute returns the hedgeprobe route named name that streams req.
// Each attempt is its own HTTP request whose context is the attempt's, so
// cancelling the attempt aborts the request and its body.
func OpenAIRoute(name string, req OpenAIRequest) hedgeprobe.Route[ChatChunk] {
	if req.Provider == "" {
		req.Provider = "openai"
	}
	req.Continue = ContinuationOf(req.Provider, req.Continue)
	body := maps.Clone(req.Params)
	if body == nil {
		body = map[string]any{}
	}
	body["model"] = req.Model
	body["messages"] = req.Messages
	body["stream"] = true
	if so, set := req.Params["stream_options"]; (set && so == nil) || RefusesStreamOptions(req.Provider, req.Continue) {
		delete(body, "stream_options")
	} else {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	// Marshalled once: every attempt sends the same bytes.
	buf, merr := json.Marshal(body)
	url := strings.TrimRight(req.BaseURL, "/") + "/chat/completions"
	header := req.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if req.APIKey != "" {
		header.Set("Authorization", "Bearer "+req.APIKey)
	}
	client := keepOnHost(req.Client, header)
	if merr == nil {
		merr = errors.Join(refuseBaseURL(name, req.BaseURL, "https://api.openai.com/v1"), refuseTimeout(name, client))
	}
	server, port := serverOf(req.BaseURL)
	return hedgeprobe.Route[ChatChunk]{
		Name:          name,
		Provider:      req.Provider,
		Model:         req.Model,
		ServerAddress: server,
		ServerPort:    port,
		Continues:     req.Continue != ContinueNone && !prefill.ManyChoices(req.Params),
		Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[ChatChunk], error) {
			if merr != nil {
				return nil, merr
			}
			buf := buf
			if a.Trigger == hedgeprobe.TriggerResume && req.Continue != ContinueNone {
				var err error
				if buf, err = openAIContinuation(body, req.Messages, req.Continue, a.Prefix, a.PrefixChunks); err != nil {
					return nil, fmt.Errorf("%w: %w", hedgeprobe.ErrCannotContinue, err)
				}
			}
			resp, cancel, err := post(ctx, client, req.Provider, url, header, buf)
			if err != nil {
				return nil, err
			}
			s := NewOpenAIStream(resp, StreamOptions{Provider: req.Provider, MaxEventSize: req.MaxEventSize, Cancel: cancel})
			if a.Trigger == hedgeprobe.TriggerResume && req.Continue == ContinuePrefixEcho {
				return echoDropped(s, a.Prefix), nil
			}
			return s, nil
		},
	}
}

// AnthropicRequest describes a Messages call on Anthropic's API (or one
// compatible with it). The route always sends "stream": true.
type AnthropicRequest struct {
	// Provider is the gen_ai.provider.name; default "anthropic".
	Provider string
	// BaseURL is the API root without its version, such as
	// "https://api.anthropic.com"; the route posts to
	// BaseURL + "/v1/messages". Required, as OpenAIRequest's.
	BaseURL string
	// APIKey is sent as "x-api-key" when set, and not after a redirect to
	// another host (as Go's client drops Authorization there).
	APIKey string
	// Version is the "anthropic-version" header; default "2023-06-01".
	Version string
	// Model is the model asked for. Required.
	Model string
	// System is the system prompt, when set.
	System string
	// Messages is the conversation.
	Messages []Message
	// MaxTokens is max_tokens; default 1024.
	MaxTokens int
	// Params holds further body fields; they cannot override the ones
	// above.
	Params map[string]any
	// Header holds extra request headers (a gateway's token, say); none of
	// them follows a redirect to another host.
	Header http.Header
	// Client sends the request; default DefaultClient(). Its Timeout must
	// be 0, as OpenAIRequest's.
	Client *http.Client
	// MaxEventSize bounds one SSE line and one event; default 1 MiB.
	MaxEventSize int
	// Prefill says the model accepts a trailing assistant message (a
	// prefill) and continues it: the route can resume. The prefill is the
	// delivered text less its trailing whitespace, which Anthropic refuses
	// (a delivered text of whitespace alone is sent as no prefill, and the
	// continuation is then a fresh answer after it). A request that
	// already ends in one (the caller's own prefill) is resumed with that
	// message extended by the delivered text. Newer Claude models refuse
	// prefill with a 400; a resume there fails as refused and the route is
	// not asked again for a while. A request that turns extended thinking
	// on (Params["thinking"] of any type but "disabled") never resumes,
	// whatever Prefill says: Anthropic takes no prefill with it.
	Prefill bool
}

// AnthropicRoute returns the hedgeprobe route named name that streams req,
// as OpenAIRoute does.
func AnthropicRoute(name string, req AnthropicRequest) hedgeprobe.Route[AnthropicEvent] {
	if req.Provider == "" {
		req.Provider = "anthropic"
	}
	if req.MaxTokens <= 0 {
		req.MaxTokens = 1024
	}
	if req.Version == "" {
		req.Version = "2023-06-01"
	}
	body := maps.Clone(req.Params)
	if body == nil {
		body = map[string]any{}
	}
	body["model"] = req.Model
	body["messages"] = req.Messages
	body["max_tokens"] = req.MaxTokens
	body["stream"] = true
	if req.System != "" {
		body["system"] = req.System
	}
	buf, merr := json.Marshal(body)
	url := strings.TrimRight(req.BaseURL, "/") + "/v1/messages"
	header := req.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if req.APIKey != "" {
		header.Set(apiKeyHeader, req.APIKey)
	}
	header.Set("Anthropic-Version", req.Version)
	client := keepOnHost(req.Client, header)
	if merr == nil {
		merr = errors.Join(refuseBaseURL(name, req.BaseURL, "https://api.anthropic.com"), refuseTimeout(name, client))
	}
	server, port := serverOf(req.BaseURL)
	return hedgeprobe.Route[AnthropicEvent]{
		Name:          name,
		Provider:      req.Provider,
		Model:         req.Model,
		ServerAddress: server,
		ServerPort:    port,
		Continues:     req.Prefill && !prefill.Thinks(req.Params["thinking"]),
		Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[AnthropicEvent], error) {
			if merr != nil {
				return nil, merr
			}
			buf, cut := buf, ""
			if a.Trigger == hedgeprobe.TriggerResume && req.Prefill {
				// Anthropic refuses a prefill that ends in whitespace, or
				// an empty one: without text to send, the model answers
				// afresh and the cut whitespace is dropped from that.
				var sent string
				sent, cut = prefill.Trim(a.Prefix)
				b := maps.Clone(body)
				b["max_tokens"] = ContinuationLimit(int64(req.MaxTokens), a.PrefixChunks)
				if sent != "" {
					b["messages"] = anthropicContinuation(req.Messages, sent)
				}
				var err error
				if buf, err = json.Marshal(b); err != nil {
					return nil, fmt.Errorf("%w: %w", hedgeprobe.ErrCannotContinue, err)
				}
			}
			resp, cancel, err := post(ctx, client, req.Provider, url, header, buf)
			if err != nil {
				return nil, err
			}
			src := NewAnthropicStream(resp, StreamOptions{Provider: req.Provider, MaxEventSize: req.MaxEventSize, Cancel: cancel})
			if a.Trigger == hedgeprobe.TriggerResume && req.Prefill {
				return &anthropicContinued{Source: src, u: prefill.NewUncut(cut)}, nil
			}
			return src, nil
		},
	}
}
