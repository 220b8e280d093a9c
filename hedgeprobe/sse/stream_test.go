package sse

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Both streams are hedgeprobe sources.
var (
	_ hedgeprobe.Source[ChatChunk]      = (*Stream[ChatChunk])(nil)
	_ hedgeprobe.Source[AnthropicEvent] = (*Stream[AnthropicEvent])(nil)
)

func response(ctx context.Context, status int, contentType string, body io.Reader) *http.Response {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/", nil)
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(body), Request: req}
}

func collect[T any](s *Stream[T]) ([]T, error) {
	var out []T
	for s.Next() {
		out = append(out, s.Current())
	}
	return out, s.Err()
}

func TestOpenAIStreamEnds(t *testing.T) {
	const role = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
	const hi = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
	for _, tc := range []struct {
		name  string
		body  string
		items int
		check func(error) bool
	}{
		{"done", role + ": keepalive\n\n" + hi + "data: [DONE]\n\n", 3, func(err error) bool { return err == nil }},
		{"done then garbage ignored", role + "data: [DONE]\n\ndata: {not json\n\n", 1, func(err error) bool { return err == nil }},
		{"eof without done", role + hi, 2, func(err error) bool {
			var ce *ConnectionError
			return errors.As(err, &ce) && errors.Is(err, io.ErrUnexpectedEOF) && ce.Transient() && ce.Events == 2
		}},
		{"eof mid-event", role + "data: {\"choices\"", 1, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"error payload", role + hi + "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":null}}\n\n", 2, func(err error) bool {
			var ue *UpstreamError
			return errors.As(err, &ue) && ue.MidStream && ue.Type == "server_error" && ue.Message == "boom" && ue.Transient() &&
				err.Error() == "openai: error payload mid-stream: server_error: boom"
		}},
		{"fatal error payload", "data: {\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}\n\n", 0, func(err error) bool {
			var ue *UpstreamError
			return errors.As(err, &ue) && ue.Code == "context_length_exceeded" && !ue.Transient()
		}},
		// An event typed error is one whatever its data: the error object
		// bare (some proxies), or not JSON at all. (Found by an outside
		// review: it used to pass as an empty keepalive.)
		{"error event, bare object", role + "event: error\ndata: {\"message\":\"bad\",\"type\":\"invalid_request_error\"}\n\n", 1, func(err error) bool {
			var ue *UpstreamError
			return errors.As(err, &ue) && ue.MidStream && ue.Type == "invalid_request_error" && ue.Message == "bad" && !ue.Transient()
		}},
		{"error event, wrapped", role + "event: error\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n", 1, func(err error) bool {
			var ue *UpstreamError
			return errors.As(err, &ue) && ue.Type == "server_error" && ue.Message == "boom" && ue.Transient()
		}},
		{"error event, text", role + "event: error\ndata: upstream went away\n\n", 1, func(err error) bool {
			var ue *UpstreamError
			return errors.As(err, &ue) && ue.Message == "upstream went away" && ue.Transient()
		}},
		// An error's text goes into span statuses: a long one is cut,
		// between characters.
		{"long error message", "data: {\"error\":{\"message\":\"" + strings.Repeat("é", 4<<10) + "\",\"type\":\"server_error\"}}\n\n", 0, func(err error) bool {
			var ue *UpstreamError
			return errors.As(err, &ue) && len(ue.Message) == maxErrorText && ue.Message == strings.Repeat("é", maxErrorText/2)
		}},
		{"malformed json", "data: {\"choices\":\n\n", 0, func(err error) bool {
			var pe *ProtocolError
			return errors.As(err, &pe) && !pe.Transient()
		}},
		{"too large", "data: " + strings.Repeat("x", 2<<20) + "\n\n", 0, func(err error) bool {
			var pe *ProtocolError
			return errors.As(err, &pe) && errors.Is(err, ErrTooLarge) && strings.Contains(err.Error(), "limit of 1048576 bytes")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewOpenAIStream(response(t.Context(), 200, "text/event-stream", strings.NewReader(tc.body)), StreamOptions{})
			items, err := collect(s)
			if len(items) != tc.items || !tc.check(err) {
				t.Fatalf("items %d (want %d), err %v (%T)", len(items), tc.items, err, err)
			}
			if s.Next() {
				t.Fatal("Next after the end")
			}
		})
	}
}

