package sse

import (
	"context"
	"sync"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// KeepaliveRoute returns r with each attempt opened through Keepalives,
// the keepalives made as zero items: the SDK adapters' TapKeepalives, for
// item types whose classifier calls the zero item Keepalive.
func KeepaliveRoute[T any](r hedgeprobe.Route[T]) hedgeprobe.Route[T] {
	open := r.Open
	r.Open = func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[T], error) {
		openAttempt := func(ctx context.Context) (hedgeprobe.Source[T], error) { return open(ctx, a) }
		return Keepalives(ctx, openAttempt, func(Event) T {
			var zero T
			return zero
		})
	}
	return r
}

// Keepalives opens a stream with open under a context that a Tap reports
// to (WithKeepaliveFunc), and returns a Source that yields the stream's
// items and, between them, an item made by mk for each keepalive the Tap
// saw on the stream's request — so that hedgeprobe times the comments and
// pings an SDK decoder drops. mk must return an item the route's classifier
// calls Keepalive (an empty chunk). The order is the wire's up to one
// network read: a keepalive that came in the same read as an item may be
// yielded just before it (the Tap sees the read before the SDK decodes it).
//
// The SDK's Next runs on a goroutine of its own; Close cancels the
// context, closes the stream and waits for that goroutine. Keepalives that
// arrive faster than the caller reads are dropped past a buffer of 64. The
// Event mk gets has no Data: a keepalive's text says nothing, and 64 of
// them, each up to TapLimit, would be held for nothing.
// Without a Tap in the SDK client's transport, the Source yields the
// stream's items only.
func Keepalives[T any](ctx context.Context, open func(context.Context) (hedgeprobe.Source[T], error), mk func(Event) T) (hedgeprobe.Source[T], error) {
	ctx, cancel := context.WithCancel(ctx)
	k := &keepaliveSource[T]{
		kas:    make(chan Event, 64),
		items:  make(chan pumped[T]),
		want:   make(chan struct{}),
		stop:   make(chan struct{}),
		cancel: cancel,
		mk:     mk,
	}
	src, err := open(WithKeepaliveFunc(ctx, func(ev Event) {
		ev.Data = nil
		select {
		case k.kas <- ev:
		default:
		}
	}))
	if err != nil {
		cancel()
		return nil, err
	}
	k.src = src
	k.wg.Add(1)
	go k.pump()
	return k, nil
}

type pumped[T any] struct {
	v  T
	ok bool
}

// keepaliveSource hands Next calls to the pump goroutine, which alone
// touches src (except Close, which the Source contract allows).
type keepaliveSource[T any] struct {
	src    hedgeprobe.Source[T]
	kas    chan Event
	items  chan pumped[T]
	want   chan struct{}
	stop   chan struct{}
	cancel context.CancelFunc
	mk     func(Event) T
	wg     sync.WaitGroup

	pending bool // a want was sent and its item not yet received
	done    bool
	cur     T
	err     error

	closeOnce sync.Once
	closeErr  error
}

func (k *keepaliveSource[T]) pump() {
	defer k.wg.Done()
	for {
		select {
		case <-k.want:
		case <-k.stop:
			return
		}
		ok := k.src.Next()
		var p pumped[T]
		if ok {
			p = pumped[T]{v: k.src.Current(), ok: true}
		}
		select {
		case k.items <- p:
		case <-k.stop:
			return
		}
		if !ok {
			return
		}
	}
}

// Next yields the next stream item or tapped keepalive.
func (k *keepaliveSource[T]) Next() bool {
	if k.done {
		return false
	}
	if !k.pending {
		select {
		case k.want <- struct{}{}:
			k.pending = true
		case <-k.stop:
			k.done = true
			return false
		}
	}
	// A keepalive already reported came in a read no later than the one
	// that completed any item the pump holds, so it goes first: a random
	// pick between the two could yield it after a later item, or drop it
	// for the stream's end.
	select {
	case ev := <-k.kas:
		k.cur = k.mk(ev)
		return true
	default:
	}
	select {
	case ev := <-k.kas:
		k.cur = k.mk(ev)
		return true
	case p := <-k.items:
		k.pending = false
		if !p.ok {
			// The pump has returned: src is no longer read.
			k.done = true
			k.err = k.src.Err()
			return false
		}
		k.cur = p.v
		return true
	case <-k.stop:
		k.done = true
		return false
	}
}

// Current returns the current item.
func (k *keepaliveSource[T]) Current() T { return k.cur }

// Err returns the stream's error once Next has returned false.
func (k *keepaliveSource[T]) Err() error { return k.err }

// Close cancels the request, closes the stream and waits for the pump.
func (k *keepaliveSource[T]) Close() error {
	k.closeOnce.Do(func() {
		close(k.stop)
		k.cancel()
		k.closeErr = k.src.Close()
		k.wg.Wait()
	})
	return k.closeErr
}
