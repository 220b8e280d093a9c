package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chunk is the item type of the scripted upstreams.
type chunk struct {
	Kind   Kind
	Text   string
	Route  string
	Tokens int64 // output tokens reported on the item (usage), 0 when none
}

func classifyChunk(c chunk) Kind { return c.Kind }

func tokensOf(c chunk) (int64, bool) { return c.Tokens, c.Tokens > 0 }

// step is one scripted upstream action: wait, then emit an item or end.
type step struct {
	after time.Duration
	kind  Kind
	text  string
	tok   int64
	err   error // ends the stream with err
	end   bool  // ends the stream cleanly (default after the last step)
}

func content(after time.Duration, text string) step {
	return step{after: after, kind: Content, text: text}
}
func keepalive(after time.Duration) step { return step{after: after, kind: Keepalive} }
func control(after time.Duration, text string) step {
	return step{after: after, kind: Control, text: text}
}
func fail(after time.Duration, err error) step { return step{after: after, err: err} }

// hang is a step that waits an hour: effectively forever in a test.
func hang() step { return step{after: time.Hour, end: true} }

var errSourceClosed = errors.New("scripted source closed")

// scripted is an in-memory Source whose timing is exact virtual time in a
// synctest bubble. It stops on its context or on Close, like a real one.
type scripted struct {
	route  string
	ctx    context.Context
	steps  []step
	i      int
	cur    chunk
	err    error
	closed chan struct{}
	closes atomic.Int32
	// closeDelay makes Close take time, like a real HTTP body close.
	closeDelay time.Duration
}

func (f *scripted) Next() bool {
	if f.err != nil || f.i >= len(f.steps) {
		return false
	}
	st := f.steps[f.i]
	f.i++
	if st.after > 0 {
		t := time.NewTimer(st.after)
		defer t.Stop()
		select {
		case <-t.C:
		case <-f.ctx.Done():
			f.err = f.ctx.Err()
			return false
		case <-f.closed:
			f.err = errSourceClosed
			return false
		}
	}
	select {
	case <-f.closed:
		f.err = errSourceClosed
		return false
	default:
	}
	if st.err != nil {
		f.err = st.err
		return false
	}
	if st.end {
		f.i = len(f.steps)
		return false
	}
	f.cur = chunk{Kind: st.kind, Text: st.text, Route: f.route, Tokens: st.tok}
	return true
}

func (f *scripted) Current() chunk { return f.cur }
func (f *scripted) Err() error     { return f.err }
func (f *scripted) Close() error {
	if f.closeDelay > 0 {
		time.Sleep(f.closeDelay)
	}
	if f.closes.Add(1) == 1 {
		close(f.closed)
	}
	return nil
}

// upstream is a scripted route: the n-th Open plays scripts[min(n, last)].
type upstream struct {
	name       string
	model      string
	scripts    [][]step
	openDelay  time.Duration
	openErr    error
	closeDelay time.Duration
	// continues makes the route resumable (Route.Continues); a resume
	// attempt plays the next script like any other.
	continues bool

	mu    sync.Mutex
	srcs  []*scripted
	asked []Attempt // what every Open was asked, in order
}

// attempts returns what every Open was asked.
func (u *upstream) attempts() []Attempt {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Attempt(nil), u.asked...)
}

func newUpstream(name string, scripts ...[]step) *upstream {
	return &upstream{name: name, model: "model-" + name, scripts: scripts}
}

func (u *upstream) route() Route[chunk] {
	return Route[chunk]{Name: u.name, Provider: "prov-" + u.name, Model: u.model, Open: u.open, Continues: u.continues}
}

func (u *upstream) open(ctx context.Context, a Attempt) (Source[chunk], error) {
	u.mu.Lock()
	u.asked = append(u.asked, a)
	u.mu.Unlock()
	if u.openDelay > 0 {
		select {
		case <-time.After(u.openDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if u.openErr != nil {
		return nil, u.openErr
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var steps []step
	if len(u.scripts) > 0 {
		steps = u.scripts[min(len(u.srcs), len(u.scripts)-1)]
	}
	s := &scripted{route: u.name, ctx: ctx, steps: steps, closed: make(chan struct{}), closeDelay: u.closeDelay}
	u.srcs = append(u.srcs, s)
	return s, nil
}

func (u *upstream) opened() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.srcs)
}

// closes returns how often each opened source was closed.
func (u *upstream) closes() []int32 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]int32, len(u.srcs))
	for i, s := range u.srcs {
		out[i] = s.closes.Load()
	}
	return out
}

// got is what a caller received, with virtual arrival times since start.
type got struct {
	texts []string
	kinds []Kind
	from  map[string]int
	at    []time.Duration
	err   error
}

func drain(s *Stream[chunk], start time.Time) got {
	g := got{from: map[string]int{}}
	for s.Next() {
		c := s.Current()
		g.texts = append(g.texts, c.Text)
		g.kinds = append(g.kinds, c.Kind)
		g.from[c.Route]++
		g.at = append(g.at, time.Since(start))
	}
	g.err = s.Err()
	return g
}

// itemsOpt changes the Items a test Prober gets.
type itemsOpt func(*Items[chunk])

func withTokens(f TokenCount[chunk]) itemsOpt { return func(i *Items[chunk]) { i.OutputTokens = f } }
func withModel(f func(chunk) (string, bool)) itemsOpt {
	return func(i *Items[chunk]) { i.ResponseModel = f }
}

// withText makes the Prober able to resume: the text of a chunk is its
// Text, and a chunk whose Text starts with "tool:" cannot be continued.
func withText() itemsOpt {
	return func(i *Items[chunk]) {
		i.Text = func(c chunk) (string, bool) { return c.Text, !strings.HasPrefix(c.Text, "tool:") }
	}
}

// newProber builds a Prober of chunks; opts are Options or itemsOpts.
func newProber(cfg Config, opts ...any) (*Prober[chunk], error) {
	items := Items[chunk]{Classify: classifyChunk}
	var os []Option
	for _, o := range opts {
		switch o := o.(type) {
		case Option:
			os = append(os, o)
		case itemsOpt:
			o(&items)
		default:
			panic(fmt.Sprintf("newProber: %T is not an option", o))
		}
	}
	return New(cfg, items, os...)
}

func mustNew(t testing.TB, cfg Config, opts ...any) *Prober[chunk] {
	t.Helper()
	p, err := newProber(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// texts returns n content steps "prefix0".."prefix{n-1}" spaced by gap.
func texts(prefix string, n int, first, gap time.Duration) []step {
	out := make([]step, n)
	for i := range out {
		d := gap
		if i == 0 {
			d = first
		}
		out[i] = content(d, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func wantTexts(t *testing.T, g got, want ...string) {
	t.Helper()
	var c []string
	for i, k := range g.kinds {
		if k == Content {
			c = append(c, g.texts[i])
		}
	}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Fatalf("content = %v, want %v", c, want)
	}
}

func wantDur(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// statusErr is an upstream HTTP error as an adapter would build it.
type statusErr struct {
	code  int
	after time.Duration
}

func (e *statusErr) Error() string             { return fmt.Sprintf("status %d", e.code) }
func (e *statusErr) Transient() bool           { return e.code == 429 || e.code >= 500 }
func (e *statusErr) RetryAfter() time.Duration { return e.after }
