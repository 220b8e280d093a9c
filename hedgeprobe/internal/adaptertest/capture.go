package adaptertest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Bodies is an OpenAI-compatible upstream that records the JSON body of
// each chat-completions request and answers a one-chunk stream, for the
// tests of the bodies an adapter's route sends.
type Bodies struct {
	// URL is the API root including "/v1".
	URL string
	ch  chan map[string]any
}

// CaptureBodies serves Bodies on 127.0.0.1 until the test ends.
func CaptureBodies(t testing.TB) *Bodies {
	t.Helper()
	b := &Bodies{ch: make(chan map[string]any, 8)}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		select {
		case b.ch <- body:
		default:
			t.Errorf("more requests than the test reads")
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(ts.Close)
	b.URL = ts.URL + "/v1"
	return b
}

// Next is the body of the next request; it fails the test when none was
// sent.
func (b *Bodies) Next(t testing.TB) map[string]any {
	t.Helper()
	select {
	case body := <-b.ch:
		return body
	default:
		t.Fatal("no request was sent")
		return nil
	}
}

// None fails the test when a request was sent that it has not read.
func (b *Bodies) None(t testing.TB) {
	t.Helper()
	select {
	case body := <-b.ch:
		t.Fatalf("a request was sent: %v", body)
	default:
	}
}

// Drain reads src to its end and closes it, so that its request is done.
func Drain(t testing.TB, src interface {
	Next() bool
	Err() error
	Close() error
}) {
	t.Helper()
	for src.Next() {
	}
	if err := src.Err(); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
}

// CheckResumeBody opens the route newRoute builds on the caller's request
// as a resume from the delivered text " a time", and checks what it sent
// the upstream: the caller's two messages, the last of them want (nil: the
// Open fails with hedgeprobe.ErrCannotContinue and nothing is sent). The
// caller's request must be left as it was, whatever the route did with it;
// request points to it.
func CheckResumeBody[T any](t testing.TB, up *Bodies, request any, newRoute func() hedgeprobe.Route[T], want map[string]any) {
	t.Helper()
	before, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	src, err := newRoute().Open(t.Context(), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: " a time"})
	if want == nil {
		if !errors.Is(err, hedgeprobe.ErrCannotContinue) {
			t.Fatalf("Open = %v, want ErrCannotContinue", err)
		}
		up.None(t)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	Drain(t, src)
	msgs, _ := up.Next(t)["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("sent %d messages, want the caller's 2: %v", len(msgs), msgs)
	}
	if last := msgs[1]; !reflect.DeepEqual(last, want) {
		t.Fatalf("last message %v, want %v", last, want)
	}
	if after, _ := json.Marshal(request); string(after) != string(before) {
		t.Fatalf("the caller's request changed:\n%s\n%s", before, after)
	}
}
