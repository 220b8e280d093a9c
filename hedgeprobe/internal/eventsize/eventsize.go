// Package eventsize bounds the events of an event-stream response for the
// SDK adapters (hedgeprobe/openaigo, hedgeprobe/anthropicgo). Their SDKs'
// decoders join an event's lines in one buffer until the blank line that
// ends it, with no bound on the event, only on a line: an upstream that
// never ends its event grows an attempt's memory until it stops. The raw
// routes bound a line and an event's data at sse.DefaultMaxEventSize;
// Bound bounds a whole event at that size for the SDKs, from their
// middleware — its field names and other fields included (comments are
// not: the decoders drop them), so it is a little stricter than the raw
// routes.
package eventsize

import (
	"fmt"
	"io"
	"net/http"

	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Bound makes the body of resp, when its status is 2xx, fail its read
// with an error matching sse.ErrTooLarge once an event — what comes
// between two blank lines, the lines' ends and comment lines not counted
// (the decoders drop comments; keepalives may come without blank lines
// between them) — or a line, comments included, grows past max bytes;
// what came before that is read first. The adapters type the error as a
// fatal *sse.ProtocolError, as the raw routes do.
func Bound(resp *http.Response, max int) {
	if resp == nil || resp.Body == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	resp.Body = &body{ReadCloser: resp.Body, max: max}
}

// body is a response body that counts the bytes of its current event.
type body struct {
	io.ReadCloser
	max     int
	event   int  // bytes of the current event so far
	line    int  // bytes of the current line so far
	comment bool // the current line is a comment (":…")
	// cr: the latest byte was a '\r', not counted yet — it is a line's
	// end only when a '\n' follows it, which the next byte tells.
	cr bool
	// bom is how many bytes of a byte order mark opened the body: a whole
	// one is no part of the first line, as the SSE rules say; the bytes of
	// a partial one are the line's first.
	bom int
	err error
}

// ByteOrderMark is the UTF-8 byte order mark an event stream may open
// with, which the SSE rules drop (goopenai's Transport drops it too).
const ByteOrderMark = "\xEF\xBB\xBF"

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	for i, c := range p[:n] {
		if b.bom < len(ByteOrderMark) {
			if c == ByteOrderMark[b.bom] {
				b.bom++
				continue
			}
			// No mark: what matched of one is the line's start (so the
			// line is no comment), and no mark is looked for again.
			b.line, b.event = b.bom, b.bom
			b.bom = len(ByteOrderMark)
		}
		// The decoders split lines at '\n' and drop one '\r' before it:
		// any other '\r' is a byte of its line ("a\rb", and "\r\r\n" is
		// no blank line). Counted once the next byte shows it, a '\r' that
		// passes the bound is cut after, not before.
		over := b.cr && c != '\n' && b.count()
		b.cr = false
		switch {
		case over:
		case c == '\n':
			if b.line == 0 { // a blank line ends the event
				b.event = 0
			}
			b.line, b.comment = 0, false
		case c == '\r':
			b.cr = true
		default:
			if b.line == 0 && c == ':' {
				b.comment = true
			}
			over = b.count()
		}
		if over {
			b.err = fmt.Errorf("%w: an event or a line longer than %d bytes", sse.ErrTooLarge, b.max)
			if i == 0 {
				return 0, b.err
			}
			return i, nil
		}
	}
	return n, err
}

// count counts a byte of the current line and reports whether the line or
// the event is now past the bound. A comment is bounded as a line, not
// counted into its event: the decoders hold a line whole (up to 32 MiB)
// before they drop it.
func (b *body) count() bool {
	b.line++
	if !b.comment {
		b.event++
	}
	return b.event > b.max || b.line > b.max
}
