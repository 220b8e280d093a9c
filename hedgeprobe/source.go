package hedgeprobe

import (
	"context"
	"time"
)

// Source is a pull stream of upstream items in the shape of bufio.Scanner,
// database/sql.Rows and the openai-go / anthropic-sdk-go ssestream.Stream,
// which satisfy it unchanged.
//
// Used unchanged, an SDK's stream quotes the upstream in its Err: openai-go
// and anthropic-sdk-go end a stream on a mid-stream error event with
// "received error while streaming: " and the event's JSON, whose message
// can quote the request or the answer, and a failed span's status records
// Err's text. The adapters (openaigo, anthropicgo, goopenai) type such
// errors and leave the upstream's message out of the status; a Source of
// one's own can do likewise with an error that has a StatusText() string
// method, whose text the status records in place of its Error, as
// sse.UpstreamError does.
//
// Next advances to the next item and reports whether there is one; Current
// returns it; Err reports the error that ended the stream (nil at a clean
// end); Close releases the stream and must unblock a Next that is waiting on
// I/O.
//
// Concurrency: Next, Current and Err are called from one goroutine at a
// time. Close may be called from another goroutine concurrently with any
// of them (Stream.Close, the stall watchdog, or the losing side of a race
// ends an attempt wherever its reader is), and Next, Current and Err may
// still be called after Close has returned; they must not crash, and Next
// must then report false soon. An item Current returned must stay valid
// after Close (a classifier may be looking at it while Close runs, and the
// caller keeps delivered items). hedgeprobe calls Close exactly once per
// Source, and ignores its error and a panic in it. Close must return
// promptly: the attempt's context is cancelled first, and the losers of a
// race are closed on the caller's path at commit, so a Close that blocks
// (a connection drained to its end, say) delays the winner's first item
// by as long.
//
// The SDK streams satisfy this: openai-go's ssestream.Stream (v3.98.0)
// closes under a sync.Once that only sets an atomic done flag and closes
// the decoder, that is the HTTP response body, whose Close unblocks a
// pending Read; it never touches the item or the error Next, Current and
// Err use, and each item is decoded into a fresh value. anthropic-sdk-go's
// (v2.15.0) Close only closes the decoder, likewise.
type Source[T any] interface {
	Next() bool
	Current() T
	Err() error
	Close() error
}

// Kind classifies an upstream item.
type Kind uint8

const (
	// Keepalive proves the connection is alive and nothing else: an SSE
	// comment, a ping event, an item with no content. It never counts as
	// progress for a hedge trigger or a watchdog. A committed attempt's
	// keepalives are delivered to the caller all the same (Next returns
	// them, Stats.ItemsDelivered counts them), as the SDK streams that
	// hedgeprobe wraps would have returned them.
	Keepalive Kind = iota
	// Control is structural: a role-only delta, a finish reason, a
	// usage-only chunk. It is delivered but is not content.
	Control
	// Content carries output: non-empty text, reasoning, refusal or a
	// tool-call delta.
	Content
)

// String returns "keepalive", "control" or "content".
func (k Kind) String() string {
	switch k {
	case Content:
		return "content"
	case Control:
		return "control"
	default:
		return "keepalive"
	}
}

// Classifier says what kind of item v is. It must be cheap and must not
// retain v; it is called once per item: on the attempt's reading goroutine,
// or, once a Streaming call has committed and the winner is read directly,
// on the goroutine calling Next. It must be safe for concurrent use. A
// Kind other than Keepalive, Control and Content is taken as Keepalive.
type Classifier[T any] func(v T) Kind

