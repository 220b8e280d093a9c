package goopenai_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// transportClient is a go-openai client of the upstream at url whose
// HTTPClient is built on goopenai.Transport.
func transportClient(t *testing.T, url string, maxLine int) *openai.Client {
	tr := sse.NewTransport(sse.TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = url + "/v1"
	cfg.HTTPClient = &http.Client{Transport: goopenai.Transport(tr, maxLine)}
	return openai.NewClientWithConfig(cfg)
}

// chunkLine is one event of a chat stream carrying text, with its blank line.
func chunkLine(text, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` +
		text + `"},"finish_reason":` + f + "}]}\n\n"
}

// A stream read to [DONE] through Transport leaves its HTTP/1.1 connection
// for the next: go-openai stops at [DONE] without reading the chunked
// encoding's end, and without Transport every attempt dialled again. It
// stops at a [DONE] after any whitespace too.
func TestTransportReusesTheConnection(t *testing.T) {
	for _, done := range []string{"data: [DONE]", "data:[DONE]", "data:  [DONE]", "data:\t[DONE] "} {
		t.Run(done, func(t *testing.T) {
			adapter.CheckConnectionReused(t, chunkLine("hi", "stop")+done+"\n\n",
				func(url string) hedgeprobe.Route[goopenai.Chunk] {
					return goopenai.Route("r", transportClient(t, url, 0), req, goopenai.RouteOptions{})
				})
		})
	}
}

// A line longer than Transport's bound ends the attempt with a fatal
// *sse.ProtocolError matching sse.ErrTooLarge — the same upstream would send
// it again — where go-openai would have buffered it whole; a line of
// exactly the bound passes.
func TestTransportBoundsALine(t *testing.T) {
	long := chunkLine(strings.Repeat("x", 600), "")
	size := len(long) - 2 // the line without its "\n" and the blank line's
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, long+chunkLine("", "stop")+"data: [DONE]\n\n")
	}))
	defer ts.Close()
	for _, tc := range []struct {
		maxLine int
		tooLong bool
	}{
		{size, false},
		{size - 1, true},
	} {
		src, err := goopenai.Route("r", transportClient(t, ts.URL, tc.maxLine), req, goopenai.RouteOptions{}).
			Open(context.Background(), hedgeprobe.Attempt{})
		if err != nil {
			t.Fatalf("maxLine %d: Open: %v", tc.maxLine, err)
		}
		n := 0
		for src.Next() {
			n++
		}
		err = src.Err()
		_ = src.Close()
		if !tc.tooLong {
			if err != nil || n != 2 {
				t.Errorf("maxLine %d = the longest line: %d chunks, %v; want 2, nil", tc.maxLine, n, err)
			}
			continue
		}
		var pe *sse.ProtocolError
		if !errors.As(err, &pe) || !errors.Is(err, sse.ErrTooLarge) || hedgeprobe.IsTransient(err) || n != 0 {
			t.Errorf("maxLine %d, a line one byte longer: %d chunks, %v; want none and a fatal *sse.ProtocolError matching sse.ErrTooLarge", tc.maxLine, n, err)
		}
	}
}

// The client's other calls — speech, a file's content, a transcription,
// anything not sent with "Accept: text/event-stream" — get a 2xx body as
// sent: no newline added, no data-line filter, no bound (a review: one
// client shared with such calls had its audio changed). Their 4xx and 5xx
// bodies are bounded in time, as a stream's.
func TestTransportLeavesOtherCallsAlone(t *testing.T) {
	body := "ID3" + strings.Repeat("\x00", 64) + ": not an event"
	for _, ct := range []string{"audio/mpeg", "application/json", "text/event-stream", ""} {
		tr := goopenai.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		}), 8) // a bound far below the body
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/audio/speech", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != body {
			t.Errorf("%q: read %q, %v; want the body as sent", ct, got, err)
		}
	}
}

// A JSON body cut by an error keeps its error and gets no newline: only a
// body that ended gets one.
func TestTransportJSONBodyCut(t *testing.T) {
	tr := goopenai.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, ProtoMajor: 2,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   io.NopCloser(io.MultiReader(strings.NewReader(`{"err`), iotest.ErrReader(io.ErrUnexpectedEOF)))}, nil
	}), 0)
	resp, err := tr.RoundTrip(streamRequest())
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != `{"err` {
		t.Errorf("read %q, %v; want the cut body and io.ErrUnexpectedEOF", got, err)
	}
}

// roundTripFunc is a RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// streamRequest is a chat completion request as go-openai streams it.
func streamRequest() *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/chat/completions", nil)
	req.Header.Set("Accept", "text/event-stream")
	return req
}

// respond is a base RoundTripper answering status with body.
func respond(status int, body io.ReadCloser) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Body: body, Request: r}, nil
	})
}

