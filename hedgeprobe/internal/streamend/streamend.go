// Package streamend types the end of an SDK's stream for hedging, for the
// SDK adapters (hedgeprobe/openaigo, hedgeprobe/goopenai,
// hedgeprobe/anthropicgo). Those SDKs report a body cut short as a clean
// end; a truncated answer must never pass as success (docs/design.md §2),
// so a stream that ends before its terminal item ends in a
// *sse.ConnectionError wrapping io.ErrUnexpectedEOF.
package streamend

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

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
	// Terminal reports whether the stream is complete once it has read
	// the item (every choice has its finish_reason, message_stop). Its
	// answer for the latest item counts: with n > 1 one choice's finish
	// makes the stream complete until another choice's text comes.
	Terminal func(T) bool
	// CloseAtEnd closes the wrapped stream as soon as it ends, releasing
	// its connection before hedgeprobe's own Close.
	CloseAtEnd bool
	// EndAtTerminal ends the stream at its terminal item, reading nothing
	// after it: Anthropic's message_stop is the protocol's last event, and
	// a connection held open or reset after it must not turn a complete
	// answer into a stall or an error. (OpenAI's finish_reason is followed
	// by the usage chunk and [DONE].)
	EndAtTerminal bool
	// Responded reports that the response had arrived when the stream was
	// opened (the SDK's request returned one): an error before any item
	// is then one of a connection that was made.
	Responded bool
	// Drain, when set, runs at a clean end (the terminal item read, no
	// error), before CloseAtEnd closes the stream: the adapter reads the
	// body's end there (bodyend.Drain), so that the SDK's Close, which
	// does not, keeps an HTTP/1.x connection for the next attempt.
	Drain func()

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
	if s.EndAtTerminal && s.terminal {
		s.ended = true
		if s.Drain != nil {
			s.Drain()
		}
		if s.CloseAtEnd {
			_ = s.Source.Close()
		}
		return false
	}
	if !s.Source.Next() {
		s.ended = true
		err := s.Source.Err()
		if s.MapError != nil {
			err = s.MapError(err)
		}
		s.err = Err(End{Provider: s.Provider, Err: err, Terminal: s.terminal, Connected: s.Responded || s.items > 0, Events: s.items})
		if s.err == nil && s.Drain != nil {
			s.Drain()
		}
		if s.CloseAtEnd {
			_ = s.Source.Close()
		}
		return false
	}
	s.items++
	if s.Terminal != nil {
		s.terminal = s.Terminal(s.Source.Current())
	}
	return true
}

// Err is the typed error the stream ended with; nil before the end and
// after a clean end past the terminal item.
func (s *Checked[T]) Err() error { return s.err }

// Opened checks the response of an SDK's streaming request (the SDKs
// that hand it over: option.WithResponseInto): nil for none, for a status
// that is not 2xx (the SDK reports those) and for an event stream; else
// the error the raw route gives for that 200 response
// (sse.CheckEventStream), where the SDK would read it as an empty stream.
func Opened(provider string, resp *http.Response) error {
	if resp == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil
	}
	return sse.CheckEventStream(provider, resp)
}

// Undecoded reads resp, an error response whose body the SDK could not
// make sense of (err is not its error type, or one without a message: an
// "error": "text", which openai-go cannot decode; a proxy's page), as the
// raw route reads it: the *sse.UpstreamError of its status, headers and
// body, from the body the SDK put back (at most 64 KiB). ok is false when
// resp is not an error response.
func Undecoded(provider string, resp *http.Response, err error) (e *sse.UpstreamError, ok bool) {
	if resp == nil || resp.StatusCode < 400 {
		return nil, false
	}
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	return sse.NewResponseError(provider, resp.StatusCode, resp.Header, body, err), true
}

// Malformed returns, for an SDK's error that is an item whose JSON does
// not parse or a line longer than its decoder takes (bufio.ErrTooLong,
// from openai-go's and anthropic-sdk-go's scanners; sse.ErrTooLarge, from
// goopenai.Transport's bound), the
// *sse.ProtocolError the raw route gives — the second matching
// sse.ErrTooLarge, as the raw route's does: the same upstream will send the
// same, and another attempt is no use. ok is false otherwise.
func Malformed(provider string, err error) (pe *sse.ProtocolError, ok bool) {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return &sse.ProtocolError{Provider: provider, Err: err}, true
	case errors.Is(err, bufio.ErrTooLong):
		return &sse.ProtocolError{Provider: provider, Err: fmt.Errorf("%w: %w", sse.ErrTooLarge, err)}, true
	case errors.Is(err, sse.ErrTooLarge):
		return &sse.ProtocolError{Provider: provider, Err: err}, true
	}
	return nil, false
}

// Choices follows the finish reasons of a chat stream's choices: the
// stream is complete once every choice it carried has one. One choice's
// end is not the stream's: with n > 1 the others may still be cut. The
// choices are those seen, not the request's n, which a server may ignore.
// The zero value is ready to use.
type Choices struct {
	seen, done uint64         // choices 0–63
	more       map[int64]bool // any other index: finished or not
	moreDone   int
}

// Add records that the choice of index appeared, finished or not, and
// reports whether the stream is complete.
func (c *Choices) Add(index int64, finished bool) bool {
	if index >= 0 && index < 64 {
		bit := uint64(1) << index
		c.seen |= bit
		if finished {
			c.done |= bit
		}
	} else {
		if c.more == nil {
			c.more = make(map[int64]bool)
		}
		if was := c.more[index]; !was && finished {
			c.moreDone++
		}
		c.more[index] = c.more[index] || finished
	}
	return c.seen == c.done && c.moreDone == len(c.more)
}
