package goopenai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/eventsize"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// DefaultMaxLineSize is Transport's bound on one line of a stream when
// it is given none: the raw routes' bound on a line and an event.
const DefaultMaxLineSize = sse.DefaultMaxEventSize

// Transport returns the RoundTripper a go-openai client needs under
// hedgeprobe, sending through base (http.DefaultTransport when nil). go-openai
// offers no middleware, so what openaigo and anthropicgo do in theirs is
// done here, on the responses — the 2xx ones only to the client's streaming
// requests (go-openai sends them with "Accept: text/event-stream"), so the
// same client's other calls (speech, a file's content, a transcription)
// get their bodies as sent, unbounded:
//
//   - a 4xx or 5xx body ends a second after it arrived (sse.BoundErrorBody):
//     a 429 whose body stalls fails its attempt at once, not at the hedge
//     delay;
//   - a 2xx event stream (text/event-stream, or no Content-Type) reaches
//     go-openai as its "data:" lines and the blank line that ends each
//     event: comments (keepalives), "event:", "id:" and "retry:" lines,
//     which go-openai would keep for the whole stream and glue before an
//     error payload (which it then cannot decode), and which count
//     against its EmptyMessagesLimit, never reach it (an sse.Tap under
//     Transport still sees the keepalives). A line that is not an SSE
//     field at all — a bare JSON error object — is dropped too, as the raw
//     route ignores it: the stream then ends without its terminal event.
//     A byte order mark that opens the stream is dropped, as the raw
//     route drops it: to go-openai it would hide the first "data:" line;
//   - a line of such a stream longer than maxLine bytes (0:
//     DefaultMaxLineSize; its "\n" or "\r\n" not counted) fails the read
//     with an error matching sse.ErrTooLarge, which the route reports as a
//     fatal *sse.ProtocolError; the lines before it, and the long line's
//     first maxLine bytes, are read first. go-openai reads a line whole, so
//     without it an upstream that never sends a newline grows the attempt's
//     memory until it stops. Any other 2xx body (JSON: an error object, or
//     the answer of a server that ignored "stream") is read by go-openai
//     whole, and bounded whole at maxLine bytes. go-openai reads it line
//     by line and loses a last line without its newline, so a body that
//     ends without one (as Go's json.Marshal and many servers send it)
//     gets one: its error object still fails the attempt with the
//     object's error, not as a connection cut short;
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

// CloseIdleConnections closes base's idle connections when it can:
// http.Client.CloseIdleConnections reaches them only through it.
func (t transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
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
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && streaming(req) {
		bodyend.AtDone(resp) // wraps only an HTTP/1.x body
		switch mediaType(resp.Header) {
		case "", "text/event-stream":
			resp.Body = &dataLines{ReadCloser: resp.Body, max: t.maxLine}
		default:
			resp.Body = &wholeBound{ReadCloser: resp.Body, max: t.maxLine}
		}
	}
	return resp, nil
}

// streaming reports whether req is one of go-openai's streaming requests,
// which it sends with "Accept: text/event-stream".
func streaming(req *http.Request) bool {
	for _, v := range req.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/event-stream") {
			return true
		}
	}
	return false
}

// tooLarge is the error of a body past Transport's bound.
func tooLarge(what string, max int) error {
	return fmt.Errorf("%w: %s longer than %d bytes (goopenai.Transport)", sse.ErrTooLarge, what, max)
}

// wholeBound is a response body that fails past its first max bytes and
// ends in a newline.
type wholeBound struct {
	io.ReadCloser
	max, read int
	err       error
	// last is the last byte passed on; newline says the body ended with
	// a full read and its newline is owed.
	last    byte
	newline bool
}

func (b *wholeBound) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.newline {
		b.newline, b.err = false, io.EOF
		p[0] = '\n'
		return 1, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if left := b.max - b.read; n > left {
		b.read = b.max
		b.err = tooLarge("a body that is not an event stream", b.max)
		if left == 0 {
			return 0, b.err
		}
		return left, nil
	}
	b.read += n
	if n > 0 {
		b.last = p[n-1]
	}
	if err == io.EOF && b.read > 0 && b.last != '\n' {
		// The newline go-openai needs to read the last line (Transport),
		// now or, when p is full, at the next Read.
		b.last = '\n'
		if n == len(p) {
			b.newline = true
			return n, nil
		}
		b.err = io.EOF
		p[n] = '\n'
		return n + 1, io.EOF
	}
	return n, err
}

