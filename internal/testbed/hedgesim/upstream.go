package hedgesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Chunk is an item of a scripted stream.
type Chunk struct {
	// Kind is Content for a token chunk, Keepalive for a ping during a
	// silence, Control for the final finish-reason item.
	Kind hedgeprobe.Kind
	// Index is the content chunk's index in its stream.
	Index int
}

func classify(c Chunk) hedgeprobe.Kind { return c.Kind }

// text is the sim's Items.Text: one byte per content chunk, so a resume
// prefix says how many chunks the continuation starts after.
func text(c Chunk) (string, bool) { return "x", true }

// items tells hedgeprobe about Chunk.
var items = hedgeprobe.Items[Chunk]{Classify: classify, Text: text}

// StatusError is a scripted upstream's HTTP error, as an SDK adapter would
// report it: 429 and 5xx are transient, and carry Retry-After when given.
type StatusError struct {
	Code  int
	After time.Duration
}

// Error says the status.
func (e *StatusError) Error() string { return "upstream status " + strconv.Itoa(e.Code) }

// Transient reports true for 429 and 5xx.
func (e *StatusError) Transient() bool { return e.Code == 429 || e.Code >= 500 }

// RetryAfter is the Retry-After hint, 0 when none.
func (e *StatusError) RetryAfter() time.Duration { return e.After }

var errClosed = errors.New("hedgesim: stream closed")

// script plays one attempt's draw in virtual time: every wait is one
// reused timer that also stops on the attempt's context or on Close.
type script struct {
	sc     *Scenario
	d      draw
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
	timer  *time.Timer
	jitter *rand.Rand

	content int           // content chunks emitted
	silence time.Duration // silence left to play, counting keepalives
	first   bool          // first content chunk emitted
	done    bool
	err     error
}

func newScript(ctx context.Context, sc *Scenario, d draw) *script {
	return &script{sc: sc, d: d, ctx: ctx, closed: make(chan struct{}),
		jitter: rand.New(rand.NewPCG(d.gapSeed, 1)), silence: -1}
}

// continueFrom makes the script a continuation of a stream whose first k
// content chunks the caller has: it plays the rest, with its own draw's
// time to first chunk and its own silence (as far into the rest as the
// draw's silence was into a whole stream), as fakellm does.
func (s *script) continueFrom(k int) {
	s.content = min(k, s.sc.Chunks)
	if s.d.stallAt >= 0 {
		s.d.stallAt += s.content
	}
}

// wait sleeps d unless the attempt is cancelled or closed.
func (s *script) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return true
	case <-s.ctx.Done():
		s.timer.Stop()
		s.err = s.ctx.Err()
	case <-s.closed:
		s.timer.Stop()
		s.err = errClosed
	}
	return false
}

// next waits for and returns the next item; ok false at the end (err nil
// at a clean end). The headers have already been waited for.
func (s *script) next() (c Chunk, ok bool) {
	if s.done || s.err != nil {
		return Chunk{}, false
	}
	switch {
	case !s.first:
		if !s.wait(s.d.ttft - s.sc.HeaderDelay) {
			return Chunk{}, false
		}
		s.first = true
	case s.content == s.sc.Chunks:
		s.done = true
		return Chunk{Kind: hedgeprobe.Control, Index: s.content}, true
	case s.content == s.d.stallAt && s.silence != 0:
		if s.silence < 0 {
			s.silence = s.d.stall
		}
		// A keepalive every KeepaliveEvery while silent, then the next
		// chunk: the connection is alive, the model is not producing.
		if s.silence > s.sc.KeepaliveEvery {
			if !s.wait(s.sc.KeepaliveEvery) {
				return Chunk{}, false
			}
			s.silence -= s.sc.KeepaliveEvery
			return Chunk{Kind: hedgeprobe.Keepalive}, true
		}
		if !s.wait(s.silence) {
			return Chunk{}, false
		}
		s.silence = 0
	default:
		j := 1 + s.sc.ChunkJitter*(2*s.jitter.Float64()-1)
		if !s.wait(time.Duration(float64(s.sc.ChunkGap) * j)) {
			return Chunk{}, false
		}
	}
	c = Chunk{Kind: hedgeprobe.Content, Index: s.content}
	s.content++
	return c, true
}

func (s *script) close() { s.once.Do(func() { close(s.closed) }) }

// headers waits until the response headers (or the error status) arrive.
func (s *script) headers() error {
	wait := s.sc.HeaderDelay
	if s.d.status != 200 {
		wait = s.d.failAfter
	}
	if !s.wait(wait) {
		return s.err
	}
	if s.d.status != 200 {
		return &StatusError{Code: s.d.status, After: s.d.retryAfter}
	}
	return nil
}