func TestAnthropicStreamEnds(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n"
	const delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name  string
		body  string
		types []string
		check func(error) bool
	}{
		{"message_stop delivered then end", start + "event: ping\ndata: {\"type\": \"ping\"}\n\n" + delta + stop + delta,
			[]string{"message_start", "ping", "content_block_delta", "message_stop"}, func(err error) bool { return err == nil }},
		{"eof without message_stop", start + delta, []string{"message_start", "content_block_delta"}, func(err error) bool {
			return errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{"error event", start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			[]string{"message_start"}, func(err error) bool {
				var ue *UpstreamError
				return errors.As(err, &ue) && ue.MidStream && ue.Type == "overloaded_error" && ue.Transient()
			}},
		// From a proxy: the error object without its envelope.
		{"bare error object", start + "event: error\ndata: {\"type\":\"billing_error\",\"message\":\"no credit\"}\n\n",
			[]string{"message_start"}, func(err error) bool {
				var ue *UpstreamError
				return errors.As(err, &ue) && ue.MidStream && ue.Type == "billing_error" && ue.Message == "no credit" && !ue.Transient()
			}},
		{"comment is an item", ": hi\n\n" + stop, []string{"", "message_stop"}, func(err error) bool { return err == nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := collect(NewAnthropicStream(response(t.Context(), 200, "text/event-stream", strings.NewReader(tc.body)), StreamOptions{}))
			var types []string
			for _, e := range items {
				types = append(types, e.Type)
			}
			if strings.Join(types, ",") != strings.Join(tc.types, ",") || !tc.check(err) {
				t.Fatalf("types %v, err %v", types, err)
			}
		})
	}
}

func TestStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status     int
		header     map[string]string
		body       string
		transient  bool
		retryAfter time.Duration
		msg        string
	}{
		{429, map[string]string{"Retry-After": "2"}, `{"error":{"message":"slow down","type":"rate_limit_exceeded","code":"rate_limit_exceeded"}}`, true, 2 * time.Second,
			"openai: http 429 too many requests: rate_limit_exceeded: slow down (retry after 2s)"},
		{429, map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500"}, `{}`, true, 1500 * time.Millisecond, ""},
		{503, map[string]string{"Retry-After": "1"}, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, true, time.Second,
			"openai: http 503 service unavailable: overloaded_error: Overloaded (retry after 1s)"},
		{500, nil, `oops`, true, 0, "openai: http 500 internal server error: oops"},
		{502, nil, ``, true, 0, ""},
		{529, nil, ``, true, 0, ""},
		{400, nil, `{"error":{"message":"bad","type":"invalid_request_error","code":42}}`, false, 0, "openai: http 400 bad request: invalid_request_error (42): bad"},
		{401, nil, ``, false, 0, ""},
		{403, nil, ``, false, 0, ""},
		{404, nil, ``, false, 0, ""},
		{408, nil, ``, true, 0, ""},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			resp := response(t.Context(), tc.status, "application/json", strings.NewReader(tc.body))
			for k, v := range tc.header {
				resp.Header.Set(k, v)
			}
			_, err := collect(NewOpenAIStream(resp, StreamOptions{}))
			var ue *UpstreamError
			if !errors.As(err, &ue) || ue.StatusCode != tc.status {
				t.Fatalf("err %v", err)
			}
			// hedgeprobe sees both interfaces.
			var te hedgeprobe.TransientError
			var re hedgeprobe.RetryAfterError
			if !errors.As(err, &te) || te.Transient() != tc.transient || !errors.As(err, &re) || re.RetryAfter() != tc.retryAfter {
				t.Fatalf("transient %v retry-after %v", ue.Transient(), ue.RetryAfter())
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Fatalf("message %q\n         want %q", err.Error(), tc.msg)
			}
		})
	}
}

func TestJSONInsteadOfStream(t *testing.T) {
	_, err := collect(NewOpenAIStream(response(t.Context(), 200, "application/json", strings.NewReader(`{"error":{"type":"server_error","message":"x"}}`)), StreamOptions{}))
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.Type != "server_error" || !ue.MidStream || ue.StatusCode != 0 || !ue.Transient() {
		t.Fatalf("err %v (%+v): want a transient payload error, status 0", err, ue)
	}
	// An error object without type or code, and a proxy's error text, are
	// errors all the same (they were protocol errors, the message lost).
	for _, body := range []string{`{"error":{"message":"quota exceeded"}}`, `{"error":"quota exceeded"}`} {
		_, err = collect(NewOpenAIStream(response(t.Context(), 200, "application/json; charset=utf-8", strings.NewReader(body)), StreamOptions{}))
		if !errors.As(err, &ue) || ue.Message != "quota exceeded" {
			t.Fatalf("%s: err %v, want an UpstreamError with its message", body, err)
		}
	}
	// A whole answer (a server that ignored "stream": true) is a protocol
	// error holding the body, which its text leaves out.
	const answer = `{"id":"x","choices":[{"message":{"content":"the answer"}}]}`
	_, err = collect(NewOpenAIStream(response(t.Context(), 200, "application/json", strings.NewReader(answer)), StreamOptions{}))
	var pe *ProtocolError
	if !errors.As(err, &pe) || string(pe.Body) != answer || strings.Contains(err.Error(), "the answer") {
		t.Fatalf("err %v: want a ProtocolError holding the body, out of its text", err)
	}
}

