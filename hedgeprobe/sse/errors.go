package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// UpstreamError is an error the upstream reported: an HTTP status other
// than 2xx, or an error payload inside a 200 stream (OpenAI's
// {"error": …} data, Anthropic's "event: error").
//
// It implements hedgeprobe.TransientError and hedgeprobe.RetryAfterError:
// 408, 409, 425, 429, 529 and 5xx are transient, other 4xx are fatal. A
// Retry-After (or retry-after-ms) is kept on any status — 429 and 503 carry
// it most often — and on a transient one it is pushback: hedgeprobe keeps
// the route away until then. An error payload in a 200 response (inside the
// stream, or as its whole JSON body) is transient unless its type names a
// request problem (invalid_request_error, authentication_error,
// billing_error, permission_error, not_found_error, request_too_large). Its code is not
// read as a status: vLLM's servers report whatever fails during
// generation, after the request was accepted, as "BadRequestError" with
// code 400, where another attempt may well succeed.
type UpstreamError struct {
	// Provider is the route's gen_ai.provider.name, such as "openai".
	Provider string
	// StatusCode is the HTTP status; 0 for an error payload in a 200
	// response.
	StatusCode int
	// MidStream reports an error payload in a 200 response: inside the
	// event stream, or the whole body (JSON) instead of a stream.
	MidStream bool
	// Type, Code and Message come from the error object, when there is one.
	Type, Code, Message string
	// RetryAfterHint is the parsed Retry-After header; 0 when absent.
	RetryAfterHint time.Duration
	// Body is the raw error body or payload, cut at 4 KiB.
	Body []byte
	// Cause is the SDK's own error when an adapter built this one (an
	// *openai.Error, say), so errors.As still finds it; nil otherwise.
	Cause error
}

// Unwrap returns Cause.
func (e *UpstreamError) Unwrap() error { return e.Cause }

// ErrorType is the error's error.type on hedgeprobe's spans: the code the
// provider returned, as the GenAI conventions ask — the HTTP status, such
// as "429"; for an error payload in a 200 response its type, such as
// "overloaded_error", or "error_payload" without one, or with one that is
// no code (see codeLike).
func (e *UpstreamError) ErrorType() string {
	switch {
	case !e.MidStream && e.StatusCode != 0:
		return strconv.Itoa(e.StatusCode)
	case codeLike(e.Type):
		return e.Type
	}
	return "error_payload"
}

// codeLike reports whether an upstream's error type or code reads as a
// code — "rate_limit_exceeded", "invalid_request_error", "429",
// "RESOURCE_EXHAUSTED" — and so may go into telemetry: at most 64 bytes of
// ASCII letters, digits and _ . : - /. Anything else (a sentence, a JSON
// object a proxy sent as the code) is upstream text, which can quote the
// prompt or the answer as a message can.
func codeLike(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == ':', c == '-', c == '/':
		default:
			return false
		}
	}
	return true
}

// Error returns the provider, status and message.
func (e *UpstreamError) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.MidStream {
		b.WriteString(": error payload mid-stream")
	} else {
		fmt.Fprintf(&b, ": http %d", e.StatusCode)
		if t := http.StatusText(e.StatusCode); t != "" {
			b.WriteString(" " + strings.ToLower(t))
		}
	}
	if e.Type != "" {
		b.WriteString(": " + e.Type)
	}
	if e.Code != "" && e.Code != e.Type {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RetryAfterHint > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfterHint)
	}
	return b.String()
}

// StatusText is Error without the message, and without a type or code
// that is no code (see codeLike; "withheld" stands in for it): what
// hedgeprobe writes into a span's status. An upstream's message, or the
// start of a body without an error object, can quote the request (a
// validation error that echoes its input, a resume's prefix) or the
// answer, and spans record neither.
func (e *UpstreamError) StatusText() string {
	c := *e
	c.Message = ""
	if c.Type != "" && !codeLike(c.Type) {
		c.Type = "withheld"
	}
	if c.Code != "" && !codeLike(c.Code) {
		c.Code = "withheld"
	}
	return c.Error()
}

// Transient reports whether another attempt may succeed.
func (e *UpstreamError) Transient() bool {
	if e.MidStream {
		switch e.Type {
		case "invalid_request_error", "authentication_error", "billing_error",
			"permission_error", "not_found_error", "request_too_large":
			return false
		}
		return true
	}
	switch e.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly,
		http.StatusTooManyRequests, 529:
		return true
	}
	return e.StatusCode >= 500
}

// RetryAfter is the upstream's Retry-After hint; 0 when it gave none.
func (e *UpstreamError) RetryAfter() time.Duration { return e.RetryAfterHint }

