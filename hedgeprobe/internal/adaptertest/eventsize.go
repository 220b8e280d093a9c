package adaptertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// CheckEventBounded checks that an event whose lines never end it (no
// blank line: 2 MiB of 1 KiB data lines, then nothing until the request
// ends) fails the attempt once it passes sse.DefaultMaxEventSize, as a
// fatal *sse.ProtocolError matching sse.ErrTooLarge, as on the raw routes:
// the SDKs' decoders join an event's lines without a bound of their own.
// start is what the stream sends first (an opening event the SDK needs);
// route builds the adapter's route to url.
func (a Adapter[T]) CheckEventBounded(t *testing.T, start string, route func(url string) hedgeprobe.Route[T]) {
	t.Helper()
	url := serveHeld(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, start)
		line := "data: " + strings.Repeat("x", 1<<10) + "\n"
		for range 2 << 10 {
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
		}
	})
	// Without the bound the SDK's read ends only with this context.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	src, err := route(url).Open(ctx, hedgeprobe.Attempt{})
	if err == nil {
		for src.Next() {
		}
		err = src.Err()
		_ = src.Close()
	}
	var pe *sse.ProtocolError
	if !errors.As(err, &pe) || !errors.Is(err, sse.ErrTooLarge) || hedgeprobe.IsTransient(err) {
		t.Fatalf("an event of 2 MiB that never ends: %T %v; want a fatal *sse.ProtocolError matching sse.ErrTooLarge", err, err)
	}
}
