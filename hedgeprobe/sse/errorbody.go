package sse

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// errorBodyWait bounds the wait for the body of a response that is not a
// stream (an error status, a 200 of JSON or HTML). What the attempt acts
// on — a 429 or 5xx, its Retry-After — is in the status and the headers,
// but it is reported only once the body is read; a body that never ends
// would hold the attempt open until its hedge delay or the caller gave
// up, where a transient error launches the next attempt at once. An error
// body comes with its headers or within milliseconds of them.
const errorBodyWait = time.Second

// readErrorBody reads at most limit bytes of resp's body, for at most
// errorBodyWait, and returns what arrived: a body still unfinished then is
// closed, which ends the read (and the connection, which is what is left
// to do with a response that stopped halfway).
func readErrorBody(resp *http.Response, limit int64) []byte {
	b := endAfter(resp.Body)
	defer b.t.Stop()
	body, _ := io.ReadAll(io.LimitReader(b, limit))
	return body
}

// BoundErrorBody makes the body of resp, when its status is 4xx or 5xx, end
// a second after it arrived: what has come by then reads as the whole
// body, and the connection is closed. It is the bound the raw routes put
// on reading an error response, for a route over an SDK, which reads the
// body whole before it returns its error: a 429 whose body stalls then
// fails the attempt within a second, as the SDK's error of that status
// (with its Retry-After, where the SDK keeps the headers), where the read
// would have held it until its hedge delay or the caller gave up. Call it
// from the SDK's middleware (hedgeprobe/openaigo and
// hedgeprobe/anthropicgo do); BoundErrorBodies does it for every response
// of a transport.
func BoundErrorBody(resp *http.Response) {
	// Only an error: a 1xx (101's body is the upgraded connection) and
	// a 3xx, which the client follows, are left as they are.
	if resp == nil || resp.Body == nil || resp.StatusCode < 400 {
		return
	}
	resp.Body = endAfter(resp.Body)
}

// endAfter returns body, ended errorBodyWait from now.
func endAfter(body io.ReadCloser) *timedBody {
	b := &timedBody{ReadCloser: body}
	b.t = time.AfterFunc(errorBodyWait, func() {
		b.ended.Store(true)
		_ = b.ReadCloser.Close() // ends a Read under way
	})
	return b
}

// timedBody is a response body that a timer ends.
type timedBody struct {
	io.ReadCloser
	t     *time.Timer
	ended atomic.Bool
}

// Read reads the body, which ends (io.EOF) once the timer has fired: the
// error of the read it cut is the timer's doing, not the connection's.
func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.ended.Load() {
		err = io.EOF
	}
	return n, err
}

// Close stops the timer and closes the body.
func (b *timedBody) Close() error {
	b.t.Stop()
	return b.ReadCloser.Close()
}

// BoundErrorBodies returns a RoundTripper that sends through base
// (http.DefaultTransport when nil) and bounds the body of every 4xx and
// 5xx response as BoundErrorBody does: for an SDK that offers no
// middleware (go-openai), through the http.Client it is given.
func BoundErrorBodies(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return boundErrors{base}
}

type boundErrors struct{ base http.RoundTripper }

func (b boundErrors) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err == nil {
		BoundErrorBody(resp)
	}
	return resp, err
}
