// Package streamend types the end of an SDK's stream for hedging, for the
// SDK adapters (hedgeprobe/openaigo, hedgeprobe/goopenai,
// hedgeprobe/anthropicgo). Those SDKs report a body cut short as a clean
// end; a truncated answer must never pass as success (docs/design.md §2),
// so a stream that ends before its terminal item ends in a
// *sse.ConnectionError wrapping io.ErrUnexpectedEOF.
package streamend

import (
	"errors"
	"io"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// End is how an SDK's stream ended, as the adapter of that SDK saw it;
// Err types it.
type End struct {
	// Provider is the route's gen_ai.provider.name.
	Provider string
	// Err is the error the SDK's stream ended with, already typed for
	// hedging (the adapter's MapError); nil for a clean end of the body.
	Err error
	// Terminal reports that the stream's terminal event (a finish_reason,
	// message_stop) was seen.
	Terminal bool
	// Connected reports that the response had started; a
	// *sse.ConnectionError in Err takes it.
	Connected bool
	// Events is the number of items the stream delivered.
	Events int
}

// Err is the error an SDK adapter's stream that ended as e ends with: nil for a clean end
// after the terminal event; a *sse.ConnectionError wrapping
// io.ErrUnexpectedEOF for a clean end before it; else e.Err, a
// *sse.ConnectionError in it given e.Connected and e.Events.
func Err(e End) error {
	if e.Err == nil {
		if e.Terminal {
			return nil
		}
		return &sse.ConnectionError{Provider: e.Provider, Connected: true, Events: e.Events, Err: io.ErrUnexpectedEOF}
	}
	var ce *sse.ConnectionError
	if errors.As(e.Err, &ce) {
		ce.Connected, ce.Events = e.Connected, e.Events
	}
	return e.Err
}

// Checked wraps an SDK stream (a hedgeprobe.Source as it is, such as
// openai-go's or anthropic-sdk-go's ssestream.Stream) so that it ends the
// way hedging needs: its error typed by MapError, and a body that ends
// before the stream's terminal item reported as Err does. Current and
// Close are the wrapped stream's.
type Checked[T any] struct {
	hedgeprobe.Source[T]
	// Provider is the route's gen_ai.provider.name.
	Provider string
	// MapError types the stream's error for hedging; nil keeps it.
	MapError func(error) error
	// Terminal reports the stream's terminal item (a finish_reason,
	// message_stop).
	Terminal func(T) bool
	// CloseAtEnd closes the wrapped stream as soon as it ends, releasing
	// its connection before hedgeprobe's own Close.
	CloseAtEnd bool

	terminal bool
	items    int
	ended    bool
	err      error
}

// Next advances the wrapped stream and, at its end, settles Err.
func (s *Checked[T]) Next() bool {
	if s.ended {
		return false
	}
	if !s.Source.Next() {
		s.ended = true
		err := s.Source.Err()
		if s.MapError != nil {
			err = s.MapError(err)
		}
		s.err = Err(End{Provider: s.Provider, Err: err, Terminal: s.terminal, Connected: s.items > 0, Events: s.items})
		if s.CloseAtEnd {
			_ = s.Source.Close()
		}
		return false
	}
	s.items++
	if s.Terminal != nil && s.Terminal(s.Source.Current()) {
		s.terminal = true
	}
	return true
}

// Err is the typed error the stream ended with; nil before the end and
// after a clean end past the terminal item.
func (s *Checked[T]) Err() error { return s.err }