// A 200 response that is not an event stream (a login page, a proxy's
// notice) is a protocol error, fatal, with the body's start: it was read as
// an empty stream, a transient broken connection that hedged and counted
// against the route. No Content-Type at all is read as a stream.
//
// The body's start is in the error's Body, not in its text: the body may
// be a whole answer (a server that ignored "stream": true), and the text
// went into the spans' status, completion text in telemetry.
func TestNotAnEventStream(t *testing.T) {
	const page = "<html>Please log in</html>"
	for _, ct := range []string{"text/html; charset=utf-8", "text/plain", "application/octet-stream", "garbage;;"} {
		_, err := collect(NewOpenAIStream(response(t.Context(), 200, ct, strings.NewReader(page)), StreamOptions{}))
		var pe *ProtocolError
		if !errors.As(err, &pe) || hedgeprobe.IsTransient(err) || string(pe.Body) != page {
			t.Fatalf("%s: err %v, want a fatal ProtocolError with the body", ct, err)
		}
		want := "openai: protocol error: got " + ct + ", want text/event-stream (the body's start is in the error's Body)"
		if err.Error() != want {
			t.Fatalf("%s: error %q, want %q", ct, err, want)
		}
	}
	// The body is kept up to 4 KiB.
	long := strings.Repeat("x", 5000)
	_, err := collect(NewOpenAIStream(response(t.Context(), 200, "text/plain", strings.NewReader(long)), StreamOptions{}))
	var pe *ProtocolError
	if !errors.As(err, &pe) || string(pe.Body) != long[:4<<10] {
		t.Fatalf("err %v, want a ProtocolError with the body's first 4096 bytes", err)
	}
	// No Content-Type, and a malformed parameter (the media type is what
	// counts), are read as a stream.
	for _, ct := range []string{"", "text/event-stream;; charset=utf-8", "Text/Event-Stream; charset"} {
		items, err := collect(NewOpenAIStream(response(t.Context(), 200, ct, strings.NewReader("data: {\"id\":\"a\"}\n\ndata: [DONE]\n\n")), StreamOptions{}))
		if err != nil || len(items) != 1 {
			t.Fatalf("Content-Type %q: %d items, %v", ct, len(items), err)
		}
	}
}

// An error body's start becomes the message, cut between characters and
// valid UTF-8 whatever the body: span statuses carry it, and OTLP refuses a
// string that is not UTF-8 (the whole export fails).
func TestErrorMessageIsUTF8(t *testing.T) {
	for name, body := range map[string]string{
		"cut inside a character": strings.Repeat("a", 199) + "é and more",
		"not UTF-8":              "bad \xff\xfe bytes",
	} {
		_, err := collect(NewOpenAIStream(response(t.Context(), 502, "text/html", strings.NewReader(body)), StreamOptions{}))
		var ue *UpstreamError
		if !errors.As(err, &ue) || !utf8.ValidString(ue.Message) || !utf8.ValidString(err.Error()) || len(ue.Message) > 200 {
			t.Fatalf("%s: message %q", name, ue.Message)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After": "0"}, 0},
		{map[string]string{"Retry-After": "-3"}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "x", "Retry-After": "9"}, 9 * time.Second},
		// ParseFloat takes these; converted as they were they overflowed
		// into a negative Duration.
		{map[string]string{"Retry-After": "NaN"}, 0},
		{map[string]string{"Retry-After": "Inf"}, 0},
		{map[string]string{"Retry-After-Ms": "Infinity", "Retry-After": "9"}, 9 * time.Second},
		{map[string]string{"Retry-After": "1e30"}, MaxRetryAfter},
		{map[string]string{"Retry-After": strings.Repeat("9", 400)}, MaxRetryAfter},
		{map[string]string{"Retry-After-Ms": strings.Repeat("9", 400)}, MaxRetryAfter},
		{map[string]string{"Retry-After-Ms": "1e30"}, MaxRetryAfter},
		{map[string]string{"Retry-After": now.Add(48 * time.Hour).Format(http.TimeFormat)}, MaxRetryAfter},
		// Outside review: beyond float64's range ParseFloat fails, which
		// read as no hint; and it takes Go's digit separators.
		{map[string]string{"Retry-After": "1e400"}, MaxRetryAfter},
		{map[string]string{"Retry-After-Ms": "1e400", "Retry-After": "9"}, MaxRetryAfter},
		{map[string]string{"Retry-After": "-1e400"}, 0},
		{map[string]string{"Retry-After": "1e-400"}, 0},
		{map[string]string{"Retry-After": "1_0"}, 0},
		{map[string]string{"Retry-After-Ms": "1_0", "Retry-After": "9"}, 9 * time.Second},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := ParseRetryAfter(h, now); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.h, got, tc.want)
		}
	}
}

