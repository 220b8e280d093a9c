package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// unfinished is an upstream that answers with status and contentType,
// sends the start of a body and then nothing more until the client goes
// away. It counts the requests it got.
func unfinished(t *testing.T, status int, contentType string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"type":"rate_limit`) // the rest never comes
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	return ts, &hits
}

// Regression (outside review): the body of an error response was read to
// its end inside Route.Open, so a 429 whose body never finished held the
// attempt open — no transient error, no Retry-After, no hedge until its
// delay, and with one attempt no end at all. The body is now read for at
// most errorBodyWait; the status and headers stand.
func TestErrorStatusWithUnfinishedBody(t *testing.T) {
	for name, open := range map[string]func(url string) hedgeprobe.Route[ChatChunk]{
		"openai": func(url string) hedgeprobe.Route[ChatChunk] {
			return OpenAIRoute("a", OpenAIRequest{BaseURL: url, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
		},
		"anthropic chat": func(url string) hedgeprobe.Route[ChatChunk] {
			return AnthropicChatRoute("a", AnthropicRequest{BaseURL: url, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts, _ := unfinished(t, http.StatusTooManyRequests, "application/json")
			// Without the bound the read ends only with this context.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := firstError(ctx, open(ts.URL))
			if ctx.Err() != nil {
				t.Fatalf("the error (%v) came only when the context ended", err)
			}
			var ue *UpstreamError
			if !errors.As(err, &ue) || ue.StatusCode != http.StatusTooManyRequests || ue.RetryAfterHint != 30*time.Second {
				t.Fatalf("err %v, want the 429 with its Retry-After", err)
			}
			if !hedgeprobe.IsTransient(err) {
				t.Fatalf("%v is not transient", err)
			}
		})
	}
	t.Run("200 of HTML", func(t *testing.T) {
		t.Parallel()
		ts, _ := unfinished(t, http.StatusOK, "text/html")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := firstError(ctx, OpenAIRoute("a", OpenAIRequest{BaseURL: ts.URL, Model: "m"}))
		if ctx.Err() != nil {
			t.Fatalf("the error (%v) came only when the context ended", err)
		}
		var pe *ProtocolError
		if !errors.As(err, &pe) || string(pe.Body) != `{"error":{"type":"rate_limit` {
			t.Fatalf("err %v, want a ProtocolError with the body's start", err)
		}
	})
	t.Run("hedged at once, and kept away", func(t *testing.T) {
		t.Parallel()
		hung, hits := unfinished(t, http.StatusTooManyRequests, "application/json")
		good, _ := capture(t, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n")
		route := func(name, url string) hedgeprobe.Route[ChatChunk] {
			return OpenAIRoute(name, OpenAIRequest{BaseURL: url, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
		}
		// A hedge delay well past errorBodyWait: only the 429 can launch
		// the second attempt before it.
		p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: 5 * time.Second, MaxAttempts: 2}, OpenAIItems)
		if err != nil {
			t.Fatal(err)
		}
		for call := range 2 {
			s := p.Stream(t.Context(), route("hung", hung.URL), route("good", good.URL))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if atts := s.Stats().Attempts; call == 0 && (len(atts) != 2 || atts[1].Trigger != hedgeprobe.TriggerError) {
				t.Fatalf("attempts %+v, want a hedge on the error", atts)
			}
		}
		if n := hits.Load(); n != 1 {
			t.Fatalf("the 429 route was asked %d times within its Retry-After", n)
		}
	})
}

// firstError opens route and reads it to its end, returning its error.
func firstError(ctx context.Context, route hedgeprobe.Route[ChatChunk]) error {
	src, err := route.Open(ctx, hedgeprobe.Attempt{})
	if err != nil {
		return err
	}
	defer src.Close()
	for src.Next() {
	}
	return src.Err()
}

// TestBoundErrorBodyLeavesOthers: only a 4xx or 5xx body is bounded; a
// stream, a redirect and a 101's upgraded connection are left as they are.
func TestBoundErrorBodyLeavesOthers(t *testing.T) {
	type rwc struct {
		io.ReadWriteCloser
	}
	for _, status := range []int{http.StatusSwitchingProtocols, http.StatusOK, http.StatusTemporaryRedirect} {
		body := rwc{}
		resp := &http.Response{StatusCode: status, Body: body}
		BoundErrorBody(resp)
		if resp.Body != io.ReadCloser(body) {
			t.Errorf("%d: body is now %T", status, resp.Body)
		}
	}
	for _, status := range []int{http.StatusBadRequest, http.StatusTooManyRequests, 529} {
		resp := &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("x"))}
		BoundErrorBody(resp)
		if _, ok := resp.Body.(*timedBody); !ok {
			t.Errorf("%d: body not bounded", status)
		}
		resp.Body.Close()
	}
}

// statusTextShape is what an UpstreamError's StatusText may hold past its
// provider and status: a type and a code that read as codes (or
// "withheld"), and the Retry-After hint — nothing of the body's words.
var statusTextShape = regexp.MustCompile(`^(: [A-Za-z0-9_.:/-]{1,64})?( \([A-Za-z0-9_.:/-]{1,64}\))?( \(retry after [0-9a-zµ.]+\))?$`)

// FuzzResponseError: any error response — status, Retry-After, body — is
// read without a panic into an error whose fields are bounded, whose
// error.type is a status or a code, and whose status text quotes nothing
// of the body but a type and a code that read as codes.
func FuzzResponseError(f *testing.F) {
	f.Add(uint16(429), "2", []byte(`{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`))
	f.Add(uint16(400), "", []byte(`{"error":{"message":"x","type":"invalid_request_error","code":{"input":"SECRET"}}}`))
	f.Add(uint16(200), "", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`))
	f.Add(uint16(503), "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`{"error":"text"}`))
	f.Add(uint16(422), "", []byte(`{"detail":[{"loc":["body"],"input":"SECRET"}]}`))
	f.Add(uint16(500), "-1", []byte("\xff\xfe not json"))
	f.Fuzz(func(t *testing.T, code uint16, retryAfter string, body []byte) {
		status := int(code)
		if status < 100 || status > 599 {
			status = 100 + status%500
		}
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		e := NewResponseError("p", status, h, body, nil)
		if e == nil {
			t.Fatal("no error")
		}
		if len(e.Type) > maxErrorText || len(e.Code) > maxErrorText || len(e.Message) > maxErrorText {
			t.Fatalf("type %d, code %d, message %d bytes: above %d", len(e.Type), len(e.Code), len(e.Message), maxErrorText)
		}
		if e.RetryAfterHint < 0 {
			t.Fatalf("Retry-After %q gave %v", retryAfter, e.RetryAfterHint)
		}
		if et := e.ErrorType(); et != strconv.Itoa(status) && et != "error_payload" && !codeLike(et) {
			t.Fatalf("error.type %q", et)
		}
		_ = e.Transient()
		_ = e.Error()
		var head string
		if e.MidStream {
			head = "p: error payload mid-stream"
		} else {
			head = fmt.Sprintf("p: http %d", status)
			if st := http.StatusText(status); st != "" {
				head += " " + strings.ToLower(st)
			}
		}
		st := e.StatusText()
		rest, ok := strings.CutPrefix(st, head)
		if !ok || !statusTextShape.MatchString(rest) {
			t.Fatalf("status text %q: want %q and then a type, a code, a Retry-After only", st, head)
		}
	})
}
