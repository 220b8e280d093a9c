package hedgeprobe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

type ivStatusErr struct{ code int }

func (e *ivStatusErr) Error() string   { return fmt.Sprintf("status %d", e.code) }
func (e *ivStatusErr) Transient() bool { return e.code == 429 || e.code >= 500 }

// ivPushbackErr is a 429 with a Retry-After: it pushes its route back
// (and, with ejection on, ejects it until then), so that error relaunches
// meet routes that refuse them, and calls with PushbackWait wait.
type ivPushbackErr struct{ after time.Duration }

func (e *ivPushbackErr) Error() string             { return fmt.Sprintf("status 429, Retry-After %v", e.after) }
func (e *ivPushbackErr) Transient() bool           { return true }
func (e *ivPushbackErr) RetryAfter() time.Duration { return e.after }

// ivTransient is attempt a's transient error on route ri: a 503, or one
// time in three a 429 with a Retry-After of 0.5–5 s, drawn from a stream
// of its own so that the scripts' other draws stay what they were.
func (c *ivCall) ivTransient(a hedgeprobe.Attempt, ri int) error {
	r := rand.New(rand.NewPCG(c.seed^0x5e7a, uint64(c.idx)*1000+uint64(a.Index)*10+uint64(ri)))
	if r.IntN(3) > 0 {
		return &ivStatusErr{503}
	}
	return &ivPushbackErr{after: ms(500 + r.Float64()*4500)}
}

// ---------------------------------------------------------------------------
// Scripted source.

type ivOp struct {
	after time.Duration
	item  ivItem
	err   error
	hang  bool
}

type ivSrc struct {
	ctx    context.Context
	ops    []ivOp
	pos    int
	cur    ivItem
	err    error
	closed chan struct{}
	once   sync.Once
	closes atomic.Int32
	inNext atomic.Int32
	// virtual times, written by the reading goroutine, read after the call
	firstContent time.Time
	endAt        time.Time
	contentAt    []time.Time // when Next gave each content item
}

func (s *ivSrc) Next() bool {
	s.inNext.Add(1)
	defer s.inNext.Add(-1)
	if s.pos >= len(s.ops) {
		if s.endAt.IsZero() {
			s.endAt = time.Now()
		}
		return false
	}
	op := s.ops[s.pos]
	s.pos++
	wait := op.after
	if op.hang {
		select { // until closed or cancelled
		case <-s.closed:
			s.err = context.Canceled
		case <-s.ctx.Done():
			s.err = s.ctx.Err()
		}
		s.pos = len(s.ops)
		s.endAt = time.Now()
		return false
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.closed:
			t.Stop()
			s.err, s.pos = context.Canceled, len(s.ops)
			return false
		case <-s.ctx.Done():
			t.Stop()
			s.err, s.pos = s.ctx.Err(), len(s.ops)
			return false
		}
	}
	select {
	case <-s.closed:
		s.err, s.pos = context.Canceled, len(s.ops)
		return false
	default:
	}
	if op.hang {
		return false
	}
	if op.err != nil {
		s.err, s.pos = op.err, len(s.ops)
		s.endAt = time.Now()
		return false
	}
	s.cur = op.item
	s.cur.Answer = op.item.Att + 1
	if op.item.Kind == hedgeprobe.Content {
		if s.firstContent.IsZero() {
			s.firstContent = time.Now()
		}
		s.contentAt = append(s.contentAt, time.Now())
	}
	return true
}

func (s *ivSrc) Current() ivItem { return s.cur }
func (s *ivSrc) Err() error      { return s.err }

func (s *ivSrc) Close() error {
	s.closes.Add(1)
	s.once.Do(func() { close(s.closed) })
	return nil
}

// ---------------------------------------------------------------------------
// Per-call world: routes, opens, hooks.

type ivOpen struct {
	route  string
	a      hedgeprobe.Attempt
	src    *ivSrc // nil when Open returned an error
	desc   string
	startW int
	// follow: the open's script sends "follow" before its first word.
	follow bool
}

type ivCall struct {
	mu    sync.Mutex
	seed  uint64
	idx   int
	n     int // words in the script
	nOpen int // opening controls per open
	// earlyUsage: with Items.Opening, every open sends a usage item
	// before its last opening one (a server's early usage), which the
	// caller of a continuation must read without the opening after it.
	earlyUsage bool
	// follows: Items.Follows is set (with Opening) and reports "follow",
	// which a continuation may send after its opening items, before its
	// words: it begins something that follows the answer (Anthropic: a
	// tool call in block 0), and it opens like an opening item.
	follows bool
	opens   []*ivOpen
	done    map[int][]hedgeprobe.AttemptStats
	resumes []hedgeprobe.ResumeEvent
	hedges  []hedgeprobe.HedgeEvent
	// pushedBack holds when pushback (a Retry-After or an ejection on
	// every route) refused a TTFT or stall hedge that was due.
	pushedBack []time.Duration
	viol       []string

	// The caller's clock, kept like the library's: waits in Next summed
	// since the latest content chunk (and since the latest resume).
	inNext    bool
	enter     time.Time
	waited    time.Duration
	mark      time.Duration
	delivered int64
	resumeAt  []time.Duration // caller's wait since content/resume at each after-commit resume event
	// resumeElapsed is each resumeAt event's time since the call's start,
	// resumeAttempt the attempt it launched (-1: a skip or a refusal).
	resumeElapsed []time.Duration
	resumeAttempt []int
	resumeAfter   time.Duration // the Prober's, defaults applied
}

