package adaptertest

import (
	"context"
	"errors"
	"io"
	"testing"
)

// CheckMapErrorAfterCancel checks an adapter's MapError: once the attempt's
// context is done it gives the context's error, whatever the SDK reported
// — a closed body, the context's own error, an EOF, or sdkErr, an answer
// of the SDK's own error type that raced the cancel (openaigo typed that
// one, where the other adapters did not); with the context live, an error
// is typed and unwraps to what the SDK reported.
func CheckMapErrorAfterCancel(t *testing.T, mapError func(ctx context.Context, provider string, err error) error, sdkErr error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{errors.New("read: use of closed network connection"), context.Canceled, io.ErrUnexpectedEOF, sdkErr} {
		if got := mapError(ctx, "p", err); got != context.Canceled {
			t.Errorf("MapError(canceled, %v) = %v, want context.Canceled", err, got)
		}
	}
	if got := mapError(context.Background(), "p", io.ErrUnexpectedEOF); errors.Is(got, context.Canceled) || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Errorf("MapError(live, EOF) = %v, want it typed, unwrapping to the EOF", got)
	}
}
