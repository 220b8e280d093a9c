package adaptertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// CheckStalledErrorBody checks that a 429 with Retry-After: 30 whose body
// stalls after its start fails the attempt before the caller's context
// ends (the body is read for a second, sse.BoundErrorBody), as a transient
// *sse.UpstreamError of status 429 whose RetryAfter is retryAfter (0 for
// an adapter whose SDK does not hand over the headers). route builds the
// adapter's route to url.
func (a Adapter[T]) CheckStalledErrorBody(t *testing.T, route func(url string) hedgeprobe.Route[T], retryAfter time.Duration) {
	t.Helper()
	url := serveHeld(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"type":"rate_limit`) // the rest never comes
	})
	// Without the bound the SDK's read ends only with this context.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := a.NewProber(t, hedgeprobe.Config{MaxAttempts: 1}).Stream(ctx, route(url))
	for s.Next() {
	}
	_ = s.Close()
	err := s.Err()
	if ctx.Err() != nil {
		t.Fatalf("the error (%v) came only when the caller's context ended", err)
	}
	var ue *sse.UpstreamError
	if !errors.As(err, &ue) || ue.StatusCode != http.StatusTooManyRequests || ue.RetryAfter() != retryAfter || !hedgeprobe.IsTransient(err) {
		t.Fatalf("err %v, want a transient 429 with Retry-After %v", err, retryAfter)
	}
}

// serveHeld starts a server whose every answer is what write writes,
// flushed; the response then stays open until the request or the test
// ends, as an upstream's that stalls.
func serveHeld(t testing.TB, write func(http.ResponseWriter)) string {
	done := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		write(w)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); ts.Close() })
	return ts.URL
}
