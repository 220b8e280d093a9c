package sse

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"
)

// fixedTransport answers every request with body, split into one Read per
// segment.
type fixedTransport struct {
	contentType string
	segs        []string
	delay       time.Duration
}

func (f fixedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		for _, s := range f.segs {
			time.Sleep(f.delay)
			if _, err := io.WriteString(pw, s); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	h := http.Header{"Content-Type": {f.contentType}}
	return &http.Response{StatusCode: 200, Header: h, Body: pr, Request: req}, nil
}

const tapInput = ": OPENROUTER PROCESSING\n\ndata: {\"a\":1}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n: keepalive\r\n\r\ndata: [DONE]\n\n"

func TestTapReportsKeepalives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var perClient, perRequest []string
		start := time.Now()
		tap := &Tap{
			Base: fixedTransport{contentType: "text/event-stream; charset=utf-8", segs: strings.SplitAfter(tapInput, "\n\n"), delay: time.Second},
			OnKeepalive: func(req *http.Request, ev Event) {
				mu.Lock()
				defer mu.Unlock()
				perClient = append(perClient, req.URL.Path+" "+ev.Received.Sub(start).String()+" "+ev.Type+"#"+string(ev.Data))
			},
		}
		ctx := WithKeepaliveFunc(t.Context(), func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			perRequest = append(perRequest, ev.Received.Sub(start).String())
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x.test/v1/chat/completions", nil)
		resp, err := (&http.Client{Transport: tap}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// The SDK reads the body its own way; the bytes are untouched.
		got, err := io.ReadAll(iotest.OneByteReader(resp.Body))
		_ = resp.Body.Close()
		if err != nil || string(got) != tapInput {
			t.Fatalf("body changed: %q, %v", got, err)
		}
		want := []string{
			"/v1/chat/completions 1s #OPENROUTER PROCESSING",
			"/v1/chat/completions 3s ping#{\"type\": \"ping\"}",
			"/v1/chat/completions 4s #keepalive",
		}
		if strings.Join(perClient, "\n") != strings.Join(want, "\n") {
			t.Fatalf("per client:\n%s", strings.Join(perClient, "\n"))
		}
		if strings.Join(perRequest, ",") != "1s,3s,4s" {
			t.Fatalf("per request: %v", perRequest)
		}
	})
}

// An event the SDK accepts though it is over the Reader's limit (a long
// tool call's arguments) does not stop the watching: the keepalive after it
// is reported too (the Tap stopped at the first such event).
func TestTapWatchesPastALargeEvent(t *testing.T) {
	big := strings.Repeat("x", DefaultMaxEventSize+10)
	input := ": before\n\ndata: " + big + "\n\n: after\n\ndata: [DONE]\n\n"
	var got []string
	tap := &Tap{
		Base:        fixedTransport{contentType: "text/event-stream", segs: []string{input[:4096], input[4096:]}},
		OnKeepalive: func(_ *http.Request, ev Event) { got = append(got, string(ev.Data)) },
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x.test/", nil)
	resp, err := (&http.Client{Transport: tap}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(body) != input {
		t.Fatalf("body changed (%d bytes of %d), %v", len(body), len(input), err)
	}
	if strings.Join(got, ",") != "before,after" {
		t.Fatalf("keepalives reported: %q, want before and after", got)
	}
}

func TestTapLeavesOtherBodiesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		called := false
		tap := &Tap{
			Base:        fixedTransport{contentType: "application/json", segs: []string{": not sse\n\n"}},
			OnKeepalive: func(*http.Request, Event) { called = true },
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://x.test/", nil)
		resp, err := tap.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if called || !bytes.Equal(b, []byte(": not sse\n\n")) {
			t.Fatalf("called %v body %q", called, b)
		}
		if _, ok := resp.Body.(*tapBody); ok {
			t.Fatal("json body wrapped")
		}
	})
}

