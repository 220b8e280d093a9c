package eventsize

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// An event is bounded from one blank line to the next, across reads and
// across its lines; the bytes before the event that passes the bound are
// read first; a line's end is not counted; a response that is not 2xx is
// left alone.
func TestBound(t *testing.T) {
	for _, tc := range []struct {
		body    string
		status  int
		want    string // what is read before the error, or all of it
		tooLong bool
	}{
		{"data: ab\n\ndata: cd\n\n", 200, "data: ab\n\ndata: cd\n\n", false},
		{"data: ab\r\n\r\ndata: cd\r\n\r\n", 200, "data: ab\r\n\r\ndata: cd\r\n\r\n", false},
		{"data: a\ndata: b\n\n", 200, "data: a\ndata: b\n\n", false}, // 14 bytes in two lines
		{"data: a\ndata: bc\n\n", 200, "data: a\ndata: b", true},     // 15
		// Comments are not counted (the decoders drop them): keepalives
		// may come without blank lines between them (outside review: a
		// legal stream failed fatally).
		{"data: a\n" + strings.Repeat(": keepalive\n", 10) + "data: b\n\n", 200, "data: a\n" + strings.Repeat(": keepalive\n", 10) + "data: b\n\n", false},
		{": " + strings.Repeat("x", 12) + "\n\ndata: ab\n\n", 200, ": " + strings.Repeat("x", 12) + "\n\ndata: ab\n\n", false},
		// A comment is a line all the same (a review: an endless one went
		// unbounded); one after the stream's byte order mark too.
		{": " + strings.Repeat("x", 40) + "\n", 200, ": " + strings.Repeat("x", 12), true},
		{"\uFEFF: " + strings.Repeat("x", 12) + "\n\ndata: ab\n\n", 200, "\uFEFF: " + strings.Repeat("x", 12) + "\n\ndata: ab\n\n", false},
		// A partial mark is the line's start (a review: its bytes went
		// uncounted, and "\xEF:" read as a comment).
		{"\xEFdata: abcdefgh\n\n", 200, "\xEFdata: abcdefg", true},
		{"\xEF:ab\ndata: abcdef\n\n", 200, "\xEF:ab\ndata: abcd", true},
		{"data: ab\nevent: " + strings.Repeat("x", 20), 200, "data: ab\nevent:", true}, // other fields are
		{"data: " + strings.Repeat("x", 20), 400, "data: " + strings.Repeat("x", 20), false},
		// Regressions (fuzzing): a '\r' that ends no line is a byte of it,
		// as the decoders keep it — padding did not count — and a
		// "\r\r\n" line is no blank line, so it does not end the event.
		{"data: a" + strings.Repeat("\r", 20) + "\n\n", 200, "data: a\r\r\r\r\r\r\r\r", true},
		{"data: abcd\n\r\r\ndata: abc\n\n", 200, "data: abcd\n\r\r\ndat", true},
	} {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.body)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			resp := &http.Response{StatusCode: tc.status, Body: io.NopCloser(r)}
			Bound(resp, 14)
			got, err := io.ReadAll(resp.Body)
			if string(got) != tc.want || tc.tooLong != errors.Is(err, sse.ErrTooLarge) || (!tc.tooLong && err != nil) {
				t.Errorf("%q (status %d, one byte a read: %v): read %q, %v; want %q, too long: %v", tc.body, tc.status, oneByte, got, err, tc.want, tc.tooLong)
			}
		}
	}
}