// Route names one upstream and how to open a stream on it.
type Route[T any] struct {
	// Name identifies the route in telemetry, route health and pushback,
	// such as "openai-primary". Required. Two routes of one name are one
	// upstream to the Prober — they share its ejections, pushback and
	// adaptive delay — so give routes to different upstreams different
	// names (listing one route twice, to hedge on it, is fine). Names are
	// meant to be a fixed set, like the upstreams they name, though the
	// Prober forgets the ones it has no use for: a route's latest ejection
	// (about a hundred bytes) is kept while a stream started before it
	// runs, which must never undo it, and, past 64 ejected names,
	// forgotten at an ejection after every such stream has ended. The
	// adaptive delay's state
	// per route × model (6–23 KiB) is dropped at the first sweep after its
	// window has emptied (a sweep comes with a new route × model, at most
	// once a window), a refused continuation's at the next refusal after
	// it has ended, and a route's health entry when the route is next
	// healthy, or when it has had no failure, no ejection in force and no
	// probe for EjectMax (its failures then count afresh).
	Name string
	// Provider is the gen_ai.provider.name of the upstream, such as
	// "openai". Optional: a route without one writes no provider.
	Provider string
	// Model is the gen_ai.request.model asked of this upstream. Optional:
	// without one, the attempt span is named by the operation alone.
	// Name, Provider and Model must be UTF-8 (they go into every span).
	Model string
	// ServerAddress and ServerPort are the upstream's host name (or IP
	// address) and port, for server.address and server.port on attempt
	// spans, as the GenAI conventions recommend. Optional: a route without
	// an address writes neither, and a port is written only beside an
	// address. The sse routes set both from their base URL; an SDK
	// adapter's route, whose client hides its URL, can be given them:
	// r := openaigo.Route(…); r.ServerAddress, r.ServerPort =
	// "api.openai.com", 443. ServerAddress must be UTF-8.
	ServerAddress string
	// ServerPort is the upstream's port, written beside ServerAddress.
	ServerPort int
	// Open starts one attempt, described by a (its index, trigger and, for
	// a resume attempt, the text to continue). The context is the
	// attempt's own: it is cancelled when the attempt loses, fails or the
	// call ends, and Open and the Source it returns must stop all I/O when
	// it is. Required.
	Open func(ctx context.Context, a Attempt) (Source[T], error)
	// Continues says the upstream can continue a partial answer: on a
	// resume attempt (a.Trigger == TriggerResume) Open sends a.Prefix as the
	// assistant's partial message, and the Source streams only what comes
	// after it (docs/design.md §2 rule 10). A route that cannot (OpenAI's
	// own API has no prefill) is never asked to resume; a resume then goes
	// to the next route that can.
	Continues bool
}

// Attempt describes the attempt Route.Open is asked to open, so a caller
// can tag its own logs and metrics per attempt.
type Attempt struct {
	// Index is 0 for the primary, 1, 2, … for hedges and resumes, in
	// launch order.
	Index int
	// Trigger is why the attempt was launched.
	Trigger Trigger
	// Prefix is, on a resume attempt, the text the call has already
	// delivered (or, before commit, the text the stalled attempt had
	// received): the upstream continues it. Empty on every other attempt.
	// It is never recorded in telemetry.
	Prefix string
	// PrefixChunks is, on a resume attempt, how many content chunks the
	// call had when Prefix was taken: those delivered to the caller (or,
	// before commit, those of the stalled attempt up to the stall, with
	// those of the text it continued when it is a continuation). The
	// routes of this module ask a continuation for the request's token
	// limit less this many (sse.ContinuationLimit), so that the answer as
	// a whole keeps to the limit the caller set. 0 on every other attempt.
	PrefixChunks int64
}

type attemptKey struct{}

// AttemptIndexFromContext returns the Index of the attempt whose context
// ctx is or derives from (the context Route.Open is given, and every
// request made with it), and false for a context of no attempt. It lets an
// http.RoundTripper under an SDK client, which sees only requests, tell a
// call's attempts apart: sse.Lanes sends each attempt of a call through a
// transport of its own, so that over HTTP/2, where one transport carries
// every request to a host on one connection, a hedge or resume never
// rides the connection of an attempt before it (docs/design.md §2, rule 1).
func AttemptIndexFromContext(ctx context.Context) (int, bool) {
	i, ok := ctx.Value(attemptKey{}).(int)
	return i, ok
}

