package streamend

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

func TestErr(t *testing.T) {
	reset := errors.New("connection reset")
	for _, tc := range []struct {
		name      string
		end       End
		want      error // errors.Is target; nil for a clean end
		connected bool
	}{
		{"clean end after terminal event", End{Terminal: true, Events: 4}, nil, false},
		{"clean end before terminal event", End{Events: 4}, io.ErrUnexpectedEOF, true},
		{"broken before any item", End{Err: &sse.ConnectionError{Err: reset}}, reset, false},
		{"broken after items", End{Err: &sse.ConnectionError{Err: reset}, Connected: true, Events: 3}, reset, true},
		{"upstream error", End{Err: &sse.UpstreamError{StatusCode: 503}, Connected: true, Events: 3}, nil, false},
		{"canceled", End{Err: context.Canceled, Terminal: true}, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Err(tc.end)
			if tc.end.Err == nil && tc.want == nil {
				if err != nil {
					t.Fatalf("Err = %v, want nil", err)
				}
				return
			}
			if tc.end.Err != nil && err != tc.end.Err {
				t.Fatalf("Err = %v, want the stream's own error %v", err, tc.end.Err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Err = %v, want %v", err, tc.want)
			}
			var ce *sse.ConnectionError
			if errors.As(err, &ce) && (ce.Connected != tc.connected || ce.Events != tc.end.Events) {
				t.Fatalf("connected %v events %d, want %v %d", ce.Connected, ce.Events, tc.connected, tc.end.Events)
			}
		})
	}
}

// sliceSource is an in-memory SDK stream: items, then err.
type sliceSource struct {
	items  []string
	i      int
	err    error
	closed int
}

func (s *sliceSource) Next() bool {
	if s.i >= len(s.items) {
		return false
	}
	s.i++
	return true
}
func (s *sliceSource) Current() string { return s.items[s.i-1] }
func (s *sliceSource) Err() error      { return s.err }
func (s *sliceSource) Close() error    { s.closed++; return nil }

func TestChecked(t *testing.T) {
	upstream := errors.New("reset")
	mapped := &sse.ConnectionError{Provider: "p", Err: upstream}
	for _, tc := range []struct {
		name    string
		items   []string
		err     error
		check   func(t *testing.T, err error)
		closeAt bool
	}{
		{"terminal seen, clean end", []string{"a", "stop"}, nil, func(t *testing.T, err error) {
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
		}, true},
		{"clean end before the terminal item", []string{"a", "b"}, nil, func(t *testing.T, err error) {
			var ce *sse.ConnectionError
			if !errors.As(err, &ce) || !errors.Is(err, io.ErrUnexpectedEOF) || ce.Events != 2 {
				t.Fatalf("err = %#v, want a ConnectionError after 2 events wrapping io.ErrUnexpectedEOF", err)
			}
		}, false},
		// The latest item's answer counts: a terminal item followed by more
		// (another choice's text) leaves the stream incomplete again.
		{"clean end after an item past the terminal one", []string{"a", "stop", "b"}, nil, func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
			}
		}, false},
		{"error mapped and counted", []string{"a"}, upstream, func(t *testing.T, err error) {
			if err != mapped || !mapped.Connected || mapped.Events != 1 || !errors.Is(err, upstream) {
				t.Fatalf("err = %#v, want the mapped error with Connected and 1 event", err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &sliceSource{items: tc.items, err: tc.err}
			s := &Checked[string]{
				Source: src, Provider: "p", CloseAtEnd: tc.closeAt,
				MapError: func(err error) error {
					if err == nil {
						return nil
					}
					return mapped
				},
				Terminal: func(v string) bool { return v == "stop" },
			}
			var got []string
			for s.Next() {
				got = append(got, s.Current())
			}
			if len(got) != len(tc.items) || s.Next() {
				t.Fatalf("read %v, want %v and then no more", got, tc.items)
			}
			tc.check(t, s.Err())
			if want := map[bool]int{true: 1, false: 0}[tc.closeAt]; src.closed != want {
				t.Fatalf("closed %d times at the end, want %d", src.closed, want)
			}
		})
	}
}

// A chat stream is complete once every choice it carried has a finish
// reason: one choice's end is not the stream's.
func TestChoices(t *testing.T) {
	var one Choices
	if one.Add(0, false) || !one.Add(0, true) || !one.Add(0, false) {
		t.Fatal("one choice: complete at its finish reason, and stays so")
	}
	var two Choices
	two.Add(0, false)
	two.Add(1, false)
	if two.Add(0, true) || !two.Add(1, true) {
		t.Fatal("two choices: complete only when both have finished")
	}
	// OpenAI takes n up to 128: indexes past 63 count one by one.
	var many Choices
	for i := range int64(128) {
		many.Add(i, false)
	}
	for i := range int64(127) {
		if many.Add(i, true) {
			t.Fatalf("128 choices complete after %d finished", i+1)
		}
	}
	if !many.Add(127, true) {
		t.Fatal("128 choices: not complete when all have finished")
	}
}

// An SDK's scanner that meets a line longer than its buffer ends with
// bufio.ErrTooLong, which was mapped as a broken connection, transient: the
// call hedged and resumed onto an upstream that sends the same line again.
// It is the raw route's fatal ProtocolError, matching sse.ErrTooLarge.
func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		err       error
		malformed bool
	}{
		{fmt.Errorf("decoding chunk: %w", &json.SyntaxError{Offset: 3}), true},
		{fmt.Errorf("ssestream: %w", bufio.ErrTooLong), true},
		{fmt.Errorf("%w: a line too long", sse.ErrTooLarge), true}, // goopenai.Transport's
		{io.ErrUnexpectedEOF, false},
		{context.Canceled, false},
	} {
		pe, ok := Malformed("openai", tc.err)
		if ok != tc.malformed || (pe != nil) != ok {
			t.Errorf("Malformed(%v) = %v, %v; want malformed %v", tc.err, pe, ok, tc.malformed)
			continue
		}
		if !ok {
			continue
		}
		if hedgeprobe.IsTransient(pe) {
			t.Errorf("%v: transient, want fatal", tc.err)
		}
		if (errors.Is(tc.err, bufio.ErrTooLong) || errors.Is(tc.err, sse.ErrTooLarge)) && !errors.Is(pe, sse.ErrTooLarge) {
			t.Errorf("%v: does not match sse.ErrTooLarge", pe)
		}
	}
}
