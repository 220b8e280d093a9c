package sse

import "github.com/streamwatch/streamwatch/hedgeprobe"

// EndChecked wraps an SDK stream (a hedgeprobe.Source as it is, such as
// openai-go's or anthropic-sdk-go's ssestream.Stream) so that it ends the
// way hedging needs: its error typed by MapError, and a body that ends
// before the stream's terminal item reported as a *ConnectionError
// wrapping io.ErrUnexpectedEOF (EndError) — those SDKs report a body cut
// short as a clean end, and a truncated answer must never pass as success.
// Current and Close are the wrapped stream's.
type EndChecked[T any] struct {
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
func (s *EndChecked[T]) Next() bool {
	if s.ended {
		return false
	}
	if !s.Source.Next() {
		s.ended = true
		err := s.Source.Err()
		if s.MapError != nil {
			err = s.MapError(err)
		}
		s.err = EndError(StreamEnd{Provider: s.Provider, Err: err, Terminal: s.terminal, Connected: s.items > 0, Events: s.items})
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
func (s *EndChecked[T]) Err() error { return s.err }
