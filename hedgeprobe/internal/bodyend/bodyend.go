// Package bodyend reads what follows a stream's terminal event — the
// chunked encoding's end — before the stream is closed, for the raw SSE
// routes (hedgeprobe/sse) and the SDK adapters alike. Closed before that
// is read, an HTTP/1.1 response's connection is closed, not put back in
// the pool, and the next attempt to the upstream (vLLM, Ollama and most
// proxies speak HTTP/1.1) dials and shakes hands again. HTTP/2 needs none
// of it: a stream's reset leaves its connection open.
package bodyend

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// Wait bounds how long Drain waits for the body's end: an upstream that
// keeps the body open after its terminal event costs the stream's end at
// most this. A variable for the tests.
var Wait = 20 * time.Millisecond

// Max bounds what Drain reads: a body with more after its terminal event
// is no stream's end, and its connection is not worth keeping.
const Max = 4 << 10

// Drain reads resp's body to its end, at most Max bytes for at most Wait,
// when resp came over HTTP/1.x; it closes the body when the time is up,
// which unblocks the read (the body is to be closed after it anyway). A
// response that is not from the network (ProtoMajor 0), whose body's
// Close may not unblock a Read, is left alone.
func Drain(resp *http.Response) {
	if resp == nil || resp.ProtoMajor != 1 || resp.Body == nil {
		return
	}
	t := time.AfterFunc(Wait, func() { _ = resp.Body.Close() })
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, resp.Body, Max)
}

// The line that ends an OpenAI-compatible event stream is "data:", any
// run of whitespace but a newline (' ', '\t', '\f', '\r'), then
// "[DONE]", at the start of a line: the space after the colon is optional
// in SSE, openai-go takes one at most and go-openai any whitespace (it
// matches `^data:\s*` on the line), and the mark must find every line
// either SDK stops at, or the SDK's Close cuts a connection that was good
// to keep; a mark taken where the SDK does not stop costs its Close at
// most Wait. A text delta may hold "data: [DONE]" too, but a JSON string
// holds no raw newline, so the mark is looked for only at a line's start.
const (
	markLine = "\ndata:" // the newline that starts the line, then the field
	markDone = "[DONE]"
)

// AtDone wraps resp's body, for an SDK that closes its stream itself when
// it reads [DONE] (openai-go, go-openai), before its caller can read the
// body's end: closed after its "data: [DONE]" line has been read, the
// body first has its end read as Drain reads it. Only a 2xx HTTP/1.x
// response is wrapped.
func AtDone(resp *http.Response) {
	if resp == nil || resp.ProtoMajor != 1 || resp.Body == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, matched: 1} // the body's start is a line's
}

// doneBody is a response body that watches what is read through it for
// the [DONE] line, across reads, byte by byte, with no copy.
type doneBody struct {
	io.ReadCloser
	// matched is how much of the mark the last bytes read match: up to
	// len(markLine), that many of its bytes; at len(markLine), the field
	// and the whitespace after it; beyond, that many bytes of markDone
	// more.
	matched int
	// bomAt is how many bytes of a byte order mark open the body so far,
	// -1 past the body's start: a BOM is no part of the first line (the
	// SSE rules and goopenai.Transport drop it), so a [DONE] right after
	// it is at a line's start.
	bomAt int
	// done: the mark has been read. Atomic: Close may come from another
	// goroutine while a Read is under way (a loser cancelled mid-read).
	done atomic.Bool
}

func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.done.Load() {
		b.watch(p[:n])
	}
	return n, err
}

// bom is the UTF-8 byte order mark: eventsize.ByteOrderMark, which this
// package cannot import (eventsize imports sse, which imports bodyend).
const bom = "\xEF\xBB\xBF"

// watch carries the match of the mark on through chunk.
func (b *doneBody) watch(chunk []byte) {
	i := 0
	for b.bomAt >= 0 && i < len(chunk) {
		if chunk[i] != bom[b.bomAt] {
			if b.bomAt > 0 {
				b.matched = 0 // a part of a BOM: the first line is no field's
			}
			b.bomAt = -1
			break
		}
		i++
		if b.bomAt++; b.bomAt == len(bom) {
			b.bomAt = -1
		}
	}
	for ; i < len(chunk); i++ {
		if b.matched == 0 {
			// Nothing matched: only a newline can start the mark.
			nl := bytes.IndexByte(chunk[i:], '\n')
			if nl < 0 {
				return
			}
			i += nl
		}
		c := chunk[i]
		switch m := b.matched; {
		case m < len(markLine) && c == markLine[m]:
			b.matched++
		case m == len(markLine) && (c == ' ' || c == '\t' || c == '\f' || c == '\r'):
			// whitespace between the field and [DONE]
		case m >= len(markLine) && c == markDone[m-len(markLine)]:
			if b.matched++; b.matched == len(markLine)+len(markDone) {
				b.done.Store(true)
				return
			}
		case c == '\n':
			b.matched = 1 // a mismatch on a newline starts the mark again
		default:
			b.matched = 0
		}
	}
}

// Close reads the body's end first when [DONE] has been read.
func (b *doneBody) Close() error {
	if b.done.Load() {
		t := time.AfterFunc(Wait, func() { _ = b.ReadCloser.Close() })
		_, _ = io.CopyN(io.Discard, b.ReadCloser, Max)
		t.Stop()
	}
	return b.ReadCloser.Close()
}