// What go-openai reads through Transport, the body read whole and a byte
// at a time: its "data:" lines and the blank line after each, nothing else
// (outside review: comment and event: lines, which go-openai keeps for the
// whole stream, grew its memory without bound); a line past the bound (10
// here, "\n" or "\r\n" not counted) fails the read after the lines
// before it (a review: a whole read was lost with it, [DONE] included).
func TestTransportDataLines(t *testing.T) {
	for _, tc := range []struct {
		body, want string
		tooLong    bool
		max        int // 0: 10
	}{
		{"data: abcd\n\ndata:efgh\n\n", "data: abcd\n\ndata:efgh\n\n", false, 0},
		{": ping\n\ndata: a\n\n: ping\n\n", "data: a\n\n", false, 0},
		{"event: x\nid: 1\nretry: 5\ndata: a\n\n", "data: a\n\n", false, 0},
		{"\n\n\r\n\n", "", false, 0},
		{"data: a\n\n\n", "data: a\n\n", false, 0},
		// A review: a line between the data and its blank line dropped the
		// blank line, which go-openai needs to read an error payload.
		{"data: a\nretry: 5\n\n", "data: a\n\n", false, 0},
		{"data: a\r\nid: 1\r\n\r\n", "data: a\r\n\r\n", false, 0},
		{"data: a\n: c\n\n", "data: a\n\n", false, 0},
		{"data: abcd\r\n\r\n", "data: abcd\r\n\r\n", false, 0},   // 10 bytes and CRLF
		{"dat\nData: a\n data: b\ndata: c", "data: c", false, 0}, // the last line needs no newline
		{"data: a\n\ndat", "data: a\n\n", false, 0},
		{"data: abcde\n", "", true, 0},
		{"data: abcd\rx\n", "", true, 0}, // a lone CR is no line's end to go-openai
		{"data: a\n\ndata: [DONE]\n\ndata: abcdefghijk\n", "data: a\n\ndata: [DONE]\n\n", true, 12},
		{": " + strings.Repeat("x", 20) + "\n", "", true, 0}, // a dropped line is bounded too
	} {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.body)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			req := streamRequest()
			resp, err := goopenai.Transport(respond(200, io.NopCloser(r)), cmp.Or(tc.max, 10)).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			switch {
			case tc.tooLong && (!errors.Is(err, sse.ErrTooLarge) || !strings.HasPrefix(string(got), tc.want)):
				t.Errorf("%q (one byte a read: %v): read %q, %v; want %q first, then sse.ErrTooLarge", tc.body, oneByte, got, err, tc.want)
			case !tc.tooLong && (err != nil || string(got) != tc.want):
				t.Errorf("%q (one byte a read: %v): read %q, %v; want %q", tc.body, oneByte, got, err, tc.want)
			}
		}
	}
}

// An error status's body ends a second after it came, as
// sse.BoundErrorBody makes it: a 429 whose body stalls fails its attempt
// then, not at the hedge delay. A 2xx body is not cut.
func TestTransportBoundsAnErrorBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			status int
			cut    bool
		}{{429, true}, {200, false}} {
			pr, pw := io.Pipe()
			req := streamRequest()
			resp, err := goopenai.Transport(respond(tc.status, pr), 0).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			read := make(chan error, 1)
			go func() { _, err := io.ReadAll(resp.Body); read <- err }()
			synctest.Wait()
			select {
			case err := <-read:
				t.Fatalf("status %d: the body ended at once (%v) while it stalls", tc.status, err)
			default:
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			select {
			case err := <-read:
				if !tc.cut {
					t.Errorf("status %d: the body ended after %v (%v); a stream's must not be cut", tc.status, time.Since(start), err)
				} else if err != nil || time.Since(start) < time.Second {
					t.Errorf("status %d: ended with %v after %v, want a clean end after 1s", tc.status, err, time.Since(start))
				}
			default:
				if tc.cut {
					t.Errorf("status %d: the stalled body still open after 2s, want it ended after 1s", tc.status)
				}
			}
			_ = pw.Close()
			_ = resp.Body.Close()
			if !tc.cut {
				<-read
			}
		}
	})
}

// An error payload followed by a retry: line, in a stream the upstream
// keeps open, ends the attempt at once with the payload's error (a review:
// the filter dropped the event's blank line, and go-openai, which reads
// the payload once it has the line after it, waited for the deadline).
func TestTransportErrorPayloadThenRetryLine(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunkLine("A", "")+`data: {"error":{"type":"server_error","message":"overloaded"}}`+"\nretry: 1000\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // kept open
	}))
	defer ts.Close()
	// Without the blank line the read ends only with this context.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	src, err := goopenai.Route("r", transportClient(t, ts.URL, 0), req, goopenai.RouteOptions{}).Open(ctx, hedgeprobe.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	for src.Next() {
	}
	err = src.Err()
	_ = src.Close()
	var ue *sse.UpstreamError
	if !errors.As(err, &ue) || ue.Type != "server_error" || !hedgeprobe.IsTransient(err) {
		t.Fatalf("%T %v; want the payload's transient *sse.UpstreamError of type server_error", err, err)
	}
}

