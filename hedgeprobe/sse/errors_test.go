package sse

import (
	"context"
	"errors"
	"io"
	"testing"
)

func TestEndError(t *testing.T) {
	reset := errors.New("connection reset")
	for _, tc := range []struct {
		name      string
		end       StreamEnd
		want      error // errors.Is target; nil for a clean end
		connected bool
	}{
		{"clean end after terminal event", StreamEnd{Terminal: true, Events: 4}, nil, false},
		{"clean end before terminal event", StreamEnd{Events: 4}, io.ErrUnexpectedEOF, true},
		{"broken before any item", StreamEnd{Err: &ConnectionError{Err: reset}}, reset, false},
		{"broken after items", StreamEnd{Err: &ConnectionError{Err: reset}, Connected: true, Events: 3}, reset, true},
		{"upstream error", StreamEnd{Err: &UpstreamError{StatusCode: 503}, Connected: true, Events: 3}, nil, false},
		{"canceled", StreamEnd{Err: context.Canceled, Terminal: true}, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := EndError(tc.end)
			if tc.end.Err == nil && tc.want == nil {
				if err != nil {
					t.Fatalf("EndError = %v, want nil", err)
				}
				return
			}
			if tc.end.Err != nil && err != tc.end.Err {
				t.Fatalf("EndError = %v, want the stream's own error %v", err, tc.end.Err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("EndError = %v, want %v", err, tc.want)
			}
			var ce *ConnectionError
			if errors.As(err, &ce) && (ce.Connected != tc.connected || ce.Events != tc.end.Events) {
				t.Fatalf("connected %v events %d, want %v %d", ce.Connected, ce.Events, tc.connected, tc.end.Events)
			}
		})
	}
}