// ConnectionError is a transport failure: the request could not be sent or
// answered (dial error, reset, TLS), or the stream broke or ended before its
// terminal event ([DONE] or message_stop). A stream that ends early is an
// error, never a clean end: its Err is io.ErrUnexpectedEOF then.
//
// It is always transient. It unwraps to the underlying error.
type ConnectionError struct {
	// Provider is the route's gen_ai.provider.name.
	Provider string
	// Connected reports that response headers had arrived: the stream broke
	// after Events events.
	Connected bool
	// Events is the number of events and comments read before the failure.
	Events int
	// Err is the cause: io.ErrUnexpectedEOF when the body ended cleanly but
	// early, else the transport's error.
	Err error
}

// Error says where the connection failed.
func (e *ConnectionError) Error() string {
	if !e.Connected {
		return fmt.Sprintf("%s: request failed: %v", e.Provider, e.Err)
	}
	return fmt.Sprintf("%s: stream ended after %d events without its terminal event: %v", e.Provider, e.Events, e.Err)
}

// Unwrap returns the cause.
func (e *ConnectionError) Unwrap() error { return e.Err }

// Transient is true: a new connection may succeed.
func (e *ConnectionError) Transient() bool { return true }

// ProtocolError is an upstream that does not speak the protocol: a line or
// event over the size limit, malformed JSON, a 200 response that is not an
// event stream. It is fatal (not transient) and unwraps to the cause.
type ProtocolError struct {
	// Provider is the route's gen_ai.provider.name.
	Provider string
	// Err is the cause; errors.Is(err, ErrTooLarge) for an oversized event.
	Err error
	// Body is the raw start of a 200 response that is not an event stream,
	// cut at 4 KiB, for the caller's diagnosis: a login page, a proxy's
	// notice — or a whole answer from a server that ignored "stream":
	// true. Error leaves it out: it may be completion text, and hedgeprobe
	// writes an error's text into its spans' status. Nil for the other
	// protocol errors, and where the route never reads the body
	// (hedgeprobe/goopenai: go-openai hands over the headers alone).
	Body []byte
}

// Error names the provider and the cause, never the Body.
func (e *ProtocolError) Error() string { return e.Provider + ": protocol error: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ProtocolError) Unwrap() error { return e.Err }

// Transient is false: the same upstream will answer the same way.
func (e *ProtocolError) Transient() bool { return false }

// NewHTTPError builds the *UpstreamError of an SDK error that carries an
// HTTP status and, when known, the response headers (for Retry-After) and
// the error object's fields, for a route over an SDK (as
// hedgeprobe/openaigo's MapError does). A 2xx status means an error
// payload inside a stream. Type, code and message are cut at 1 KiB, as
// the raw routes cut them. cause is kept for errors.As.
func NewHTTPError(provider string, status int, header http.Header, typ, code, message string, cause error) *UpstreamError {
	e := &UpstreamError{
		Provider: provider, StatusCode: status, Type: capText(typ), Code: capText(code), Message: capText(message), Cause: cause,
	}
	if status >= 200 && status <= 299 {
		e.StatusCode, e.MidStream = 0, true
	}
	if header != nil {
		e.RetryAfterHint = ParseRetryAfter(header, time.Now())
	}
	return e
}

// NewResponseError builds the *UpstreamError of an error response from its
// status, headers and body, as the raw routes read one: the error object's
// type, code and message (the OpenAI and Anthropic shapes, or "error":
// "text"), else the body's start (at most 200 bytes, valid UTF-8), and the
// Retry-After hint — for a route over an SDK that keeps the response of an
// error it cannot decode. A 2xx status means an error payload in a 200
// response. cause is kept for errors.As.
func NewResponseError(provider string, status int, header http.Header, body []byte, cause error) *UpstreamError {
	e, _ := newResponseError(provider, status, header, body, cause)
	return e
}

// newResponseError is NewResponseError; ok reports that the body is JSON
// with an "error" member.
func newResponseError(provider string, status int, header http.Header, body []byte, cause error) (e *UpstreamError, ok bool) {
	e = &UpstreamError{Provider: provider, StatusCode: status, Cause: cause}
	if status >= 200 && status <= 299 {
		e.StatusCode, e.MidStream = 0, true
	}
	if header != nil {
		e.RetryAfterHint = ParseRetryAfter(header, time.Now())
	}
	return e, fillFromPayload(e, body)
}

// NewPayloadError builds the *UpstreamError of an error payload received
// mid-stream, from its JSON ({"error": {…}} or Anthropic's
// {"type":"error","error":{…}}), for a route over an SDK that hands over
// the payload. cause is kept for errors.As. Data without an error object
// is not quoted in the error's text, only kept in Body: an SDK can take a
// chunk of the answer for an error payload (openai-go takes one with an
// "error": null member), and the text goes into span statuses, which
// carry no completion text.
func NewPayloadError(provider string, data []byte, cause error) *UpstreamError {
	e := &UpstreamError{Provider: provider, MidStream: true, Cause: cause}
	if !fillFromPayload(e, data) {
		e.Message = "a payload without an error object (its start is in the error's Body)"
	}
	return e
}

// responseError reads the body of a response (at most 64 KiB, for at most
// errorBodyWait) and returns it as NewResponseError does (a 2xx one is a
// payload in a 200 response); ok reports that the body is JSON with an
// "error" member.
func responseError(provider string, resp *http.Response) (e *UpstreamError, ok bool) {
	body := readErrorBody(resp, 64<<10)
	return newResponseError(provider, resp.StatusCode, resp.Header, body, nil)
}

// payloadError builds the UpstreamError of an error payload mid-stream.
func payloadError(provider string, data []byte) *UpstreamError {
	e := &UpstreamError{Provider: provider, MidStream: true}
	fillFromPayload(e, data)
	return e
}

type errorObject struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

// fillFromPayload sets e's body, and its type, code and message from the
// error object when body is JSON with an "error" member (ok), else its
// message from the body's start.
func fillFromPayload(e *UpstreamError, body []byte) (ok bool) {
	e.Body = bytes.Clone(body[:min(len(body), 4<<10)])
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 || string(env.Error) == "null" {
		e.Message = strings.TrimSpace(printable(e.Body))
		return false
	}
	var obj errorObject
	if json.Unmarshal(env.Error, &obj) != nil {
		// Some proxies send "error": "text".
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			e.Message = capText(s)
		}
		return true
	}
	fillFromObject(e, &obj)
	return true
}

