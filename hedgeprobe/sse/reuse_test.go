package sse

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
)

// endingServer serves an OpenAI stream that ends with [DONE], flushed, and
// then ends its body after lag (or never, while the request lasts, when
// lag < 0); it counts the connections it accepts.
func endingServer(t *testing.T, lag time.Duration) (url string, conns *atomic.Int32) {
	conns = new(atomic.Int32)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		if lag < 0 {
			<-r.Context().Done()
			return
		}
		time.Sleep(lag) // the chunked body's end comes after the event
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, conns
}

// readToEnd opens the route once and reads it to its end.
func readToEnd(t *testing.T, route hedgeprobe.Route[ChatChunk]) {
	t.Helper()
	src, err := route.Open(context.Background(), hedgeprobe.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for src.Next() {
	}
	if err := src.Err(); err != nil {
		t.Fatal(err)
	}
}

// A stream's clean end reads its body's end, so its HTTP/1.1 connection
// goes back to the pool: closed at [DONE], before the chunked encoding's
// end, every stream dialled a connection of its own.
func TestCleanEndReusesTheConnection(t *testing.T) {
	defer func(d time.Duration) { bodyend.Wait = d }(bodyend.Wait)
	bodyend.Wait = 10 * time.Second // generous: the test is about reuse, not the bound
	url, conns := endingServer(t, 5*time.Millisecond)
	tr := NewTransport(TransportOptions{})
	defer tr.CloseIdleConnections()
	route := OpenAIRoute("r", OpenAIRequest{BaseURL: url, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, Client: &http.Client{Transport: tr}})
	for range 10 {
		readToEnd(t, route)
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("10 streams read to their end opened %d connections, want 1", got)
	}
}

// An upstream that keeps the body open after its terminal event delays the
// stream's end by bodyend.Wait, no more, and its connection is not reused.
func TestCleanEndWaitsNoLongerThanDrainWait(t *testing.T) {
	defer func(d time.Duration) { bodyend.Wait = d }(bodyend.Wait)
	bodyend.Wait = 50 * time.Millisecond
	url, conns := endingServer(t, -1)
	tr := NewTransport(TransportOptions{})
	defer tr.CloseIdleConnections()
	route := OpenAIRoute("r", OpenAIRequest{BaseURL: url, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, Client: &http.Client{Transport: tr}})
	for range 2 {
		start := time.Now()
		readToEnd(t, route)
		// A bound for a loaded machine: without the bound the stream would
		// never end.
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("the stream took %v to end; bodyend.Wait is %v", el, bodyend.Wait)
		}
	}
	if got := conns.Load(); got != 2 {
		t.Errorf("2 streams whose bodies never ended opened %d connections, want 2 (half a response is never reused)", got)
	}
}

// NewTransport keeps more than Go's 2 idle connections per host: a call's
// attempts to one upstream run at once.
func TestTransportKeepsIdleConnections(t *testing.T) {
	if got := NewTransport(TransportOptions{}).MaxIdleConnsPerHost; got < 16 {
		t.Errorf("MaxIdleConnsPerHost = %d", got)
	}
}