// restartClock moves the resume clock's mark to the caller's wait w at a
// resume event, as the library does: at every resume launched, and at a
// skip or refusal due by the clock. A skip or refusal sooner (the resume at
// once after a failure, which launched nothing) leaves it where it was.
func (c *ivCall) restartClock(w time.Duration, launched int) {
	if launched < 0 && c.resumeAfter > 0 && w-c.mark < c.resumeAfter {
		return
	}
	c.mark = w
}

// callerWait returns the caller's summed wait since the latest content
// chunk, now included.
func (c *ivCall) callerWait() time.Duration {
	w := c.waited
	if c.inNext {
		w += time.Since(c.enter)
	}
	return w
}

func (c *ivCall) violf(format string, args ...any) {
	c.mu.Lock()
	c.viol = append(c.viol, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

type ivKey struct{}

func ivOf(ctx context.Context) *ivCall {
	c, _ := ctx.Value(ivKey{}).(*ivCall)
	return c
}

func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

// open builds the script of one open from a generator seeded by the call
// and the attempt index (not by timing), so a call is reproducible.
func (c *ivCall) open(ctx context.Context, route string, ri int, a hedgeprobe.Attempt) (hedgeprobe.Source[ivItem], error) {
	r := rand.New(rand.NewPCG(c.seed, uint64(c.idx)*1000+uint64(a.Index)*10+uint64(ri)))
	o := &ivOpen{route: route, a: a}
	c.mu.Lock()
	c.opens = append(c.opens, o)
	c.mu.Unlock()
	start := 0
	if a.Trigger == hedgeprobe.TriggerResume {
		start = ivPrefixWords(a.Prefix, c.n)
		if start < 0 {
			c.violf("attempt %d: resume Prefix %q is not a word prefix of the script", a.Index, a.Prefix)
			return nil, &ivStatusErr{400}
		}
		if a.Prefix == "" {
			c.violf("attempt %d: resume with an empty Prefix", a.Index)
		}
		o.startW = start
		switch x := r.IntN(20); {
		case x < 3:
			o.desc = "open refuses (400)"
			return nil, &ivStatusErr{400}
		case x < 4:
			o.desc = "open ErrCannotContinue"
			return nil, fmt.Errorf("x: %w", hedgeprobe.ErrCannotContinue)
		}
	} else if a.Prefix != "" {
		c.violf("attempt %d (%s): non-resume with Prefix %q", a.Index, a.Trigger, a.Prefix)
	}
	o.startW = start
	var ops []ivOp
	var d strings.Builder
	if a.Trigger == hedgeprobe.TriggerResume && r.IntN(8) == 0 {
		ops = append(ops, ivOp{after: ms(50 + r.Float64()*200), err: &ivStatusErr{400}})
		fmt.Fprintf(&d, "refuses in stream (400)")
	} else {
		for i := range c.nOpen {
			if c.earlyUsage && i == c.nOpen-1 {
				ops = append(ops, ivOp{after: ms(5), item: ivItem{Kind: hedgeprobe.Control, Text: "usage", Att: a.Index}})
			}
			ops = append(ops, ivOp{after: ms(5 + r.Float64()*20), item: ivItem{Kind: hedgeprobe.Control, Text: "open", Att: a.Index}})
		}
		if c.follows && a.Trigger == hedgeprobe.TriggerResume && r.IntN(2) == 0 {
			o.follow = true
			ops = append(ops, ivOp{after: ms(5), item: ivItem{Kind: hedgeprobe.Control, Text: "follow", Att: a.Index}})
			fmt.Fprintf(&d, "follows ")
		}
		ttft := ms(100 + r.ExpFloat64()*800)
		if r.IntN(8) == 0 {
			ttft += ms(2000 + r.Float64()*15000)
		}
		fmt.Fprintf(&d, "ttft=%v", ttft)
		// how many words before the end
		stop := c.n
		end := "clean"
		switch x := r.IntN(20); {
		case x < 3:
			end = "transient"
		case x < 4:
			end = "fatal"
		case x < 7:
			end = "hang"
		}
		if end != "clean" && r.IntN(3) > 0 && c.n > start {
			stop = start + r.IntN(c.n-start+1)
		}
		gap := ttft
		for j := start; j < stop; j++ {
			for r.IntN(6) == 0 {
				ops = append(ops, ivOp{after: gap / 2, item: ivItem{Kind: hedgeprobe.Keepalive, Att: a.Index}})
				gap -= gap / 2
			}
			ops = append(ops, ivOp{after: gap, item: ivItem{Kind: hedgeprobe.Content, Text: ivWord(j), Att: a.Index, Word: j}})
			gap = ms(10 + r.ExpFloat64()*80)
			if r.IntN(12) == 0 {
				s := ms(1000 + r.Float64()*20000)
				fmt.Fprintf(&d, " silence %v after w%d", s, j)
				gap += s
			}
		}
		fmt.Fprintf(&d, " words %d..%d end=%s", start, stop, end)
		switch end {
		case "clean":
			ops = append(ops,
				ivOp{after: gap, item: ivItem{Kind: hedgeprobe.Control, Text: "finish", Att: a.Index}},
				ivOp{after: ms(5), item: ivItem{Kind: hedgeprobe.Control, Text: "usage", Att: a.Index}})
		case "transient":
			ops = append(ops, ivOp{after: gap, err: c.ivTransient(a, ri)})
		case "fatal":
			ops = append(ops, ivOp{after: gap, err: &ivStatusErr{400}})
		case "hang":
			ops = append(ops, ivOp{hang: true})
		}
	}
	o.desc = d.String()
	o.src = &ivSrc{ctx: ctx, ops: ops, closed: make(chan struct{})}
	return o.src, nil
}
