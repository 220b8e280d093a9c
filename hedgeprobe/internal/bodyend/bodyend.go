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

// doneMarks are the line that ends an OpenAI-compatible event stream, at
// the start of a line (the space after the colon is optional in SSE): a
// text delta may hold "data: [DONE]" too, but a JSON string holds no raw
// newline.
var doneMarks = [][]byte{[]byte("\ndata: [DONE]"), []byte("\ndata:[DONE]")}

// doneMarkLen is the length of the longest of doneMarks.
const doneMarkLen = len("\ndata: [DONE]")

// AtDone wraps resp's body, for an SDK that closes its stream itself when
// it reads [DONE] (openai-go), before its caller can read the body's end:
// closed after its "data: [DONE]" line has been read, the body first has
// its end read as Drain reads it. Only a 2xx HTTP/1.x response is
// wrapped.
func AtDone(resp *http.Response) {
	if resp == nil || resp.ProtoMajor != 1 || resp.Body == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	b := &doneBody{ReadCloser: resp.Body}
	b.tailN = copy(b.tail[:], "\n") // the body's start is a line's
	resp.Body = b
}

// doneBody is a response body that watches for a doneMark in what is read
// through it, across reads, without copying more than a mark's length.
type doneBody struct {
	io.ReadCloser
	tail  [doneMarkLen - 1]byte // the last bytes read, up to len(tail)
	tailN int
	// done: a doneMark has been read. Atomic: Close may come from another
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

// watch looks for a doneMark in chunk and where it meets the bytes before.
func (b *doneBody) watch(chunk []byte) {
	var win [2 * len(b.tail)]byte
	w := copy(win[:], b.tail[:b.tailN])
	w += copy(win[w:], chunk[:min(len(chunk), len(b.tail))])
	for _, m := range doneMarks {
		if bytes.Contains(chunk, m) || bytes.Contains(win[:w], m) {
			b.done.Store(true)
			return
		}
	}
	// The new tail: the last bytes of what came before and chunk.
	if len(chunk) >= len(b.tail) {
		b.tailN = copy(b.tail[:], chunk[len(chunk)-len(b.tail):])
	} else {
		b.tailN = copy(b.tail[:], win[max(0, w-len(b.tail)):w])
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