// source is a script as a hedgeprobe.Source.
type source struct {
	s   *script
	cur Chunk
}

func (src *source) Next() bool {
	c, ok := src.s.next()
	src.cur = c
	return ok
}
func (src *source) Current() Chunk { return src.cur }
func (src *source) Err() error     { return src.s.err }
func (src *source) Close() error   { src.s.close(); return nil }

// call is one logical call's view of the upstreams: it counts attempts per
// route so that attempt k on a route always plays the same draw.
type call struct {
	sc     *Scenario
	index  int
	faults bool
	// storm is the strategy's view of the 429 storm; nil in unit tests
	// of one call, which then meet no rate limit.
	storm *storm

	mu     sync.Mutex
	opened [2]int
}

func (c *call) nextDraw(route string) draw {
	r := 0
	if route == Secondary {
		r = 1
	}
	c.mu.Lock()
	k := c.opened[r]
	c.opened[r]++
	c.mu.Unlock()
	d := c.sc.draw(c.index, route, k, c.faults)
	if c.storm != nil && c.faults {
		d = c.storm.answer(c.index, r, d, time.Now())
	}
	return d
}

// route returns the hedgeprobe Route of name for this call; every route
// of the sim can continue a partial answer unless the scenario says
// NoContinuation.
func (c *call) route(name string) hedgeprobe.Route[Chunk] {
	return hedgeprobe.Route[Chunk]{Name: name, Provider: "sim", Model: "model-" + name, Continues: !c.sc.NoContinuation,
		Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[Chunk], error) {
			return c.openAt(ctx, name, len(a.Prefix))
		}}
}

func (c *call) open(ctx context.Context, name string) (hedgeprobe.Source[Chunk], error) {
	return c.openAt(ctx, name, 0)
}

// openAt opens an attempt that continues after the first k chunks.
func (c *call) openAt(ctx context.Context, name string, k int) (hedgeprobe.Source[Chunk], error) {
	s := newScript(ctx, c.sc, c.nextDraw(name))
	if err := s.headers(); err != nil {
		return nil, err
	}
	s.continueFrom(k)
	return &source{s: s}, nil
}

// transport is the in-memory http.RoundTripper under hedgedhttp. The call
// travels in the request context; its n-th round trip goes to route n mod 2
// (primary, then secondary, as a hedge to another provider would; the
// other way round for a retry).
type transport struct{}

type callKey struct{}

// httpCall is a call plus the round trips hedgedhttp made for it.
type httpCall struct {
	*call
	// first is the index of the route of the first round trip: 0 the
	// primary, 1 the secondary (a retry on the other route).
	first  int
	trips  int
	bodies []*body
}

func (transport) RoundTrip(req *http.Request) (*http.Response, error) {
	hc, ok := req.Context().Value(callKey{}).(*httpCall)
	if !ok {
		return nil, fmt.Errorf("hedgesim: request without a call")
	}
	hc.mu.Lock()
	name := [2]string{Primary, Secondary}[(hc.first+hc.trips)%2]
	hc.trips++
	hc.mu.Unlock()
	s := newScript(req.Context(), hc.sc, hc.nextDraw(name))
	if err := s.headers(); err != nil {
		var se *StatusError
		if !errors.As(err, &se) {
			return nil, err
		}
		// An error status is a response, not a transport error: hedgedhttp
		// takes the first response whatever its status.
		h := http.Header{}
		if se.After > 0 {
			h.Set("Retry-After", strconv.Itoa(int(se.After/time.Second)))
		}
		return &http.Response{StatusCode: se.Code, Header: h, Body: http.NoBody, Request: req}, nil
	}
	b := &body{s: s}
	hc.mu.Lock()
	hc.bodies = append(hc.bodies, b)
	hc.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: b, Request: req}, nil
}

// body is a scripted SSE body: each Read blocks until the next event and
// returns it whole ("data: i\n\n", ": ping\n\n", "data: [DONE]\n\n").
type body struct {
	s       *script
	pending []byte
}

func (b *body) Read(p []byte) (int, error) {
	if len(b.pending) == 0 {
		c, ok := b.s.next()
		if !ok {
			if b.s.err != nil {
				return 0, b.s.err
			}
			return 0, io.EOF
		}
		switch c.Kind {
		case hedgeprobe.Content:
			b.pending = fmt.Appendf(nil, "data: %d\n\n", c.Index)
		case hedgeprobe.Keepalive:
			b.pending = []byte(": ping\n\n")
		default:
			b.pending = []byte("data: [DONE]\n\n")
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *body) Close() error { b.s.close(); return nil }
