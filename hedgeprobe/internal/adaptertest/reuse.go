package adaptertest

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

// CheckConnectionReused checks that an adapter's stream read to its clean
// end leaves its HTTP/1.1 connection for the next: an upstream that sends
// body (a whole event stream, ending in its terminal event), flushed, and
// ends the chunked response a moment later, as one does over a network,
// serves ten streams on one connection. The SDKs stop at the terminal
// event and close the body before its end is read, which discards the
// connection (bodyend). route builds the adapter's route to url.
func (a Adapter[T]) CheckConnectionReused(t *testing.T, body string, route func(url string) hedgeprobe.Route[T]) {
	t.Helper()
	defer func(d time.Duration) { bodyend.Wait = d }(bodyend.Wait)
	bodyend.Wait = 10 * time.Second // generous: the check is about reuse, not the bound
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond) // the chunked body's end comes after the terminal event
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	r := route(ts.URL)
	for i := range 10 {
		src, err := r.Open(context.Background(), hedgeprobe.Attempt{})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		for src.Next() {
		}
		err = src.Err()
		_ = src.Close()
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("10 streams read to their end opened %d connections, want 1", got)
	}
}
