package sse

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// chanSource yields the strings sent on its channel; Close unblocks Next.
type chanSource struct {
	ch     chan string
	closed chan struct{}
	cur    string
}

func (c *chanSource) Next() bool {
	select {
	case v, ok := <-c.ch:
		c.cur = v
		return ok
	case <-c.closed:
		return false
	}
}
func (c *chanSource) Current() string { return c.cur }
func (c *chanSource) Err() error      { return nil }
func (c *chanSource) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

// keepaliveStream returns a chanSource, Keepalives over it yielding
// "ka:TYPE" for a keepalive (the tests label keepalives by Type), and the
// function the Tap would report to. mk must not get the keepalive's text
// (outside review: 64 buffered keepalives held up to 64 MiB of it).
func keepaliveStream(t *testing.T) (*chanSource, hedgeprobe.Source[string], func(Event)) {
	t.Helper()
	src := &chanSource{ch: make(chan string), closed: make(chan struct{})}
	var report func(Event)
	s, err := Keepalives(t.Context(), func(ctx context.Context) (hedgeprobe.Source[string], error) {
		report = ctx.Value(keepaliveKey{}).(func(Event))
		return src, nil
	}, func(ev Event) string {
		if ev.Data != nil {
			t.Errorf("mk got the keepalive's text %q", ev.Data)
		}
		return "ka:" + ev.Type
	})
	if err != nil {
		t.Fatal(err)
	}
	return src, s, report
}

func TestKeepalivesInterleave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, s, report := keepaliveStream(t)
		go func() {
			src.ch <- "a"
			time.Sleep(time.Second)
			report(Event{Comment: true, Type: "1", Data: []byte("1")}) // while the SDK's Next blocks
			time.Sleep(time.Second)
			report(Event{Comment: true, Type: "2", Data: []byte("2")})
			time.Sleep(time.Second)
			src.ch <- "b"
			close(src.ch)
		}()
		var got []string
		start := time.Now()
		for s.Next() {
			got = append(got, s.Current()+"@"+time.Since(start).String())
		}
		if want := "a@0s ka:1@1s ka:2@2s b@3s"; strings.Join(got, " ") != want {
			t.Fatalf("got %v, want %s", got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKeepalivesCloseWhileBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &chanSource{ch: make(chan string), closed: make(chan struct{})}
		var attemptCtx context.Context
		s, _ := Keepalives(t.Context(), func(ctx context.Context) (hedgeprobe.Source[string], error) {
			attemptCtx = ctx
			return src, nil
		}, func(Event) string { return "" })
		done := make(chan bool)
		go func() { done <- s.Next() }()
		time.Sleep(time.Minute)
		synctest.Wait()
		_ = s.Close()
		if <-done {
			t.Fatal("Next true after Close")
		}
		if attemptCtx.Err() == nil {
			t.Fatal("the stream's context was not cancelled")
		}
		// synctest.Test fails if the pump goroutine outlived Close.
	})
}

// TestKeepalivesBeforeLaterItems: a keepalive reported before the SDK's
// next item is ready is yielded before that item, every time, and one
// reported before the stream's end is not lost to it.
func TestKeepalivesBeforeLaterItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, s, report := keepaliveStream(t)
		defer s.Close()
		next := func(want string) {
			t.Helper()
			if !s.Next() || s.Current() != want {
				t.Fatalf("got %q, want %q", s.Current(), want)
			}
		}
		for range 30 {
			// The pump is asked for an item and waits on the SDK; a
			// keepalive is yielded meanwhile.
			report(Event{Comment: true, Type: "wait", Data: []byte("wait")})
			next("ka:wait")
			// While the caller is away, a keepalive arrives, then an item
			// that the pump takes and holds: both are ready at the next Next.
			report(Event{Comment: true, Type: "early", Data: []byte("early")})
			src.ch <- "item"
			synctest.Wait()
			next("ka:early")
			next("item")
		}
		report(Event{Comment: true, Type: "wait", Data: []byte("wait")})
		next("ka:wait")
		report(Event{Comment: true, Type: "last", Data: []byte("last")})
		close(src.ch)
		synctest.Wait()
		next("ka:last")
		if s.Next() {
			t.Fatalf("Next after the end: %q", s.Current())
		}
	})
}
