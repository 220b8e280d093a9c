package eventsize

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// pieces is a reader of data that returns it in pieces of a fuzz-chosen
// size, 1 to 32 bytes (split == 0: a byte at a time).
type pieces struct {
	data  []byte
	split uint64
	reads int
}

func (r *pieces) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1 + int(r.split>>(uint(r.reads*5)%60)&31)
	r.reads++
	n = copy(p[:min(n, len(p))], r.data)
	r.data = r.data[n:]
	return n, nil
}

// refBound is a line-at-a-time statement of Bound's contract, as the SDK
// decoders split a body (bufio.ScanLines: a line ends at "\n", a "\r"
// before it, or before the body's end, is no part of it): it returns the
// index in body of the byte that takes a line or an event past max bytes,
// or -1. A whole byte order mark at the body's start is no part of the
// first line; a line that starts with ":" is a comment, bounded as a line
// but not counted in its event; a blank line ends an event.
func refBound(body []byte, max int) int {
	start := 0
	if bytes.HasPrefix(body, []byte(ByteOrderMark)) {
		start = len(ByteOrderMark)
	}
	event := 0
	for s := start; s <= len(body); {
		e := bytes.IndexByte(body[s:], '\n')
		if e < 0 {
			e = len(body)
		} else {
			e += s
		}
		line := bytes.TrimSuffix(body[s:e], []byte("\r"))
		comment := len(line) > 0 && line[0] == ':'
		for k := range line {
			if !comment {
				event++
			}
			if k+1 > max || event > max {
				if line[k] == '\r' {
					// A '\r' counts only once the byte after it shows it
					// ends no line: the cut comes after it.
					return s + k + 1
				}
				return s + k
			}
		}
		if len(line) == 0 && e < len(body) {
			event = 0
		}
		s = e + 1
	}
	return -1
}

// FuzzBound holds Bound to its contract on any body, read in fuzz-chosen
// pieces through reads of a fuzz-chosen size, with a limit in 3..66: a 2xx
// body reads unchanged to its end when refBound finds no line or event
// past the limit; otherwise it reads unchanged up to the byte that passes
// it (or one "\r" further, which only the next byte shows to be within a
// line) and then fails, and keeps failing, with an error matching
// sse.ErrTooLarge. Byte order mark, comments, "\r\n" and the event's
// reset at a blank line are as refBound states them. A body of any other
// status is left alone. No read returns more than it was given room for.
func FuzzBound(f *testing.F) {
	for _, body := range []string{
		"data: ab\n\ndata: cd\n\n",
		"data: ab\r\n\r\ndata: cd\r\n\r\n",
		"data: a\ndata: b\n\n",
		"data: a\ndata: bc\n\n",
		"data: a\n" + strings.Repeat(": keepalive\n", 10) + "data: b\n\n",
		": " + strings.Repeat("x", 12) + "\n\ndata: ab\n\n",
		": " + strings.Repeat("x", 40) + "\n",
		"\uFEFF: " + strings.Repeat("x", 12) + "\n\ndata: ab\n\n",
		"\uFEFFdata: abcdefgh\n\n",
		"\xEFdata: abcdefgh\n\n",
		"\xEF:ab\ndata: abcdef\n\n",
		"\xEF\xBB\n\xBF\n",
		"data: ab\nevent: " + strings.Repeat("x", 20),
		"data: " + strings.Repeat("x", 20),
		"event: x\nid: 1\nretry: 5\ndata: a\n\n",
		"data: abcd\r\n",
	} {
		for _, limit := range []uint8{14, 6, 1, 64 | 14, 192 | 14} {
			f.Add([]byte(body), limit, uint64(0), uint8(255))
			f.Add([]byte(body), limit, uint64(0x0123456789abcdef), uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint8, split uint64, readSize uint8) {
		// Limits of 3 and up: below, a partial byte order mark (one or two
		// bytes, counted only once a byte disproves the mark) may pass the
		// bound by its bytes, a corner no real limit (1 MiB) reaches.
		max := 3 + int(limit%64)
		status := []int{200, 299, 200, 400}[limit>>6]
		raw := io.NopCloser(&pieces{data: bytes.Clone(in), split: split})
		resp := &http.Response{StatusCode: status, Body: raw}
		Bound(resp, max)

		var got []byte
		var err error
		p := make([]byte, 1+int(readSize))
		for empty := 0; err == nil; {
			var n int
			n, err = resp.Body.Read(p)
			if n < 0 || n > len(p) {
				t.Fatalf("Read of %d bytes returned %d", len(p), n)
			}
			got = append(got, p[:n]...)
			if n == 0 && err == nil {
				if empty++; empty > 100 {
					t.Fatalf("100 reads in a row returned nothing and no error, after %q", got)
				}
			}
		}
		if err == io.EOF {
			err = nil
		}

		if status > 299 {
			if resp.Body != raw || err != nil || !bytes.Equal(got, in) {
				t.Fatalf("%q, status %d: read %q, %v; want the body left alone", in, status, got, err)
			}
			return
		}
		at := refBound(in, max)
		if at < 0 {
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("%q, limit %d: read %q, %v; want it whole and no error", in, max, got, err)
			}
			return
		}
		if !errors.Is(err, sse.ErrTooLarge) ||
			!bytes.Equal(got, in[:at]) && !(in[at] == '\r' && bytes.Equal(got, in[:at+1])) {
			t.Fatalf("%q, limit %d: read %q, %v; want %q, then an error matching sse.ErrTooLarge", in, max, got, err, in[:at])
		}
		if n, err2 := resp.Body.Read(p); n != 0 || !errors.Is(err2, sse.ErrTooLarge) {
			t.Fatalf("%q, limit %d: a read after the error returned %d, %v; want 0 and the error again", in, max, n, err2)
		}
	})
}
