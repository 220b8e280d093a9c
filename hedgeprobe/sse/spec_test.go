package sse

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// specEvents reads in by the WHATWG "event stream interpretation" rules,
// written out as directly as they read and on bytes (as Reader works),
// with comments surfaced as Reader surfaces them: what render gives for
// Reader's events, for comparison.
func specEvents(in []byte) []string {
	out := []string{}
	in = bytes.TrimPrefix(in, bom)
	var data []byte
	evType := ""
	for {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			// An unterminated line at the end is discarded, and with it
			// any event not yet dispatched.
			return out
		}
		line := in[:i]
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				t := cmp.Or(evType, "message")
				out = append(out, t+":"+string(data[:len(data)-1]))
			}
			data, evType = nil, ""
		case line[0] == ':':
			text := line[1:]
			text, _ = bytes.CutPrefix(text, []byte(" "))
			out = append(out, "#"+string(text))
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value, _ = bytes.CutPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				evType = string(value)
			case "data":
				data = append(append(data, value...), '\n')
			}
		}
	}
}

// specCases are streams around each rule: the byte order mark, the three
// line ends, the event left unterminated at the end, the space after the
// colon, fields without a colon, data lines, comments, event types, id and
// retry, unknown fields and odd bytes.
var specCases = []string{
	"\xEF\xBB\xBFdata: a\n\n",
	"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n",
	"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n",
	"\xEF\xBBdata: a\n\ndata: b\n\n",
	"\xEF\xBB\xBF", "\xEF\xBB", "\xEF\xBB\xBF: c\n", "\xEF\xBB\xBF\r\ndata: a\r\n\r\n",
	"data: a\n\n", "data: a\r\r", "data: a\r\n\r\n", "data: a\r\ndata: b\r\n\r\n",
	"data: a\rdata: b\r\rdata: c\n\n", "data: a\n\rdata: b\r\n\n",
	"data: a\r\n\r\r\n\ndata: b\r\n\r\n", "\r\n\r\n\r\r\n\n", "data: a\r\r\n", "data:\r\n\r\n",
	"data: a\n\ndata: b\n", "data: a\n\ndata: b", "data: a\n\ndata: b\r",
	"data: [DONE]", "data: [DONE]\n", "data: [DONE]\r\n", "data: [DONE]\n\r",
	"data:a\n\n", "data:  a\n\n", "data:\ta\n\n", "data: \n\n", "data : a\n\n", " data: a\n\n",
	"data\n\n", "data\ndata: x\ndata\n\n", "event\ndata: x\n\n", "dataa\n\n", "id\n\n",
	"data: a\ndata: b\ndata: c\n\n", "data:\ndata:\n\n", "data: a\ndata:\n\n", "data:\ndata: a\n\n",
	": keepalive\n\n", ":\n", ":  two\n", "::x\n", ": c\r\n: d\r: e\n", "data: a\n: mid\ndata: b\n\n",
	": unterminated",
	"event: ping\ndata: {}\n\n", "event: ping\n\ndata: x\n\n", "event:\ndata: x\n\n",
	"event: a\nevent: b\ndata: x\n\n", "event: a\ndata: x\n\ndata: y\n\n",
	"id: 1\ndata: x\n\n", "id: a\x00b\ndata: x\n\n", "retry: 1000\ndata: x\n\n", "retry: abc\ndata: x\n\n",
	"foo: bar\ndata: x\n\n", "Data: x\nDATA: y\n\n", "data\x00: x\n\n",
	"data: a\x00b\n\n", "data: {\"a\":\"b:c\"}\n\n", "data: héllo ✓\n\n", "data: \xff\xfe\n\n",
}

// TestReaderMatchesSpec compares Reader with specEvents on every case, the
// bytes read whole, one at a time, in halves, split at every position and
// at every pair of nearby positions.
func TestReaderMatchesSpec(t *testing.T) {
	for _, c := range specCases {
		in := []byte(c)
		want := specEvents(in)
		check := func(how string, r io.Reader) {
			t.Helper()
			evs, err := readAll(r)
			if got := render(evs); err != nil || !slices.Equal(got, want) {
				t.Fatalf("%q %s: got %q (err %v), want %q", in, how, got, err, want)
			}
		}
		check("whole", bytes.NewReader(in))
		check("one byte at a time", iotest.OneByteReader(bytes.NewReader(in)))
		check("in halves", iotest.HalfReader(bytes.NewReader(in)))
		for i := 1; i < len(in); i++ {
			check(fmt.Sprintf("split at %d", i), &splitReader{segs: [][]byte{bytes.Clone(in[:i]), bytes.Clone(in[i:])}})
			for j := i + 1; j < min(len(in), i+3); j++ {
				check(fmt.Sprintf("split at %d, %d", i, j), &splitReader{segs: [][]byte{bytes.Clone(in[:i]), bytes.Clone(in[i:j]), bytes.Clone(in[j:])}})
			}
		}
	}
}

// TestReaderMatchesSpecRandom compares them on pseudo-random streams of
// the tokens that matter to the rules, split at every position.
func TestReaderMatchesSpecRandom(t *testing.T) {
	tokens := []string{
		"data", "data:", "data: ", "event:", "event: ping", "id: 1", "id:\x00", "retry: 5",
		":", " ", "x", "yz", "\r", "\n", "\r\n", "\n\n", "\r\r", "\xEF\xBB\xBF", "\xEF", "\xBB", "foo", "é",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1500 {
		var b strings.Builder
		for k := rng.IntN(14); k >= 0; k-- {
			b.WriteString(tokens[rng.IntN(len(tokens))])
		}
		in := []byte(b.String())
		want := specEvents(in)
		for i := 0; i <= len(in); i++ {
			evs, err := readAll(&splitReader{segs: [][]byte{bytes.Clone(in[:i]), bytes.Clone(in[i:])}})
			if got := render(evs); err != nil || !slices.Equal(got, want) {
				t.Fatalf("%q split at %d: got %q (err %v), want %q", in, i, got, err, want)
			}
		}
	}
}