// A 200 JSON body is not an event stream: go-openai reads it whole, the
// error object in it included, so Transport passes it on — the attempt
// fails with the object's fatal error, as without Transport — and bounds
// it whole. go-openai reads the object only from a line that ends, so a
// body without its final newline (Go's json.Marshal writes none) gets one:
// without it the fatal request error became a transient connection error,
// hedged and counted against the route (found by a black-box check).
func TestTransportJSONBody(t *testing.T) {
	const object = `{"error":{"type":"invalid_request_error","message":"bad"}}`
	for _, body := range []string{object + "\n", object} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}))
		for _, tc := range []struct {
			maxLine int
			tooLong bool
		}{{0, false}, {len(object), false}, {len(object) - 1, true}} {
			src, err := goopenai.Route("r", transportClient(t, ts.URL, tc.maxLine), req, goopenai.RouteOptions{}).Open(t.Context(), hedgeprobe.Attempt{})
			if err == nil {
				for src.Next() {
				}
				err = src.Err()
				_ = src.Close()
			}
			if tc.maxLine == len(object) && body != object {
				continue // its newline is one byte past the bound
			}
			var ue *sse.UpstreamError
			switch {
			case tc.tooLong && (!errors.Is(err, sse.ErrTooLarge) || hedgeprobe.IsTransient(err)):
				t.Errorf("%q, bound %d: %T %v; want a fatal error matching sse.ErrTooLarge", body, tc.maxLine, err, err)
			case !tc.tooLong && (!errors.As(err, &ue) || ue.Type != "invalid_request_error" || hedgeprobe.IsTransient(err)):
				t.Errorf("%q, bound %d: %T %v; want the fatal *sse.UpstreamError of type invalid_request_error", body, tc.maxLine, err, err)
			}
		}
		ts.Close()
	}
}

// The newline Transport adds to a JSON body comes once, after the body's
// last byte however the reads fall (its EOF with the last bytes into a full
// buffer, or after them), and only where the body has bytes and ends
// without one.
func TestTransportJSONBodyNewline(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"", ""}, {"{}", "{}\n"}, {"{}\n", "{}\n"}, {"{}\r\n", "{}\r\n"},
	} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":              func(r io.Reader) io.Reader { return r },
			"EOF with last data": iotest.DataErrReader,
			"one byte a read":    iotest.OneByteReader,
		} {
			tr := goopenai.Transport(roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusOK, ProtoMajor: 2,
					Header: http.Header{"Content-Type": {"application/json"}},
					Body:   io.NopCloser(wrap(strings.NewReader(tc.body)))}, nil
			}), 0)
			resp, err := tr.RoundTrip(streamRequest())
			if err != nil {
				t.Fatal(err)
			}
			// Buffers exactly as long as the body: its EOF arrives with a
			// full buffer.
			var got []byte
			buf := make([]byte, max(len(tc.body), 1))
			for {
				n, err := resp.Body.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if string(got) != tc.want {
				t.Errorf("%q, %s: read %q; want %q", tc.body, name, got, tc.want)
			}
		}
	}
}

// Regression (fuzzing): a stream that opens with a byte order mark lost its
// first chunk, since to go-openai the mark made the first line no "data:"
// line. Transport drops a leading mark, as the SSE rules and the raw
// routes do: the client reads both chunks.
func TestTransportByteOrderMark(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "\xEF\xBB\xBF"+chunkLine("A", "")+chunkLine("B", "stop")+"data: [DONE]\n\n")
	}))
	defer ts.Close()
	src, err := goopenai.Route("r", transportClient(t, ts.URL, 0), req, goopenai.RouteOptions{}).Open(t.Context(), hedgeprobe.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for src.Next() {
		if c := src.Current(); len(c.Choices) > 0 {
			texts = append(texts, c.Choices[0].Delta.Content)
		}
	}
	_ = src.Close()
	if err := src.Err(); err != nil || strings.Join(texts, "") != "AB" {
		t.Fatalf("texts %q err %v, want A and B", texts, err)
	}
}

type closeCounter struct {
	http.RoundTripper
	closed int
}

func (c *closeCounter) CloseIdleConnections() { c.closed++ }

// TestTransportPassesCloseIdleConnections: the client's
// CloseIdleConnections reaches the transport under Transport (sse.Lanes,
// say), which it could not through a wrapper without the method.
func TestTransportPassesCloseIdleConnections(t *testing.T) {
	base := &closeCounter{RoundTripper: http.DefaultTransport}
	client := &http.Client{Transport: goopenai.Transport(base, 0)}
	client.CloseIdleConnections()
	if base.closed != 1 {
		t.Fatalf("closed %d times, want 1", base.closed)
	}
}
