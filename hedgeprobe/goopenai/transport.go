package goopenai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// DefaultMaxLineSize is Transport's bound on one line of a stream when
// it is given none: the raw routes' bound on one event (sse's
// MaxEventSize default).
const DefaultMaxLineSize = 1 << 20

// Transport returns the RoundTripper a go-openai client needs under
// hedgeprobe, sending through base (http.DefaultTransport when nil). go-openai
// offers no middleware, so what openaigo and anthropicgo do in theirs is
// done here, on the responses:
//
//   - a 4xx or 5xx body ends a second after it arrived (sse.BoundErrorBody):
//     a 429 whose body stalls fails its attempt at once, not at the hedge
//     delay;
//   - a line of a 2xx body longer than maxLine bytes (0:
//     DefaultMaxLineSize) fails the read with an error matching
//     sse.ErrTooLarge, which the route reports as a fatal *sse.ProtocolError:
//     go-openai reads a line whole, so without it an upstream that never
//     sends a newline grows the attempt's memory until it stops;
//   - a 2xx body closed after its "data: [DONE]" line first has its end
//     read (at most 4 KiB for 20 ms), so an HTTP/1.1 connection goes back to
//     the pool for the next attempt instead of being closed.
//
// Build the client's HTTPClient on it (ClientConfig.HTTPClient).
func Transport(base http.RoundTripper, maxLine int) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if maxLine <= 0 {
		maxLine = DefaultMaxLineSize
	}
	return transport{base: base, maxLine: maxLine}
}

type transport struct {
	base    http.RoundTripper
	maxLine int
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		sse.BoundErrorBody(resp)
		return resp, nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		bodyend.AtDone(resp) // wraps only an HTTP/1.x body
		resp.Body = &lineBound{ReadCloser: resp.Body, max: t.maxLine}
	}
	return resp, nil
}

// lineBound is a response body that fails once a line grows past max
// bytes.
type lineBound struct {
	io.ReadCloser
	max  int
	line int // bytes of the current line read so far
	err  error
}

func (b *lineBound) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			b.line += len(rest)
			break
		}
		b.line += i
		if b.line > b.max {
			break
		}
		b.line, rest = 0, rest[i+1:]
	}
	if b.line > b.max {
		// What was read is not handed over: the line it belongs to is
		// lost with the stream, and a reader must not take its start
		// for a whole line.
		b.err = fmt.Errorf("%w: a line longer than %d bytes (goopenai.Transport)", sse.ErrTooLarge, b.max)
		return 0, b.err
	}
	return n, err
}
