package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// render flattens events for comparison: "type:data" or "#comment".
func render(evs []Event) []string {
	out := []string{}
	for _, e := range evs {
		if e.Comment {
			out = append(out, "#"+string(e.Data))
			continue
		}
		out = append(out, e.Type+":"+string(e.Data))
	}
	return out
}

func readAll(r io.Reader, opts ...ReaderOption) ([]Event, error) {
	rd := NewReader(r, opts...)
	var evs []Event
	for rd.Next() {
		evs = append(evs, rd.Event())
	}
	return evs, rd.Err()
}

// splitReader returns its segments one Read at a time.
type splitReader struct{ segs [][]byte }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.segs) > 0 && len(s.segs[0]) == 0 {
		s.segs = s.segs[1:]
	}
	if len(s.segs) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.segs[0])
	s.segs[0] = s.segs[0][n:]
	return n, nil
}

var readerCases = []struct {
	name string
	in   string
	want []string
}{
	{"lf", "data: a\n\n", []string{"message:a"}},
	{"cr", "data: a\r\r", []string{"message:a"}},
	{"crlf", "data: a\r\n\r\n", []string{"message:a"}},
	{"mixed line ends", "data: a\rdata: b\r\n\ndata: c\n\r", []string{"message:a\nb", "message:c"}},
	{"cr then lf is one line end", "data: a\r\ndata: b\r\n\r\n", []string{"message:a\nb"}},
	{"bom stripped", "\xEF\xBB\xBFdata: a\n\n", []string{"message:a"}},
	{"bom only once", "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", []string{"message:b"}},
	{"partial bom is data", "\xEF\xBBdata: a\n\ndata: b\n\n", []string{"message:b"}},
	{"comment", ": keepalive\n\n", []string{"#keepalive"}},
	{"comment without space", ":ping\n", []string{"#ping"}},
	{"empty comment", ":\n", []string{"#"}},
	{"comment inside event", "data: a\n: hi\ndata: b\n\n", []string{"#hi", "message:a\nb"}},
	{"multi-line data joined", "data: a\ndata: b\ndata: c\n\n", []string{"message:a\nb\nc"}},
	{"only one leading space stripped", "data:  a\n\n", []string{"message: a"}},
	{"no space", "data:a\n\n", []string{"message:a"}},
	{"empty data dispatches", "data\n\n", []string{"message:"}},
	{"empty data with colon", "data:\n\n", []string{"message:"}},
	{"two empty data lines", "data\ndata\n\n", []string{"message:\n"}},
	{"event type", "event: ping\ndata: {}\n\n", []string{"ping:{}"}},
	{"last event type wins", "event: a\nevent: b\ndata: x\n\n", []string{"b:x"}},
	{"event type resets after dispatch", "event: a\ndata: x\n\ndata: y\n\n", []string{"a:x", "message:y"}},
	{"no event without data", "event: ping\n\n", nil},
	{"event type reset by empty dispatch", "event: ping\n\ndata: x\n\n", []string{"message:x"}},
	{"id and retry ignored", "id: 7\nretry: 100\ndata: a\n\nid\n\n", []string{"message:a"}},
	{"unknown field ignored", "foo: bar\ndata: a\n\n", []string{"message:a"}},
	{"field name is case-sensitive", "Data: a\ndata: b\n\n", []string{"message:b"}},
	{"colon in value kept", "data: {\"a\":1}\n\n", []string{"message:{\"a\":1}"}},
	{"blank lines alone", "\n\n\r\n\r", nil},
	{"unterminated event discarded", "data: a\n\ndata: b\n", []string{"message:a"}},
	{"unterminated line discarded", "data: a\n\ndata: b", []string{"message:a"}},
	{"done marker is data", "data: [DONE]\n\n", []string{"message:[DONE]"}},
	{"anthropic shape", "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
		[]string{"message_start:{\"type\":\"message_start\"}", "ping:{\"type\": \"ping\"}"}},
	{"utf8 kept", "data: héllo ✓\n\n", []string{"message:héllo ✓"}},
}

