package sse

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Tap is an http.RoundTripper for SDK clients that watches each
// text/event-stream response body (or one without a Content-Type, which
// the SDKs read as a stream) as the SDK reads it and reports every
// keepalive — SSE comments and "ping" events, which the SDKs' decoders drop
// — with its arrival time. It never changes the bytes the SDK reads.
//
// Reports go to the function attached to the request's context with
// WithKeepaliveFunc (per attempt), and to OnKeepalive (per client). Both are
// called on the goroutine reading the body and must not block. A reported
// keepalive's Data is cut at TapLimit bytes.
//
// A Tap is safe for concurrent use; its fields must not change after first
// use.
type Tap struct {
	// Base sends the requests; default DefaultClient().Transport.
	Base http.RoundTripper
	// OnKeepalive, when set, is called for every keepalive of every
	// response.
	OnKeepalive func(req *http.Request, ev Event)
}

// TapLimit bounds what a Tap keeps of a line and of an event's data while
// it watches a stream: a keepalive's text says nothing, and the SDK that
// reads the stream bounds its events itself, so the Tap holds a few KiB
// per stream however long an upstream's lines and events are, not a
// second copy of them.
const TapLimit = 4 << 10

type keepaliveKey struct{}

// WithKeepaliveFunc returns a context whose requests, sent through a Tap,
// report their keepalives to f.
func WithKeepaliveFunc(ctx context.Context, f func(Event)) context.Context {
	return context.WithValue(ctx, keepaliveKey{}, f)
}

// CloseIdleConnections closes Base's idle connections (DefaultClient's
// when Base is nil), when it can: http.Client.CloseIdleConnections calls
// it, and reaches Base's only through it.
func (t *Tap) CloseIdleConnections() { closeIdle(t.base()) }

// base is what sends the requests: Base, else DefaultClient's transport.
func (t *Tap) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return DefaultClient().Transport
}

// RoundTrip sends req and wraps an event-stream response body.
func (t *Tap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base().RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	// A body without a Content-Type is watched too: the SDKs read it as
	// an event stream, as CheckEventStream does.
	if mt := mediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" && mt != "" {
		return resp, nil
	}
	f, _ := req.Context().Value(keepaliveKey{}).(func(Event))
	if f == nil && t.OnKeepalive == nil {
		return resp, nil
	}
	tb := &tapBody{ReadCloser: resp.Body}
	tb.p.limit, tb.p.watch = TapLimit, true
	// Watching, the parser emits keepalives only (parser.watch).
	tb.emit = func(ev Event) {
		if f != nil {
			f(ev)
		}
		if t.OnKeepalive != nil {
			t.OnKeepalive(req, ev)
		}
	}
	resp.Body = tb
	return resp, nil
}

// tapBody parses the bytes the SDK reads, on the SDK's goroutine. Its
// parser watches (parser.watch): a line or an event's data over TapLimit
// is cut, so the Tap holds at most about three times TapLimit (a partial
// line, an event's data and its type) and never stops watching; feed then
// has no error to report.
type tapBody struct {
	io.ReadCloser
	p    parser
	emit func(Event)
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		_ = b.p.feed(p[:n], time.Now(), b.emit)
	}
	return n, err
}