// fillFromObject sets e's type, code and message from an error object.
func fillFromObject(e *UpstreamError, obj *errorObject) {
	e.Type, e.Message = capText(obj.Type), capText(obj.Message)
	if len(obj.Code) > 0 && string(obj.Code) != "null" {
		var s string
		if json.Unmarshal(obj.Code, &s) == nil {
			e.Code = capText(s)
		} else {
			e.Code = capText(string(obj.Code))
		}
	}
}

// eventError builds the UpstreamError of an event typed "error" (OpenAI-
// compatible or Anthropic): its data is an {"error": …} payload, as in a
// data event, or, from some proxies, the error object itself.
func eventError(provider string, data []byte) *UpstreamError {
	e := &UpstreamError{Provider: provider, MidStream: true}
	if fillFromPayload(e, data) {
		return e
	}
	var obj errorObject
	if json.Unmarshal(data, &obj) == nil && (obj.Type != "" || obj.Message != "") {
		fillFromObject(e, &obj)
	}
	return e
}

// maxErrorText caps an error's type, code and message: they go into span
// statuses, and a payload can make them as long as an event (1 MiB).
const maxErrorText = 1 << 10

// capText returns s cut to maxErrorText bytes, between characters.
func capText(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	i := maxErrorText
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// printable returns the start of an error body as a message: its first
// 200 bytes, cut between characters, invalid UTF-8 replaced (each run by
// U+FFFD, which can make it longer) — it ends up in
// span statuses, which OTLP sends as protobuf strings (a string that is not
// UTF-8 fails the whole export).
func printable(body []byte) string {
	if len(body) > 200 {
		body = body[:200]
		for i := len(body) - 1; i >= max(len(body)-utf8.UTFMax, 0); i-- {
			if utf8.RuneStart(body[i]) {
				if !utf8.FullRune(body[i:]) {
					body = body[:i] // a character the cut split
				}
				break
			}
		}
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// ParseRetryAfter reads the pushback hint of a response: "retry-after-ms"
// (OpenAI) first, then "Retry-After" as delay-seconds or an HTTP date
// relative to now. It returns 0 when there is no usable hint (absent,
// unparsable, not positive, NaN or infinite), and at most MaxRetryAfter.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, ok := delayNumber(v); ok {
			if d := hint(ms, time.Millisecond); d > 0 {
				return d
			}
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, ok := delayNumber(v); ok {
		return hint(s, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, MaxRetryAfter)
		}
	}
	return 0
}

// delayNumber parses a delay as ParseFloat does, but for the underscores
// it takes between digits (Go's syntax, no header's: "1_0" is no delay).
// A number beyond float64's range — delay-seconds may have any number of
// digits — is the largest float64, which hint caps; a tiny one is 0.
func delayNumber(v string) (float64, bool) {
	if strings.Contains(v, "_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err == nil:
		return f, true
	case errors.Is(err, strconv.ErrRange):
		if f > 0 {
			return math.MaxFloat64, true
		}
		return 0, true
	}
	return 0, false
}

// MaxRetryAfter is the longest pushback ParseRetryAfter returns: a longer
// hint (1e30 seconds, say) is taken as this long, not converted into an
// overflowing Duration.
const MaxRetryAfter = 24 * time.Hour

// hint converts x units into a Duration: 0 unless x is finite and
// positive (ParseFloat takes "NaN" and "Inf", which no server means as a
// delay), at most MaxRetryAfter.
func hint(x float64, unit time.Duration) time.Duration {
	if !(x > 0) || math.IsInf(x, 1) {
		return 0
	}
	if x >= float64(MaxRetryAfter)/float64(unit) {
		return MaxRetryAfter
	}
	return time.Duration(x * float64(unit))
}