// TestTapWatchesWithoutContentType: a body without a Content-Type, which
// the SDKs read as an event stream, has its keepalives reported too.
func TestTapWatchesWithoutContentType(t *testing.T) {
	var got []string
	tap := &Tap{
		Base:        fixedTransport{segs: []string{": alive\n\ndata: [DONE]\n\n"}},
		OnKeepalive: func(_ *http.Request, ev Event) { got = append(got, string(ev.Data)) },
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x.test/", nil)
	resp, err := tap.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if strings.Join(got, ",") != "alive" {
		t.Fatalf("keepalives reported: %q, want alive", got)
	}
}

// A Tap keeps at most TapLimit of a line and of an event's data (and so
// of its type, a line's value), however long they are and however the
// reads cut them: a comment,
// a data line, an event of many data lines and an "event:" line, each of
// 2 MiB, and the keepalives after each are reported, the first cut.
func TestTapHoldsAFewKiB(t *testing.T) {
	long := strings.Repeat("z", 2<<20)
	input := ": " + long + "\n\n" +
		"data: " + long + "\n\n: a\n\n" +
		strings.Repeat("data: "+long[:1000]+"\n", 2<<10) + "\n: b\n\n" +
		"event: " + long + "\ndata: x\n\n: c\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n"
	for _, seg := range []int{1 << 10, 64 << 10} {
		var segs []string
		for s := input; len(s) > 0; s = s[min(seg, len(s)):] {
			segs = append(segs, s[:min(seg, len(s))])
		}
		var got []string
		tap := &Tap{
			Base:        fixedTransport{contentType: "text/event-stream", segs: segs},
			OnKeepalive: func(_ *http.Request, ev Event) { got = append(got, string(ev.Data)) },
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x.test/", nil)
		resp, err := tap.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		tb := resp.Body.(*tapBody)
		var line, data, n int
		buf := make([]byte, 32<<10)
		for {
			k, err := tb.Read(buf)
			n += k
			line, data = max(line, cap(tb.p.line)), max(data, cap(tb.p.data))
			if err != nil {
				break
			}
		}
		_ = resp.Body.Close()
		if n != len(input) {
			t.Fatalf("read %d bytes through the Tap, want %d", n, len(input))
		}
		// append may round a buffer's capacity up to its size class.
		if line > 2*TapLimit || data > 2*TapLimit {
			t.Errorf("reads of %d: the Tap held a line of %d bytes and data of %d; want at most TapLimit (%d) each, up to append's rounding", seg, line, data, TapLimit)
		}
		want := []string{long[:TapLimit-2], "a", "b", "c", `{"type": "ping"}`}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Errorf("reads of %d: reported %.80q, want %.80q", seg, got, want)
		}
	}
}

// TestTapMemoryBounded: an event that is never dispatched — data lines
// without the blank line — holds at most the limit and a byte however many
// lines follow (each line past the limit added its "\n"), and the Tap
// still reports the keepalive after it.
func TestTapMemoryBounded(t *testing.T) {
	const limit = 64
	for _, line := range []string{"data: x\n", "data\n", "data: " + strings.Repeat("y", 40) + "\n"} {
		var got []string
		tb := &tapBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat(line, 20000) + "\n: after\n"))}
		tb.p.limit, tb.p.watch = limit, true
		tb.emit = func(ev Event) { got = append(got, string(ev.Data)) }
		var most int
		buf := make([]byte, 512)
		for {
			_, err := tb.Read(buf)
			most = max(most, len(tb.p.data))
			if err != nil {
				break
			}
		}
		if most > limit+1 {
			t.Errorf("%q × 20,000: the Tap held %d bytes of data, limit %d", line, most, limit)
		}
		if got[len(got)-1] != "after" {
			t.Errorf("%q × 20,000: reported %q, want the comment after the event last", line, got)
		}
	}
}

// FuzzTap holds the Tap's parser to the SSE rules on any body read in any
// pieces: it never changes a byte the SDK reads, never fails, holds at most
// limit bytes of a line and limit+1 of data, and, on a body whose lines
// and events fit the limit, reports exactly the comments and "ping" events
// the Reader reads (FuzzReader holds it to the rules), in order.
func FuzzTap(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in), uint8(7))
	}
	f.Add([]byte(tapInput), uint8(5))
	f.Add([]byte("event: ping\ndata: "+strings.Repeat("y", 100)+"\n\n: after\n\n"), uint8(3))
	f.Add([]byte("data: a\nevent: ping\n\nevent: ping\nevent: x\ndata: b\n\n"), uint8(2))
	const limit = 64
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		n := int(split)%max(len(in), 1) + 1
		var segs [][]byte
		for b := in; len(b) > 0; b = b[min(n, len(b)):] {
			segs = append(segs, bytes.Clone(b[:min(n, len(b))]))
		}
		var got []Event
		tb := &tapBody{ReadCloser: io.NopCloser(&splitReader{segs: segs})}
		tb.p.limit, tb.p.watch = limit, true
		tb.emit = func(ev Event) { got = append(got, ev) }
		var out []byte
		buf := make([]byte, 512)
		for {
			k, err := tb.Read(buf)
			out = append(out, buf[:k]...)
			if len(tb.p.line) > limit || len(tb.p.data) > limit+1 {
				t.Fatalf("buffers over the limit: line %d, data %d", len(tb.p.line), len(tb.p.data))
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("the Tap changed the body: read %q, sent %q", out, in)
		}
		all, err := readAll(bytes.NewReader(in), WithMaxEventSize(limit))
		if err != nil {
			return // cut at the limit: the bounds above are the contract
		}
		key := func(e Event) string { return fmt.Sprintf("%t %q %q", e.Comment, e.Type, e.Data) }
		var want, have []string
		for _, e := range all {
			if e.Comment || e.Type == "ping" {
				want = append(want, key(e))
			}
		}
		for _, e := range got {
			have = append(have, key(e))
		}
		if !slices.Equal(have, want) {
			t.Fatalf("reported %q, the Reader's keepalives are %q", have, want)
		}
	})
}