func TestReader(t *testing.T) {
	for _, tc := range readerCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			check := func(t *testing.T, how string, r io.Reader) {
				t.Helper()
				evs, err := readAll(r)
				if err != nil {
					t.Fatalf("%s: err = %v", how, err)
				}
				if got := render(evs); !slices.Equal(got, nonNil(tc.want)) {
					t.Fatalf("%s:\n got %q\nwant %q", how, got, tc.want)
				}
			}
			check(t, "whole", bytes.NewReader(in))
			check(t, "one byte at a time", iotest.OneByteReader(bytes.NewReader(in)))
			for i := 1; i < len(in); i++ {
				check(t, fmt.Sprintf("split at %d", i), &splitReader{segs: [][]byte{bytes.Clone(in[:i]), bytes.Clone(in[i:])}})
			}
			// Three pieces catch state carried over two boundaries (a CR
			// then a lone LF, a BOM in three reads).
			for i := 1; i < len(in); i++ {
				for j := i + 1; j < len(in) && j < i+4; j++ {
					check(t, fmt.Sprintf("split at %d,%d", i, j), &splitReader{segs: [][]byte{bytes.Clone(in[:i]), bytes.Clone(in[i:j]), bytes.Clone(in[j:])}})
				}
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestReaderTimestamps(t *testing.T) {
	rd := NewReader(&splitReader{segs: [][]byte{[]byte("data: a\n"), []byte("\ndata: b\n\n: c\n")}})
	var tick int
	base := rd.now()
	rd.now = func() time.Time { tick++; return base.Add(time.Duration(tick)) }
	var got []int
	for rd.Next() {
		got = append(got, int(rd.Event().Received.Sub(base)))
	}
	// a completes in the second read, as do b and the comment.
	if want := []int{2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("received ticks = %v, want %v", got, want)
	}
}

func TestReaderLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"long line", "data: a\n\ndata: " + strings.Repeat("x", 20) + "\n\n", []string{"message:a"}},
		{"long unterminated line", "data: a\n\n" + strings.Repeat("x", 40), []string{"message:a"}},
		{"long comment", ": " + strings.Repeat("x", 20) + "\n", nil},
		{"data grows past limit", "data: 0123456\ndata: 0123456\ndata: 0123456\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				evs, err := readAll(r, WithMaxEventSize(16))
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("err = %v, want ErrTooLarge", err)
				}
				if !strings.Contains(err.Error(), "limit of 16 bytes") {
					t.Errorf("error %q does not name the limit", err)
				}
				if got := render(evs); !slices.Equal(got, nonNil(tc.want)) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
	// The limit counts a line without its line ending, and an event's data
	// as it is dispatched: its data lines joined with "\n". Reaching it is
	// allowed; one byte more is not.
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"line at limit", "data:" + strings.Repeat("x", 11) + "\r\n\r\n", true},
		{"line over limit", "data:" + strings.Repeat("x", 12) + "\n\n", false},
		{"data at limit", "data:0123456\ndata:01234567\n\n", true},
		{"data over limit", "data:0123456\ndata:012345678\n\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, and a byte a read: a line split across reads is
			// checked on another path.
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				evs, err := readAll(r, WithMaxEventSize(16))
				if tc.ok && (err != nil || len(evs) != 1) {
					t.Fatalf("evs %d, err %v; want one event", len(evs), err)
				}
				if !tc.ok && (!errors.Is(err, ErrTooLarge) || len(evs) != 0) {
					t.Fatalf("evs %d, err %v; want ErrTooLarge and no event", len(evs), err)
				}
				if tc.ok && len(evs[0].Data) > 16 {
					t.Fatalf("data %d bytes", len(evs[0].Data))
				}
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	evs, err := readAll(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || len(evs) != 1 {
		t.Fatalf("evs %d, err %v", len(evs), err)
	}
}

func FuzzReader(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in), uint8(7))
	}
	f.Add([]byte("data: "+strings.Repeat("y", 100)+"\n\n"), uint8(3))
	const limit = 64
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		whole, werr := readAll(bytes.NewReader(in), WithMaxEventSize(limit))
		for _, e := range whole {
			if len(e.Data) > limit {
				t.Fatalf("event data %d bytes over the %d limit", len(e.Data), limit)
			}
		}
		// Chunked arrival must not change the result.
		n := int(split)%max(len(in), 1) + 1
		var segs [][]byte
		for b := in; len(b) > 0; b = b[min(n, len(b)):] {
			segs = append(segs, bytes.Clone(b[:min(n, len(b))]))
		}
		rd := NewReader(&splitReader{segs: segs}, WithMaxEventSize(limit))
		var chunked []Event
		for rd.Next() {
			chunked = append(chunked, rd.Event())
			if len(rd.p.line) > limit || len(rd.p.data) > limit+1 {
				t.Fatalf("buffers over the limit: line %d, data %d", len(rd.p.line), len(rd.p.data))
			}
		}
		if (werr == nil) != (rd.Err() == nil) {
			t.Fatalf("whole err %v, chunked err %v", werr, rd.Err())
		}
		if werr == nil && !slices.Equal(render(whole), render(chunked)) {
			t.Fatalf("whole %q, chunked %q", render(whole), render(chunked))
		}
		if werr == nil && !slices.Equal(render(whole), specEvents(in)) {
			t.Fatalf("read %q, the rules give %q", render(whole), specEvents(in))
		}
	})
}

// emptyReader returns nothing and no error, for ever.
type emptyReader struct{ reads int }

func (e *emptyReader) Read([]byte) (int, error) { e.reads++; return 0, nil }

// readsReader returns its reads in turn, "" as nothing and no error, then
// io.EOF.
type readsReader []string

func (r *readsReader) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*r)[0])
	*r = (*r)[1:]
	return n, nil
}

// TestReaderNoProgress: a body that returns nothing and no error for ever
// ends the stream with io.ErrNoProgress instead of spinning in Next; a few
// empty reads between data do not.
func TestReaderNoProgress(t *testing.T) {
	e := &emptyReader{}
	rd := NewReader(e)
	if rd.Next() || !errors.Is(rd.Err(), io.ErrNoProgress) || e.reads != 100 {
		t.Fatalf("Next after %d empty reads: err %v, want io.ErrNoProgress after 100", e.reads, rd.Err())
	}
	reads := readsReader{"data: a\n", "", "", "\n"}
	evs, err := readAll(&reads)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %v, err %v", render(evs), err)
	}
}