// FuzzParseRetryAfter: whatever the two headers hold, the hint is within
// [0, MaxRetryAfter], never an overflowed Duration.
func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{"2", "0.5", "-3", "NaN", "Inf", "-Inf", "1e30", "9223372036.9", "soon", "Wed, 02 Dec 2026 01:01:30 GMT"} {
		f.Add(v, "")
		f.Add("", v)
	}
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, ms string) {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if d := ParseRetryAfter(h, now); d < 0 || d > MaxRetryAfter {
			t.Fatalf("Retry-After %q, retry-after-ms %q: %v", retryAfter, ms, d)
		}
	})
}

// TestReceivedTimestamps checks arrival times in virtual time over a pipe:
// each item carries the time the Read that completed it returned (the
// second content chunk completes only at its blank line, a second later).
func TestReceivedTimestamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		start := time.Now()
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = io.WriteString(pw, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
			time.Sleep(2 * time.Second)
			_, _ = io.WriteString(pw, ": keepalive\n\n")
			time.Sleep(time.Second)
			_, _ = io.WriteString(pw, "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n")
			time.Sleep(time.Second)
			_, _ = io.WriteString(pw, "\ndata: [DONE]\n\n")
			_ = pw.Close()
		}()
		s := NewOpenAIStream(response(t.Context(), 200, "text/event-stream", pr), StreamOptions{})
		var got []time.Duration
		for s.Next() {
			got = append(got, s.Current().Received.Sub(start))
		}
		want := []time.Duration{300 * time.Millisecond, 2300 * time.Millisecond, 4300 * time.Millisecond}
		if s.Err() != nil || len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("received %v, want %v (err %v)", got, want, s.Err())
		}
	})
}

// TestCloseUnblocksNext checks, over a pipe, that Close from another
// goroutine ends a Next blocked on a silent upstream, and that the cancel
// func runs.
func TestCloseUnblocksNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		resp := response(t.Context(), 200, "text/event-stream", pr)
		resp.Body = pr // closing the body closes the pipe's reader
		ctx, cancel := context.WithCancel(t.Context())
		s := NewOpenAIStream(resp, StreamOptions{Cancel: cancel})
		go func() { _, _ = io.WriteString(pw, ": hi\n\n") }()
		if !s.Next() || !s.Current().IsComment {
			t.Fatal("no comment")
		}
		done := make(chan bool)
		go func() { done <- s.Next() }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if <-done {
			t.Fatal("Next returned true after Close")
		}
		if s.Err() != nil || ctx.Err() == nil {
			t.Fatalf("err %v, ctx %v", s.Err(), ctx.Err())
		}
		if err := s.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
	})
}

// TestContextCancelOverHTTP cancels a real request mid-stream: Err is the
// context's error, not a transient connection error.
func TestContextCancelOverHTTP(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer ts.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	route := OpenAIRoute("r", OpenAIRequest{BaseURL: ts.URL, Model: "m"})
	src, err := route.Open(ctx, hedgeprobe.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	if !src.Next() {
		t.Fatal(src.Err())
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	if src.Next() {
		t.Fatal("Next true after cancel")
	}
	if !errors.Is(src.Err(), context.Canceled) {
		t.Fatalf("err %v", src.Err())
	}
}

// TestNewHTTPErrorCapped: an SDK's error goes through NewHTTPError with
// its text cut as the raw routes cut theirs (found by an outside review:
// a 256 KiB message and code went whole into the span status).
func TestNewHTTPErrorCapped(t *testing.T) {
	long := strings.Repeat("é", maxErrorText)
	e := NewHTTPError("openai", 429, nil, long, long, long, nil)
	for name, s := range map[string]string{"type": e.Type, "code": e.Code, "message": e.Message} {
		if len(s) != maxErrorText || !utf8.ValidString(s) {
			t.Errorf("%s: %d bytes", name, len(s))
		}
	}
}

// TestNewPayloadErrorQuotesNoAnswer: a payload an SDK hands over as an
// error but that holds no error object (openai-go's for a chunk with
// "error": null) is not quoted in the error's text, which goes into span
// statuses (found by an outside review: the chunk's content was).
func TestNewPayloadErrorQuotesNoAnswer(t *testing.T) {
	chunk := []byte(`{"error":null,"choices":[{"index":0,"delta":{"content":"the secret answer"}}]}`)
	e := NewPayloadError("openai", chunk, nil)
	if strings.Contains(e.Error(), "secret") || string(e.Body) != string(chunk) || !e.MidStream {
		t.Fatalf("%q, body %q", e.Error(), e.Body)
	}
	e = NewPayloadError("openai", []byte(`{"error":{"type":"server_error","message":"boom"}}`), nil)
	if e.Type != "server_error" || e.Message != "boom" {
		t.Fatalf("%+v", e)
	}
}
