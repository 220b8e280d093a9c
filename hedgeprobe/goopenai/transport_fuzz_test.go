package goopenai_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// fuzzBody is an in-memory response body that returns its bytes in pieces
// of a fuzz-chosen size (split == 0: a byte at a time) and counts what was
// read from it. Close is counted and does not stop later reads: bodyend's
// timer may close it while a drain is under way, and what the drain reads
// must not depend on the scheduler.
type fuzzBody struct {
	data   []byte
	off    int
	split  uint64
	reads  int
	closes atomic.Int32
}

func (b *fuzzBody) Read(p []byte) (int, error) {
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := 1 + int(b.split>>(uint(b.reads*5)%60)&31)
	b.reads++
	n = min(n, len(p), len(b.data)-b.off)
	copy(p, b.data[b.off:b.off+n])
	b.off += n
	return n, nil
}

func (b *fuzzBody) Close() error {
	b.closes.Add(1)
	return nil
}

// The patterns of go-openai v1.43.0's streamReader.processLines.
var (
	goHeaderData  = regexp.MustCompile(`^data:\s*`)
	goErrorPrefix = regexp.MustCompile(`^data:\s*{"error":`)
)

// goOpenAIPayloads is what go-openai's stream reader (processLines) returns
// from stream, in order, until it stops: it reads a line to its "\n" (an
// unfinished one ends the stream), trims its spaces, stops at an error
// payload or at "[DONE]" (done), skips a line that is no "data:" line, and
// returns a data line without its field name and the spaces after it.
func goOpenAIPayloads(stream []byte) (payloads [][]byte, done bool) {
	for {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			return payloads, false
		}
		line := bytes.TrimSpace(stream[:i+1])
		stream = stream[i+1:]
		if goErrorPrefix.Match(line) {
			return payloads, false
		}
		if !goHeaderData.Match(line) {
			continue
		}
		p := goHeaderData.ReplaceAll(line, nil)
		if string(p) == "[DONE]" {
			return payloads, true
		}
		payloads = append(payloads, p)
	}
}

// refDataLines is a line-at-a-time statement of what Transport passes of a
// 2xx event stream: each "data:" line (the last one needs no "\n"), and a
// blank line ("\n" or "\r\n") when a "data:" line came since the last
// blank line; nothing else. A line longer than max, its "\n" and a "\r"
// before it (or before the body's end) not counted, ends it: long is that
// line, and out what passed before it. A byte order mark that opens the
// body is dropped, as the SSE rules drop it.
func refDataLines(in []byte, max int) (out, long []byte) {
	in = bytes.TrimPrefix(in, []byte("\xEF\xBB\xBF"))
	afterData := false
	for _, l := range bytes.SplitAfter(in, []byte("\n")) {
		content := bytes.TrimSuffix(l, []byte("\n"))
		if len(bytes.TrimSuffix(content, []byte("\r"))) > max {
			return out, content
		}
		blank := len(content) == 0 || string(content) == "\r"
		switch {
		case bytes.HasPrefix(content, []byte("data:")):
			out = append(out, l...)
			afterData = true
		case blank:
			if afterData && len(l) > len(content) {
				out = append(out, l...)
			}
			afterData = false
		}
	}
	return out, nil
}

// sseOnly reports a body whose lines the SSE rules and go-openai split or
// read apart by design: a "\r" not followed by "\n" ends a line to the
// SSE rules and sse.Reader, not to go-openai; a "data" line without a
// colon is an empty data field to the SSE rules, and no "data:" line to
// go-openai, which Transport passes only.
func sseOnly(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("\xEF\xBB\xBF")) // no part of the first line
	for i, c := range b {
		if c == '\r' && (i+1 == len(b) || b[i+1] != '\n') {
			return true
		}
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if string(bytes.TrimSuffix(l, []byte("\r"))) == "data" {
			return true
		}
	}
	return false
}