// Items tells a Prober what it needs to know about the upstream item type
// T. Only Classify is required. The SDK adapters export one for their
// item type (sse.OpenAIItems, openaigo.Items, …); the fields are typed, so
// a function for another item type does not compile.
type Items[T any] struct {
	// Classify says what kind each item is. Required.
	Classify Classifier[T]
	// OutputTokens reads the output token count from a usage item, for
	// gen_ai.usage.output_tokens on attempt spans (and so TPOT in the
	// collector). It is asked about every Content and Control item, since
	// some servers put usage on the last content chunk or on every chunk
	// (vLLM's continuous usage stats): the last count reported wins.
	// Optional. A panic in it fails the call with an error wrapping
	// ErrExtractorPanic.
	OutputTokens TokenCount[T]
	// ResponseModel reads the model that answered, for
	// gen_ai.response.model; it is asked about each item of an attempt
	// until it reports ok, and only while the call span is recording
	// (it feeds nothing else). Optional; a panic fails the call like
	// OutputTokens — a recorded call only, since it is asked of no other.
	ResponseModel func(v T) (model string, ok bool)
	// ResponseID reads the upstream's id of its response (OpenAI's chunk
	// id, Anthropic's message id), for gen_ai.response.id; asked like
	// ResponseModel. Optional; a panic fails a recorded call like
	// OutputTokens.
	ResponseID func(v T) (id string, ok bool)
	// InputTokens reads the input (prompt) token count, cached tokens
	// included as the GenAI conventions ask, for gen_ai.usage.input_tokens.
	// It is asked about every Content and Control item while the call span
	// is recording; the last count reported wins. Optional; a panic fails
	// a recorded call like OutputTokens.
	InputTokens TokenCount[T]
	// FinishReasons calls finished for each choice that v ends, with the
	// reason the upstream gives (OpenAI's finish_reason of choice Index,
	// Anthropic's stop_reason for choice 0), for
	// gen_ai.response.finish_reasons: one reason per choice, in choice
	// order, the last one reported for a choice winning (choices 0–127).
	// Asked like InputTokens. Optional; a panic fails a recorded call like
	// OutputTokens.
	FinishReasons func(v T, finished func(choice int, reason string))
	// Text reads the answer text a content item adds, for resume
	// (docs/design.md §2 rule 10): text is what a continuation must carry
	// on from, and resumable is false for an item that cannot be continued
	// (a tool-call delta: a half-written call is never resumed; an item
	// that also ends the answer, as a last chunk that carries its finish
	// reason: a continuation would follow the answer's end). Reasoning
	// (or a citation) is content but not answer text: report ("", true);
	// a stream silent after such an item, with no text since, is not
	// resumed. Without Text a Prober never resumes, and a committed stream
	// costs what it costs without resume. Called only while resume is possible for the call:
	// on content items as they are delivered, and on the content a
	// stalled attempt received before commit when that is resumed (rule
	// 10), which the caller may never read if another attempt wins.
	Text func(v T) (text string, resumable bool)
	// Relabel gives an item of a continuation the labels of the answer it
	// continues, so that a caller who accumulates items reads one answer:
	// answer is the latest content item the caller was given before the
	// continuation's first (relabelled in turn, after a second resume), v
	// an item of the continuation, as the server sent it. The OpenAI
	// adapters give v the answer's chunk id and creation time (openai-go's
	// ChatCompletionAccumulator refuses a chunk of another id); the
	// Anthropic ones move v's content block to the block it continues
	// (the server numbers its blocks from 0, whatever the answer had
	// opened before). Called on every item of a continuation that the
	// caller reads (content, control and keepalive alike), only while
	// resume is possible for the call. Optional: without it the caller
	// reads the continuation's items as the server sent them. It changes
	// only what the caller reads; a panic fails the call like
	// OutputTokens.
	Relabel func(answer, v T) T
	// Follows reports that v, an item of a continuation, begins
	// something that follows the answer instead of continuing its text:
	// Anthropic's start of a first content block (block 0) that is not
	// text (a tool call; thinking or redacted thinking, on a compatible
	// server that reasons again). It is asked about a continuation's
	// items in order, keepalives aside, up to its first content
	// (included): a continuation whose item it reports reaches the caller
	// from that item on, after the closing items it sent before it (early
	// usage; the opening ones the caller already has), relabelled by
	// RelabelAfter. Only with Opening, which it needs; optional: without
	// it, every continuation continues the answer's text, and reaches the
	// caller as Opening says. A later block, after an empty block 0 the
	// continuation ended, must not be reported: it follows that block,
	// which continued the answer's, and Relabel numbers it. The
	// OpenAI-compatible adapters set it too, for a chunk with a tool-call
	// fragment: their items have no blocks, and a continuation's tool call
	// simply comes after the delivered text, but a fragment with only the
	// call's id, before any content, must reach the caller. A panic fails the call like
	// OutputTokens.
	Follows func(v T) bool
	// RelabelAfter is Relabel for a continuation that follows the answer
	// (Follows): the Anthropic adapters number its content blocks after
	// the answer's block (answer.Index + 1 + j) rather than from it, so
	// Message.Accumulate keeps the answer's text block and adds the
	// continuation's blocks after it. Asked like Relabel; optional:
	// without it, Relabel relabels those continuations too.
	RelabelAfter func(answer, v T) T
	// Opening reports whether a Control item opens an answer, as the
	// answer a continuation carries on has it already (OpenAI's role
	// chunk; Anthropic's message_start and the start of block 0), rather
	// than closing one (a finish reason, usage, message_stop) or starting
	// something after its first block. It is asked about the Control
	// items a continuation sends before any content, only while resume is
	// possible for the call: a continuation reaches the caller from its
	// first content or its first closing item, whichever comes first,
	// without the opening items before its first content, which the
	// caller already has from the answer. So one that ends without
	// content (the answer was complete at the prefix) gives the caller its
	// closing items, one that sends usage before its first block's start
	// gives it the usage but not the start (unless Follows reports that
	// start: the caller then reads it after the usage), and one that
	// closes an empty first block gives it that block's end and what
	// starts after it (Anthropic: an empty text block ended, then a
	// thinking block 1, whose start carries no content).
	// Optional: without it, the opening is everything before the first
	// content, or, without content, as many Control items as the answer's
	// own opening had, which holds only where both routes open alike. A
	// panic fails the call like OutputTokens.
	Opening func(v T) bool
}

// TransientError is implemented by upstream errors that know whether a
// retry on another attempt may succeed. Errors that do not implement it are
// classified by IsTransient.
type TransientError interface {
	error
	// Transient reports whether the failure may not repeat on a new
	// attempt: connection resets, 429, 5xx.
	Transient() bool
}

// RetryAfterError is implemented by upstream errors that carry a
// Retry-After hint (HTTP 429 and 503 most often). When the error is
// transient the route is then avoided until the hint passes (pushback).
type RetryAfterError interface {
	error
	// RetryAfter is how long the upstream asked callers to stay away; 0
	// when it gave no hint.
	RetryAfter() time.Duration
}

// TokenCount extracts a token count from an item that carries usage (an
// OpenAI usage chunk, an Anthropic message_start or message_delta, or a
// content chunk that carries usage too). It reports ok = false for every
// other item. As Items.OutputTokens it puts gen_ai.usage.output_tokens on
// the attempt span, so the collector can compute TPOT; as
// Items.InputTokens, gen_ai.usage.input_tokens.
type TokenCount[T any] func(v T) (tokens int64, ok bool)
