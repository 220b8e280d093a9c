package adaptertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
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