// dataField starts the lines go-openai reads.
var dataField = []byte("data:")

// dataLines is a response body that passes on only its "data:" lines and
// the blank line after each, and fails once a line grows past max bytes.
// What it holds back is at most a line's first len(dataField) bytes.
type dataLines struct {
	io.ReadCloser
	max int
	in  []byte // a read of the body
	out []byte // what is ready for the reader, from out[off:]
	off int
	// The current line: its first bytes until its fate is known, its
	// fate, and its length so far, its "\n" not counted.
	head       [len("data:")]byte
	headN      int
	keep, drop bool
	line       int
	// afterData: a "data:" line was kept and no blank line has come
	// since, so the next blank line ends its event; any other blank line
	// is dropped.
	afterData bool
	// bom is how many bytes of a byte order mark opened the body: a whole
	// one is dropped, as the SSE rules and the raw routes drop it (to
	// go-openai it would make the first line no "data:" line); the bytes
	// of a partial one are the first line's.
	bom int
	// err ends the body once out is read: the body's own error, or the
	// bound's.
	err error
}

func (b *dataLines) Read(p []byte) (int, error) {
	for b.off == len(b.out) {
		if b.err != nil {
			return 0, b.err
		}
		if b.in == nil {
			b.in = make([]byte, 16<<10)
		}
		b.out, b.off = b.out[:0], 0
		n, err := b.ReadCloser.Read(b.in)
		b.filter(b.in[:n])
		if err != nil && b.err == nil && b.takeMark() {
			b.err = err
		}
	}
	n := copy(p, b.out[b.off:])
	b.off += n
	return n, nil
}

// filter appends to out what chunk, the body's next bytes, passes on; it
// stops at a line past the bound, setting err.
func (b *dataLines) filter(chunk []byte) {
	for _, c := range chunk {
		if b.bom < len(eventsize.ByteOrderMark) && c == eventsize.ByteOrderMark[b.bom] {
			b.bom++
			continue
		}
		if !b.takeMark() || !b.take(c) {
			return
		}
	}
}

// takeMark takes the bytes of a partial byte order mark as the first
// line's, once a byte that is not the mark's, or the body's end, shows it
// partial; no mark is looked for after. It reports false as take does.
func (b *dataLines) takeMark() bool {
	partial := b.bom
	if partial == len(eventsize.ByteOrderMark) {
		return true
	}
	b.bom = len(eventsize.ByteOrderMark)
	for i := range partial {
		if !b.take(eventsize.ByteOrderMark[i]) {
			return false
		}
	}
	return true
}

// take passes on c, or not, as its line's fate says; it reports false
// when c puts the line past the bound, setting err.
func (b *dataLines) take(c byte) bool {
	if c == '\n' {
		b.endLine()
		return true
	}
	b.line++
	// A "\r" may end the line ("\r\n"), and is not counted then.
	if n := b.line; n > b.max && (n > b.max+1 || c != '\r') {
		b.err = tooLarge("a line", b.max)
		return false
	}
	switch {
	case b.keep:
		b.out = append(b.out, c)
	case b.drop:
	default:
		b.head[b.headN] = c
		b.headN++
		h := b.head[:b.headN]
		switch {
		case bytes.Equal(h, dataField):
			b.keep = true
			b.out = append(b.out, h...)
		case b.headN == 1 && c == '\r': // a blank line's "\r\n", perhaps
		case !bytes.HasPrefix(dataField, h):
			b.drop = true
		}
	}
	return true
}

// endLine passes on the "\n" of a kept line, and a blank line after one.
func (b *dataLines) endLine() {
	blank := !b.keep && !b.drop && (b.headN == 0 || b.headN == 1 && b.head[0] == '\r')
	switch {
	case b.keep:
		b.out = append(b.out, '\n')
	case blank && b.afterData:
		b.out = append(b.out, b.head[:b.headN]...)
		b.out = append(b.out, '\n')
	}
	// A dropped line (retry:, id:, a comment) between an event's data and
	// its blank line does not keep the blank line from go-openai, which
	// reads an error payload only once it has the line after it.
	b.afterData = b.keep || b.afterData && !blank
	b.headN, b.keep, b.drop, b.line = 0, false, false, 0
}
