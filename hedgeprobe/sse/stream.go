package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
)

// Stream is a typed event stream over an HTTP response: a
// hedgeprobe.Source of ChatChunk (NewOpenAIStream) or AnthropicEvent
// (NewAnthropicStream).
//
// Next returns false at the stream's terminal event ([DONE], message_stop)
// or after the caller's Close with Err nil, and otherwise with the error
// that ended it: an *UpstreamError for a non-2xx status or an error
// payload, a *ConnectionError when the connection broke or the body ended
// before the terminal event (never a clean end), a *ProtocolError for
// malformed or oversized data, or the context's error when the request's
// context was cancelled. The stream closes itself when it ends; at its
// terminal event an HTTP/1.x response's stream first reads the rest of the
// body (at most 4 KiB, for at most 20 ms), so that its connection goes
// back to the pool.
//
// A Stream is not safe for concurrent use, except that Close may be called
// while Next blocks: it cancels the request and unblocks Next.
type Stream[T any] struct {
	provider string
	ctx      context.Context
	cancel   context.CancelFunc
	body     io.ReadCloser
	resp     *http.Response // its end is read at a clean end (bodyend)
	rd       *Reader
	decode   func(provider string, ev Event) (T, bool, bool, error)

	cur    T
	err    error
	done   bool // Next returned false for good
	ending bool // the terminal item was delivered; the next Next ends
	events int

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// StreamOptions configures NewOpenAIStream and NewAnthropicStream.
type StreamOptions struct {
	// Provider names the upstream in errors; default "openai" or
	// "anthropic".
	Provider string
	// MaxEventSize bounds one line and one event's data; default
	// DefaultMaxEventSize (1 MiB).
	MaxEventSize int
	// Cancel, when set, is called by Close (and at the end of the stream)
	// so that the request's own context is cancelled with it.
	Cancel context.CancelFunc
}

// NewOpenAIStream reads an OpenAI-compatible chat-completions event stream
// from resp. A non-2xx resp yields a stream whose first Next returns false
// with an *UpstreamError; the body is consumed and closed.
func NewOpenAIStream(resp *http.Response, o StreamOptions) *Stream[ChatChunk] {
	if o.Provider == "" {
		o.Provider = "openai"
	}
	return newStream(resp, o, decodeOpenAI)
}

// NewAnthropicStream reads an Anthropic Messages event stream from resp,
// as NewOpenAIStream does.
func NewAnthropicStream(resp *http.Response, o StreamOptions) *Stream[AnthropicEvent] {
	if o.Provider == "" {
		o.Provider = "anthropic"
	}
	return newStream(resp, o, decodeAnthropic)
}

func newStream[T any](resp *http.Response, o StreamOptions, decode func(string, Event) (T, bool, bool, error)) *Stream[T] {
	s := &Stream[T]{provider: o.Provider, cancel: o.Cancel, body: resp.Body, resp: resp, decode: decode, ctx: context.Background()}
	if resp.Request != nil {
		s.ctx = resp.Request.Context()
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.err, _ = responseError(o.Provider, resp)
		s.finish()
		return s
	}
	if err := CheckEventStream(o.Provider, resp); err != nil {
		s.err = err
		s.finish()
		return s
	}
	s.rd = NewReader(resp.Body, WithMaxEventSize(o.MaxEventSize))
	return s
}

// CheckEventStream returns nil when resp, a 2xx response to a streaming
// request, is an event stream or does not say what it is; otherwise the
// error the raw routes give for it, reading the body (it is not closed,
// unless it is still unfinished after a second: see errorBodyWait): a JSON
// body with an "error" member is an *UpstreamError (a proxy's error, as a
// payload in a 200 response), anything else a *ProtocolError (a server
// that ignored "stream": true, a login page) — the same upstream will
// answer the same way. The body's start is in the error's Body, out of
// its text (it may be the answer's text, and the text goes into the
// spans). For a route over an SDK, which reads any 200 body as a stream.
func CheckEventStream(provider string, resp *http.Response) error {
	switch ct := resp.Header.Get("Content-Type"); mediaType(ct) {
	case "text/event-stream", "":
		return nil
	case "application/json":
		e, ok := responseError(provider, resp)
		if ok {
			return e // a payload in a 200 response
		}
		return &ProtocolError{Provider: provider, Body: e.Body, Err: errors.New("got application/json, want text/event-stream")}
	default:
		body := readErrorBody(resp, 4<<10)
		return &ProtocolError{Provider: provider, Body: body,
			Err: fmt.Errorf("got %s, want text/event-stream (the body's start is in the error's Body)", ct)}
	}
}

// mediaType returns the media type of a Content-Type value, lower case:
// what comes before its parameters, which are not looked at (a malformed
// parameter, "text/event-stream;; charset=utf-8", is still a stream).
func mediaType(ct string) string {
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// Next advances to the next item.
func (s *Stream[T]) Next() bool {
	if s.done {
		return false
	}
	if s.ending || s.closed.Load() {
		if s.ending {
			s.drain()
		}
		s.finish()
		return false
	}
	for s.rd.Next() {
		s.events++
		item, emit, end, err := s.decode(s.provider, s.rd.Event())
		switch {
		case err != nil:
			s.err = err
			s.finish()
			return false
		case end && !emit:
			s.drain()
			s.finish()
			return false
		case emit:
			s.cur, s.ending = item, end
			return true
		}
	}
	rerr := s.rd.Err()
	switch {
	case errors.Is(rerr, ErrTooLarge):
		s.err = &ProtocolError{Provider: s.provider, Err: rerr}
	case s.closed.Load():
		// Closed by the caller: not an upstream failure.
	case s.ctx.Err() != nil:
		s.err = s.ctx.Err()
	case rerr == nil:
		s.err = &ConnectionError{Provider: s.provider, Connected: true, Events: s.events, Err: io.ErrUnexpectedEOF}
	default:
		s.err = &ConnectionError{Provider: s.provider, Connected: true, Events: s.events, Err: rerr}
	}
	s.finish()
	return false
}

// drain reads the body's end after the terminal event (bodyend.Drain), so
// that an HTTP/1.x connection goes back to the pool.
func (s *Stream[T]) drain() {
	if !s.closed.Load() {
		bodyend.Drain(s.resp)
	}
}

func (s *Stream[T]) finish() {
	s.done = true
	_ = s.Close()
}

// Current returns the current item.
func (s *Stream[T]) Current() T { return s.cur }

// Err returns the error that ended the stream, nil at its terminal event.
func (s *Stream[T]) Err() error { return s.err }

// Close cancels the request and closes the body. It is idempotent and may
// be called while Next blocks.
func (s *Stream[T]) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.cancel != nil {
			s.cancel()
		}
		if s.body != nil {
			s.closeErr = s.body.Close()
		}
	})
	return s.closeErr
}
