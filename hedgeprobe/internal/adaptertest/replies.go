package adaptertest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Reply is a hand-written answer to every request, for what fakellm does
// not script: odd statuses, bodies and ends.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// ContentType is the Content-Type header; empty for none.
	ContentType string
	// Body is written and flushed at once.
	Body string
	// Then is what follows the body: "" ends it, "hold" keeps the
	// connection open until the client leaves or the test ends, "reset"
	// resets the connection.
	Then string
}

// Serve serves r on 127.0.0.1 until the test ends and returns its URL.
func Serve(t testing.TB, r Reply) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if r.ContentType != "" {
			w.Header().Set("Content-Type", r.ContentType)
		}
		w.WriteHeader(max(r.Status, http.StatusOK))
		_, _ = io.WriteString(w, r.Body)
		w.(http.Flusher).Flush()
		switch r.Then {
		case "hold":
			select {
			case <-req.Context().Done():
			case <-done:
			}
		case "reset":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with RST
			}
			_ = conn.Close()
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL
}

// ReplyCase is a Reply and the check of how a call on it ends.
type ReplyCase struct {
	// Name names the subtest.
	Name string
	// Reply is what the upstream answers.
	Reply Reply
	// Check fails the test unless err is the error the call must end
	// with (nil: a clean end).
	Check func(t testing.TB, err error)
}

// CheckReplies runs a subtest per case: a call of one attempt (a stall
// watchdog of 2 s, so that a stream read past its end fails rather than
// hangs) on the route that route builds for the case's upstream, read to
// its end with hedgeprobe's loop, and the case's check of its error.
func (a Adapter[T]) CheckReplies(t *testing.T, cases []ReplyCase, route func(t *testing.T, url string) hedgeprobe.Route[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			p := a.NewProber(t, hedgeprobe.Config{MaxAttempts: 1, StallTimeout: 2 * time.Second})
			stream := p.Stream(t.Context(), route(t, Serve(t, tc.Reply)))
			for stream.Next() {
			}
			_ = stream.Close()
			tc.Check(t, stream.Err())
		})
	}
}

// protocolError checks a fatal *sse.ProtocolError whose text holds want.
func protocolError(want string) func(testing.TB, error) {
	return func(t testing.TB, err error) {
		var pe *sse.ProtocolError
		if !errors.As(err, &pe) || hedgeprobe.IsTransient(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v: want a fatal *sse.ProtocolError saying %q", err, want)
		}
	}
}

// fatalUpstream checks a fatal *sse.UpstreamError of status with message.
func fatalUpstream(status int, message string) func(testing.TB, error) {
	return func(t testing.TB, err error) {
		var ue *sse.UpstreamError
		if !errors.As(err, &ue) || ue.StatusCode != status || ue.Message != message || hedgeprobe.IsTransient(err) {
			t.Fatalf("err %v: want a fatal *sse.UpstreamError, status %d, message %q", err, status, message)
		}
	}
}

// cutShort checks a transient *sse.ConnectionError wrapping
// io.ErrUnexpectedEOF: an answer cut short, never a success.
func cutShort(t testing.TB, err error) {
	var ce *sse.ConnectionError
	if !errors.As(err, &ce) || !errors.Is(err, io.ErrUnexpectedEOF) || !hedgeprobe.IsTransient(err) {
		t.Fatalf("err %v: want a transient *sse.ConnectionError wrapping io.ErrUnexpectedEOF", err)
	}
}

// resetAfterHeaders checks a transient *sse.ConnectionError of a
// connection that was made: the headers came, then a reset.
func resetAfterHeaders(t testing.TB, err error) {
	var ce *sse.ConnectionError
	if !errors.As(err, &ce) || !ce.Connected || !hedgeprobe.IsTransient(err) {
		t.Fatalf("err %v: want a transient *sse.ConnectionError, connected", err)
	}
}

// loginPage is a 200 that is not an event stream.
var loginPage = Reply{ContentType: "text/html; charset=utf-8", Body: "<html><body>Please log in</body></html>"}

// errorText is a 400 whose error is text, not an object: openai-go cannot
// decode it, go-openai reads it as a payload of status 0.
var errorText = Reply{Status: 400, ContentType: "application/json", Body: `{"error":"bad model"}`}

// ChatReplyCases are the hand-written answers every OpenAI adapter must
// type as the raw route (hedgeprobe/sse) does.
var ChatReplyCases = []ReplyCase{
	{Name: "200 not an event stream", Reply: loginPage, Check: protocolError("text/html")},
	{Name: "reset after the headers", Reply: Reply{ContentType: "text/event-stream", Then: "reset"}, Check: resetAfterHeaders},
	{Name: "a stream, its Content-Type's parameter malformed", Reply: Reply{ContentType: "text/event-stream;; charset=utf-8",
		Body: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"},
		Check: complete},
	{Name: "400 error as text", Reply: errorText, Check: fatalUpstream(400, "bad model")},
	{Name: "malformed JSON chunk", Reply: Reply{ContentType: "text/event-stream",
		Body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A\"}}]}\n\ndata: {\"choices\":[\n\n"},
		Check: protocolError("")},
	{Name: "two choices, one cut short", Reply: Reply{ContentType: "text/event-stream",
		Body: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A\"}},{\"index\":1,\"delta\":{\"content\":\"B\"}}]}\n\n" +
			"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"id\":\"c\",\"choices\":[{\"index\":1,\"delta\":{\"content\":\" and\"}}]}\n\n"},
		Check: cutShort},
	// The first choice's finish is no end while a second choice, first
	// seen after it, has none.
	{Name: "a choice first seen after another finished, cut short", Reply: Reply{ContentType: "text/event-stream",
		Body: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A\"},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"id\":\"c\",\"choices\":[{\"index\":1,\"delta\":{\"content\":\"B\"}}]}\n\n"},
		Check: cutShort},
	{Name: "502 with a long page", Reply: Reply{Status: 502, ContentType: "text/html",
		Body: strings.Repeat("é", 40<<10)}, Check: func(t testing.TB, err error) {
		var ue *sse.UpstreamError
		if !errors.As(err, &ue) || ue.StatusCode != 502 || len(ue.Message) > 200 || !utf8.ValidString(ue.Message) || !hedgeprobe.IsTransient(err) {
			t.Fatalf("err %v: want a transient 502 whose message is at most 200 bytes of UTF-8", err)
		}
	}},
}

// anthropicComplete is a whole Anthropic answer, message_stop included.
const anthropicComplete = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// AnthropicReplyCases are the hand-written answers an Anthropic adapter
// must type as the raw route does. After message_stop nothing is read: a
// connection held open or reset then leaves the answer complete.
var AnthropicReplyCases = []ReplyCase{
	{Name: "200 not an event stream", Reply: loginPage, Check: protocolError("text/html")},
	{Name: "reset after the headers", Reply: Reply{ContentType: "text/event-stream", Then: "reset"}, Check: resetAfterHeaders},
	{Name: "400 error as text", Reply: errorText, Check: fatalUpstream(400, "bad model")},
	{Name: "held open after message_stop", Reply: Reply{ContentType: "text/event-stream", Body: anthropicComplete, Then: "hold"},
		Check: complete},
	{Name: "reset after message_stop", Reply: Reply{ContentType: "text/event-stream", Body: anthropicComplete, Then: "reset"},
		Check: complete},
}

// complete checks a clean end.
func complete(t testing.TB, err error) {
	if err != nil {
		t.Fatalf("err %v: want a clean end", err)
	}
}