// sseDataLines is what the raw route's sse.Reader yields of in, as the
// "data:" lines go-openai would read: every data field of every event, in
// order. The body is cut after its last "\n" and given a blank line, so an
// event that go-openai reads line by line but the SSE rules would discard
// unterminated is dispatched too.
func sseDataLines(t *testing.T, in []byte) []byte {
	cut := in[:bytes.LastIndexByte(in, '\n')+1]
	r := sse.NewReader(bytes.NewReader(append(bytes.Clone(cut), '\n')))
	var lines []byte
	for r.Next() {
		ev := r.Event()
		if ev.Comment {
			continue
		}
		for _, v := range bytes.Split(ev.Data, []byte("\n")) {
			lines = append(lines, "data:"...)
			lines = append(lines, v...)
			lines = append(lines, '\n')
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("sse.Reader of %q: %v", cut, err)
	}
	return lines
}

// readBody reads body to its end in reads of size bytes, or until stop
// reports true of what was read when a read brought a "\n"; it fails t on
// a read that returns more than it was given room for, or on reads that
// make no progress.
func readBody(t *testing.T, body io.Reader, size int, stop func([]byte) bool) ([]byte, error) {
	var out []byte
	p := make([]byte, size)
	for empty := 0; ; {
		n, err := body.Read(p)
		if n < 0 || n > len(p) {
			t.Fatalf("Read of %d bytes returned %d", len(p), n)
		}
		out = append(out, p[:n]...)
		if err != nil {
			return out, err
		}
		if n == 0 {
			if empty++; empty > 100 {
				t.Fatalf("100 reads in a row returned nothing and no error, after %q", out)
			}
		} else if stop != nil && bytes.IndexByte(p[:n], '\n') >= 0 && stop(out) {
			return out, nil
		}
	}
}

// doneMark is bodyend's [DONE] mark: "data:", whitespace but a newline
// (go-openai's `\s`), "[DONE]", at a line's start.
var doneMark = regexp.MustCompile(`(^|\n)data:[ \t\f\r]*\[DONE\]`)

// hasDoneMark reports whether raw holds bodyend's [DONE] mark; a byte
// order mark that opens raw is no part of its first line.
func hasDoneMark(raw []byte) bool {
	return doneMark.Match(bytes.TrimPrefix(raw, []byte("\xEF\xBB\xBF")))
}

// FuzzTransport holds Transport to its contract on any body, Content-Type
// and status, read in fuzz-chosen pieces through reads of a fuzz-chosen
// size, with maxLine in 1..64:
//
//   - a 2xx event stream (no Content-Type, or text/event-stream) reads as
//     exactly refDataLines' statement of it: its "data:" lines and the
//     blank line after each, byte for byte; when a line (its "\n" and the
//     "\r" before it not counted) is longer than maxLine, what passed
//     before that line, then the long line's first maxLine bytes if it
//     is a "data:" line (and maxLine can hold "data:"), then an error
//     matching sse.ErrTooLarge; otherwise the read ends cleanly;
//   - on such a body without a lone CR or a "data" line without a colon
//     (see sseOnly), the data payloads go-openai
//     would read through Transport are those of the data fields the raw
//     route's sse.Reader yields for the same body, up to [DONE];
//   - every [DONE] go-openai stops at is bodyend's mark (hasDoneMark); a
//     body closed when the mark has been read has its next bodyend.Max
//     bytes drained by Close, and one closed before it has nothing more
//     read;
//   - any other 2xx body reads whole up to maxLine bytes, then fails with
//     sse.ErrTooLarge; an error status's body reads whole and unchanged;
//   - no read returns more than it was given room for or stalls, and
//     Close returns nil and closes the body.
func FuzzTransport(f *testing.F) {
	for _, s := range []struct {
		body string
		max  uint8
	}{
		{"data: abcd\n\ndata:efgh\n\n", 10},
		{": ping\n\ndata: a\n\n: ping\n\n", 10},
		{"event: x\nid: 1\nretry: 5\ndata: a\n\n", 10},
		{"\n\n\r\n\n", 10},
		{"data: a\nretry: 5\n\n", 10},
		{"data: a\r\nid: 1\r\n\r\n", 10},
		{"data: abcd\r\n\r\n", 10},
		{"dat\nData: a\n data: b\ndata: c", 10},
		{"data: a\n\ndat", 10},
		{"data: abcde\n", 10},
		{"data: abcd\rx\n", 10},
		{"data: a\rdata: b\n\n", 40},
		{"data: a\n\ndata: [DONE]\n\ndata: abcdefghijk\n", 12},
		{"data: a\n\ndata: [DONE]\n\ntrailing bytes after the end", 40},
		{"data: a\n\ndata:  [DONE]\n\ntrailing bytes after a spaced end", 40},
		{"data: a\n\ndata:\t[DONE] \r\n\r\ntrailing bytes after a tabbed end", 40},
		{"data: a\n\ndata: [DONE\n\ntrailing bytes, no end", 40},
		{"\uFEFFdata: [DONE]\n\ntrailing bytes after a first-line end", 40},
		{": " + strings.Repeat("x", 20) + "\n", 10},
		{"\uFEFFdata: a\n\ndata: b\n\n", 40},
		{"data\n\ndata:  spaced  \n\n", 40},
		{`data: {"error":{"message":"x"}}` + "\n\n", 63},
		{"data: " + strings.Repeat("y", 80) + "\n\n", 63},
	} {
		for _, mode := range []uint8{0, 1, 0x52, 0xF3, 0x0C} {
			f.Add([]byte(s.body), s.max, uint64(0), mode)
			f.Add([]byte(s.body), s.max, uint64(0x0123456789abcdef), mode)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, maxLine uint8, split uint64, mode uint8) {
		max := 1 + int(maxLine%64)
		contentType := []string{"", "text/event-stream", "Text/Event-Stream; charset=utf-8", "application/json"}[mode&3]
		status := []int{200, 201, 429, 503}[mode>>2&3]
		readSize := 1 + int(mode>>4)*17

		roundTrip := func() (*fuzzBody, *http.Response) {
			raw := &fuzzBody{data: in, split: split}
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				h := http.Header{}
				if contentType != "" {
					h.Set("Content-Type", contentType)
				}
				return &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: raw, Request: r}, nil
			})
			resp, err := goopenai.Transport(base, max).RoundTrip(streamRequest())
			if err != nil || resp == nil || resp.Body == nil {
				t.Fatalf("RoundTrip: %v, %v", resp, err)
			}
			return raw, resp
		}
		closeBody := func(raw *fuzzBody, resp *http.Response) {
			if err := resp.Body.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if raw.closes.Load() == 0 {
				t.Fatal("Close did not close the response's body")
			}
		}

		raw, resp := roundTrip()
		got, err := readBody(t, resp.Body, readSize, nil)
		closeBody(raw, resp)
		if err == io.EOF {
			err = nil
		}
		desc := fmt.Sprintf("body %q (status %d, %q, maxLine %d)", in, status, contentType, max)

		switch {
		case status >= 400:
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("%s: read %q, %v; want the body whole", desc, got, err)
			}
			return
		case contentType == "application/json":
			// Whole, and ending in a newline: go-openai loses a last
			// line without one.
			whole := in
			if len(in) > 0 && in[len(in)-1] != '\n' {
				whole = append(slices.Clip(in), '\n')
			}
			if len(in) > max {
				if !errors.Is(err, sse.ErrTooLarge) || !bytes.Equal(got, in[:max]) {
					t.Fatalf("%s: read %q, %v; want its first maxLine bytes, then sse.ErrTooLarge", desc, got, err)
				}
			} else if err != nil || !bytes.Equal(got, whole) {
				t.Fatalf("%s: read %q, %v; want the body whole, ending in a newline", desc, got, err)
			}
			return
		}

		want, long := refDataLines(in, max)
		if long != nil {
			if bytes.HasPrefix(long, []byte("data:")) && max >= len("data:") {
				want = append(want, long[:max]...)
				if long[max] == '\r' {
					want = append(want, '\r')
				}
			}
			if !errors.Is(err, sse.ErrTooLarge) || !bytes.Equal(got, want) {
				t.Fatalf("%s: read %q, %v; want %q, then sse.ErrTooLarge (the line %q is too long)", desc, got, err, want, long)
			}
			return
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %q, %v; want %q", desc, got, err, want)
		}

		// What go-openai reads through Transport is what the raw route
		// reads: its data fields, in order.
		if !sseOnly(in) {
			viaTransport, _ := goOpenAIPayloads(got)
			viaSSE, _ := goOpenAIPayloads(sseDataLines(t, in))
			if fmt.Sprintf("%q", viaTransport) != fmt.Sprintf("%q", viaSSE) {
				t.Fatalf("%s: go-openai reads the data payloads %q through Transport; sse.Reader's data fields are %q", desc, viaTransport, viaSSE)
			}
		}

		// Closed where go-openai stops at [DONE], the body has its end
		// drained when its mark was read, and is not read on otherwise.
		// Every [DONE] go-openai stops at is a mark.
		raw, resp = roundTrip()
		var stopped bool
		_, _ = readBody(t, resp.Body, readSize, func(out []byte) bool {
			_, stopped = goOpenAIPayloads(out)
			return stopped
		})
		before := raw.off
		mark := hasDoneMark(in[:before])
		if stopped && !mark {
			t.Fatalf("%s: go-openai stopped at [DONE] with %d bytes read, and they hold no mark", desc, before)
		}
		closeBody(raw, resp)
		switch wantOff := min(len(in), before+bodyend.Max); {
		case mark && raw.off != wantOff:
			t.Fatalf("%s: closed after [DONE] with %d bytes read, %d read at Close; want %d", desc, before, raw.off, wantOff)
		case !mark && raw.off != before:
			t.Fatalf("%s: closed with %d bytes read and no [DONE], %d read at Close; want none more", desc, before, raw.off)
		}
	})
}
