package hedgeprobe_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/semconv"
)

// ---------------------------------------------------------------------------
// Items: a word script. Content item j carries the word "w<j>."; a resume
// open continues from the word after its Prefix.

type ivItem struct {
	Kind hedgeprobe.Kind
	Text string // content: the word; control: "open", "follow", "finish", "usage"
	Att  int    // attempt index of the open that produced it
	Word int    // content: word index
	// Answer labels the answer the item is part of: the source sets it to
	// Att+1, and Relabel gives a continuation's items their answer's.
	Answer int
}

var ivItems = hedgeprobe.Items[ivItem]{
	Classify: func(v ivItem) hedgeprobe.Kind { return v.Kind },
	Text: func(v ivItem) (string, bool) {
		return v.Text, true
	},
	Relabel: func(answer, v ivItem) ivItem {
		v.Answer = answer.Answer
		return v
	},
}

func ivWord(j int) string { return fmt.Sprintf("w%d.", j) }

// ivPrefixWords returns k when prefix is exactly words 0..k-1, else -1.
func ivPrefixWords(prefix string, n int) int {
	var b strings.Builder
	for k := 0; k <= n; k++ {
		if b.String() == prefix {
			return k
		}
		if k < n {
			b.WriteString(ivWord(k))
		}
	}
	return -1
}

// ---------------------------------------------------------------------------

type ivCaller struct {
	kind    string // "read", "close", "cancel", "slow", "stop"
	at      time.Duration
	stopAt  int
	slowMax time.Duration
}

func (c ivCaller) String() string {
	switch c.kind {
	case "close", "cancel":
		return fmt.Sprintf("%s@%v", c.kind, c.at)
	case "stop":
		return fmt.Sprintf("stop after %d items", c.stopAt)
	case "slow":
		return fmt.Sprintf("slow reads up to %v", c.slowMax)
	}
	return c.kind
}

func ivRandConfig(r *rand.Rand) hedgeprobe.Config {
	var cfg hedgeprobe.Config
	if r.IntN(3) == 0 {
		cfg.Delivery = hedgeprobe.Buffered
	}
	cfg.HoldChunks = r.IntN(5)
	if r.IntN(2) == 0 {
		cfg.StallAfter = ms(500 + r.Float64()*4000)
	}
	if r.IntN(2) == 0 {
		cfg.HedgeAfter = ms(300 + r.Float64()*3000)
	}
	if r.IntN(2) == 0 {
		cfg.TTFTTimeout = ms(2000 + r.Float64()*20000)
	}
	if r.IntN(3) > 0 {
		cfg.StallTimeout = ms(3000 + r.Float64()*15000)
	}
	switch r.IntN(4) {
	case 0:
		cfg.ResumeAfter = hedgeprobe.Off
	case 1: // default 2s
		if cfg.StallTimeout > 0 && cfg.StallTimeout <= 2*time.Second {
			cfg.StallTimeout = 3 * time.Second
		}
	default:
		cfg.ResumeAfter = ms(300 + r.Float64()*2500)
		if cfg.StallTimeout > 0 && cfg.StallTimeout <= cfg.ResumeAfter {
			cfg.StallTimeout = cfg.ResumeAfter + ms(500+r.Float64()*5000)
		}
	}
	cfg.MaxAttempts = 1 + r.IntN(5)
	if r.IntN(10) == 0 {
		cfg.MaxAttempts = 7 // clamped to 5
	}
	switch r.IntN(3) {
	case 0:
		cfg.HedgeBudget, cfg.HedgeBurst = 0.01+r.Float64()*0.3, 1+float64(r.IntN(2))
	case 1:
		cfg.HedgeBudget = 0.5 + r.Float64()
	}
	switch r.IntN(3) {
	case 0:
		cfg.EjectFailures = hedgeprobe.NoEjection
	case 1:
		cfg.EjectFailures = 1 + r.IntN(3)
	}
	if r.IntN(3) == 0 {
		// Ejection refuses error relaunches on every route: some wait.
		cfg.PushbackWait = ms(1000 + r.Float64()*20000)
	}
	return cfg
}

func ivAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// ---------------------------------------------------------------------------

type ivResult struct {
	cfg    hedgeprobe.Config
	caller ivCaller
	items  []ivItem
	st     hedgeprobe.Stats
	err    error
	call   *ivCall
	nRoute int
	cont   []bool
}

func (res *ivResult) describe() string {
	var b strings.Builder
	c := res.call
	fmt.Fprintf(&b, "seed=%d call=%d words=%d nOpen=%d routes=%d continues=%v caller=%s\n", c.seed, c.idx, c.n, c.nOpen, res.nRoute, res.cont, res.caller)
	fmt.Fprintf(&b, "  config %+v\n", res.cfg)
	for _, o := range c.opens {
		fmt.Fprintf(&b, "  open %s attempt %d trigger %s prefixWords=%d: %s\n", o.route, o.a.Index, o.a.Trigger, o.startW, o.desc)
	}
	var got []string
	for _, it := range res.items {
		if it.Kind == hedgeprobe.Content {
			got = append(got, fmt.Sprintf("%s(a%d)", it.Text, it.Att))
		} else {
			got = append(got, fmt.Sprintf("<%v %s a%d>", it.Kind, it.Text, it.Att))
		}
	}
	fmt.Fprintf(&b, "  caller got: %s\n", strings.Join(got, " "))
	for _, e := range c.resumes {
		fmt.Fprintf(&b, "  OnResume attempt=%d of=%d route=%q delivered=%d skipped=%q at %v\n", e.Attempt, e.Of, e.Route, e.DeliveredChunks, e.Skipped, e.Elapsed)
	}
	fmt.Fprintf(&b, "  outcome=%s err=%v winner=%d chunks=%d items=%d\n", res.st.Outcome, res.err, res.st.Winner, res.st.ChunksDelivered, res.st.ItemsDelivered)
	for _, a := range res.st.Attempts {
		fmt.Fprintf(&b, "  attempt %d %s route=%s outcome=%s content=%d delivered=%d resumeOf=%d before=%d err=%v\n",
			a.Index, a.Trigger, a.Route, a.Outcome, a.ContentChunks, a.ChunksDelivered, a.ResumeOf, a.DeliveredBefore, a.Err)
	}
	return b.String()
}

// ivRun runs one call and checks every invariant; it returns the
// violations.
type ivSession struct {
	p     *hedgeprobe.Prober[ivItem]
	sr    *tracetest.SpanRecorder
	seen  int
	cfg   hedgeprobe.Config
	names []string
	cont  []bool
	// opening: Items.Opening is set; follows: Items.Follows too.
	opening, follows bool
}

func newIVSession(t *testing.T, r *rand.Rand) *ivSession {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	cfg := ivRandConfig(r)
	hook := func(ctx context.Context) *ivCall { return ivOf(ctx) }
	// Half the sessions say which items open an answer (Items.Opening):
	// a continuation then reaches the caller from its first content or
	// closing item; the others count the answer's opening items instead.
	items := ivItems
	opening := r.IntN(2) == 0
	// Half of those say which item begins what follows the answer
	// (Items.Follows).
	follows := opening && r.IntN(2) == 0
	if opening {
		items.Opening = func(v ivItem) bool { return v.Text == "open" || v.Text == "follow" }
	}
	if follows {
		items.Follows = func(v ivItem) bool { return v.Text == "follow" }
	}
	p, err := hedgeprobe.New(cfg, items, hedgeprobe.WithTracerProvider(tp),
		hedgeprobe.OnAttemptDone(func(e hedgeprobe.AttemptEvent) {
			if c := hook(e.Context); c != nil {
				c.mu.Lock()
				c.done[e.Index] = append(c.done[e.Index], e.AttemptStats)
				c.mu.Unlock()
			}
		}),
		hedgeprobe.OnResume(func(e hedgeprobe.ResumeEvent) {
			if c := hook(e.Context); c != nil {
				c.mu.Lock()
				c.resumes = append(c.resumes, e)
				// A resume the route declined (refused, build) was reported
				// at its launch already: its second report is no new resume
				// and leaves the cadence as it was.
				declined := e.Skipped == hedgeprobe.ResumeRefused || e.Skipped == hedgeprobe.ResumeBuild
				if e.DeliveredChunks > 0 && !declined {
					w := c.callerWait()
					c.resumeAt = append(c.resumeAt, w-c.mark)
					c.resumeElapsed = append(c.resumeElapsed, e.Elapsed)
					launched := e.Attempt
					if e.Skipped != "" {
						launched = -1
					}
					c.resumeAttempt = append(c.resumeAttempt, launched)
					c.restartClock(w, launched)
					if e.DeliveredChunks != c.delivered {
						c.viol = append(c.viol, fmt.Sprintf("ResumeEvent.DeliveredChunks=%d, the caller has %d", e.DeliveredChunks, c.delivered))
					}
				}
				c.mu.Unlock()
			}
		}),
		hedgeprobe.OnThrottle(func(e hedgeprobe.ThrottleEvent) {
			if c := hook(e.Context); c != nil && (e.Trigger == hedgeprobe.TriggerTTFT || e.Trigger == hedgeprobe.TriggerStall) && e.Reason == hedgeprobe.ThrottlePushback {
				c.mu.Lock()
				c.pushedBack = append(c.pushedBack, e.Elapsed)
				c.mu.Unlock()
			}
			if c := hook(e.Context); c != nil && e.Trigger == hedgeprobe.TriggerResume {
				c.mu.Lock()
				if c.delivered > 0 {
					w := c.callerWait()
					c.resumeAt = append(c.resumeAt, w-c.mark)
					c.resumeElapsed = append(c.resumeElapsed, e.Elapsed)
					c.resumeAttempt = append(c.resumeAttempt, -1)
					c.restartClock(w, -1)
				}
				c.mu.Unlock()
			}
		}),
		hedgeprobe.OnHedge(func(e hedgeprobe.HedgeEvent) {
			if c := hook(e.Context); c != nil {
				c.mu.Lock()
				c.hedges = append(c.hedges, e)
				c.mu.Unlock()
			}
		}),
	)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	n := 1 + r.IntN(3)
	s := &ivSession{p: p, sr: sr, cfg: cfg, opening: opening, follows: follows}
	for i := range n {
		s.names = append(s.names, fmt.Sprintf("r%d", i))
		s.cont = append(s.cont, r.IntN(3) > 0)
	}
	return s
}

func (ss *ivSession) run(r *rand.Rand, seed uint64, idx int) (res *ivResult, viol []string) {
	c := &ivCall{seed: seed, idx: idx, n: 1 + r.IntN(10), nOpen: r.IntN(3), done: map[int][]hedgeprobe.AttemptStats{},
		resumeAfter: ss.p.Config().ResumeAfter}
	c.earlyUsage = ss.opening && r.IntN(3) == 0
	c.follows = ss.follows
	res = &ivResult{cfg: ss.p.Config(), call: c, nRoute: len(ss.names), cont: ss.cont}
	routes := make([]hedgeprobe.Route[ivItem], len(ss.names))
	for i, name := range ss.names {
		routes[i] = hedgeprobe.Route[ivItem]{Name: name, Model: "m" + name, Provider: "p", Continues: ss.cont[i],
			Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[ivItem], error) {
				return c.open(ctx, name, i, a)
			}}
	}
	var caller ivCaller
	switch x := r.IntN(10); {
	case x < 4:
		caller.kind = "read"
	case x < 5:
		caller.kind, caller.at = "close", ms(r.Float64()*8000)
	case x < 6:
		caller.kind, caller.at = "cancel", ms(r.Float64()*8000)
	case x < 8:
		caller.kind, caller.slowMax = "slow", ms(r.Float64()*5000)
	default:
		caller.kind, caller.stopAt = "stop", r.IntN(8)
	}
	res.caller = caller
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ivKey{}, c))
	defer cancel()
	base := runtime.NumGoroutine()
	s := ss.p.Stream(ctx, routes...)
	var closer sync.WaitGroup
	var closedByUs, canceledByUs, safety atomic.Bool
	readDone := make(chan struct{})
	sleep := func(d time.Duration) bool {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			return true
		case <-readDone:
			return false
		}
	}
	switch caller.kind {
	case "close":
		closer.Go(func() { sleep(caller.at); closedByUs.Store(true); s.Close() })
	case "cancel":
		closer.Go(func() {
			if sleep(caller.at) {
				canceledByUs.Store(true)
				cancel()
			}
		})
	default:
		// A call whose upstreams all hang and no watchdog is set would
		// never end: the caller gives up after ten virtual minutes.
		closer.Go(func() {
			if sleep(10 * time.Minute) {
				safety.Store(true)
				closedByUs.Store(true)
				s.Close()
			}
		})
	}
	var maxStall, lastWait time.Duration
	start := time.Now()
	for {
		c.mu.Lock()
		c.inNext, c.enter = true, time.Now()
		c.mu.Unlock()
		ok := s.Next()
		c.mu.Lock()
		c.inNext = false
		if c.delivered > 0 {
			c.waited += time.Since(c.enter)
			maxStall = max(maxStall, c.waited)
		}
		lastWait = c.waited
		if ok && s.Current().Kind == hedgeprobe.Content {
			c.delivered++
			c.waited, c.mark = 0, 0
		}
		c.mu.Unlock()
		if !ok {
			break
		}
		res.items = append(res.items, s.Current())
		if caller.kind == "slow" {
			time.Sleep(ms(r.Float64() * float64(caller.slowMax/time.Millisecond)))
		}
		if caller.kind == "stop" && len(res.items) >= caller.stopAt {
			closedByUs.Store(true)
			s.Close()
			break
		}
	}
	// The call has finished: sources closed, no source in Next.
	check := func(when string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, o := range c.opens {
			if o.src == nil {
				continue
			}
			if n := o.src.closes.Load(); n != 1 {
				viol = append(viol, fmt.Sprintf("%s: source of attempt %d (%s) closed %d times", when, o.a.Index, o.route, n))
			}
			if o.src.inNext.Load() != 0 {
				viol = append(viol, fmt.Sprintf("%s: source of attempt %d still in Next", when, o.a.Index))
			}
		}
	}
	if caller.kind != "stop" {
		check("after Next reported false")
	} else {
		check("after Close")
	}
	endAt := time.Since(start)
	closedBeforeEnd := closedByUs.Load()
	res.err = s.Err()
	res.st = s.Stats()
	close(readDone)
	closer.Wait()
	if safety.Load() {
		res.caller.kind += "+safety-close@10m"
	}
	if err2 := s.Close(); err2 != nil {
		viol = append(viol, fmt.Sprintf("Close returned %v", err2))
	}
	if err3 := s.Err(); !errors.Is(err3, res.err) && err3 != res.err {
		viol = append(viol, fmt.Sprintf("Err changed after Close: %v then %v", res.err, err3))
	}
	if s.Next() {
		viol = append(viol, "Next reported true after the call ended")
	}
	if st2 := s.Stats(); st2.Outcome != res.st.Outcome || st2.ChunksDelivered != res.st.ChunksDelivered || len(st2.Attempts) != len(res.st.Attempts) {
		viol = append(viol, fmt.Sprintf("Stats changed after the end: %s/%d/%d then %s/%d/%d", res.st.Outcome, res.st.ChunksDelivered, len(res.st.Attempts), st2.Outcome, st2.ChunksDelivered, len(st2.Attempts)))
	}
	cancel()
	synctest.Wait()
	if g := runtime.NumGoroutine(); g > base {
		// Count only the goroutines of this bubble other than the test's
		// own (a runtime or race-detector goroutine may come and go).
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, gs := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(gs, "synctest bubble") && !strings.Contains(gs, "TestInvariantsRandom") &&
				!strings.Contains(gs, "synctest.Run") && !strings.Contains(gs, "testingSynctestTest") {
				viol = append(viol, "goroutine left after the call: "+gs)
			}
		}
	}
	c.mu.Lock()
	viol = append(viol, c.viol...)
	c.mu.Unlock()

	st := res.st
	maxAtt := res.cfg.MaxAttempts
	// Delivered text: a prefix of the script, in order, no repeat or gap.
	content, opened := 0, false
	finishes := 0
	for i, it := range res.items {
		switch it.Kind {
		case hedgeprobe.Content:
			if it.Text != ivWord(content) {
				viol = append(viol, fmt.Sprintf("item %d: content %q, want %q (repeat or gap)", i, it.Text, ivWord(content)))
			}
			content++
			opened = true
		case hedgeprobe.Control:
			if it.Text == "open" && opened {
				viol = append(viol, fmt.Sprintf("item %d: an opening control item (attempt %d) after content", i, it.Att))
			}
			if it.Text == "finish" {
				finishes++
				if finishes > 1 {
					viol = append(viol, fmt.Sprintf("item %d: a second finish item", i))
				}
			}
			if it.Text != "finish" && it.Text != "usage" && finishes > 0 {
				viol = append(viol, fmt.Sprintf("item %d: %q after the finish item", i, it.Text))
			}
		}
	}
	// What an open sent before its first word reaches the caller with
	// that word: its early usage, and "follow" (Items.Follows), after the
	// usage.
	usageAt, followAt, wordAt := map[int]int{}, map[int]int{}, map[int]int{}
	for i, it := range res.items {
		var at map[int]int
		switch {
		case it.Kind == hedgeprobe.Content:
			at = wordAt
		case it.Text == "usage":
			at = usageAt
		case it.Text == "follow":
			at = followAt
		default:
			continue
		}
		if _, seen := at[it.Att]; !seen {
			at[it.Att] = i
		}
	}
	for _, o := range c.opens {
		w, delivered := wordAt[o.a.Index]
		if !delivered || o.src == nil {
			continue
		}
		// Every open has its early usage, before its last opening item.
		early := c.earlyUsage && c.nOpen > 0
		u, hasUsage := usageAt[o.a.Index]
		if early && (!hasUsage || u > w) {
			viol = append(viol, fmt.Sprintf("attempt %d: its early usage did not reach the caller before its first word", o.a.Index))
		}
		if f, ok := followAt[o.a.Index]; o.follow && (!ok || f > w || early && u > f) {
			viol = append(viol, fmt.Sprintf("attempt %d: its follow item did not reach the caller after its early usage and before its first word", o.a.Index))
		}
	}
	// One answer: a continuation's items carry the labels of the answer
	// they continue (Items.Relabel).
	for i, it := range res.items {
		if it.Answer != res.items[0].Answer {
			viol = append(viol, fmt.Sprintf("item %d: labelled answer %d, the first item %d", i, it.Answer, res.items[0].Answer))
			break
		}
	}
	opens := 0
	for _, it := range res.items {
		if it.Kind == hedgeprobe.Control && it.Text == "open" {
			opens++
		}
	}
	if opens > c.nOpen {
		viol = append(viol, fmt.Sprintf("%d opening control items delivered, the answer has %d", opens, c.nOpen))
	}
	switch st.Outcome {
	case hedgeprobe.OutcomeOK, hedgeprobe.OutcomeError, hedgeprobe.OutcomeCanceled, hedgeprobe.OutcomeStallTimeout, hedgeprobe.OutcomeTTFTTimeout:
	default:
		viol = append(viol, fmt.Sprintf("outcome %q not a documented one", st.Outcome))
	}
	if st.Outcome == hedgeprobe.OutcomeOK {
		if content != c.n {
			viol = append(viol, fmt.Sprintf("outcome ok with %d of %d words", content, c.n))
		}
		if finishes != 1 {
			viol = append(viol, fmt.Sprintf("outcome ok with %d finish items", finishes))
		}
		if opens != c.nOpen && caller.kind != "stop" {
			viol = append(viol, fmt.Sprintf("outcome ok with %d opening items, want %d", opens, c.nOpen))
		}
	}
	// Stats.
	if st.ChunksDelivered != int64(content) {
		viol = append(viol, fmt.Sprintf("Stats.ChunksDelivered=%d, Next returned %d content items", st.ChunksDelivered, content))
	}
	if st.ItemsDelivered != int64(len(res.items)) {
		viol = append(viol, fmt.Sprintf("Stats.ItemsDelivered=%d, Next returned %d items", st.ItemsDelivered, len(res.items)))
	}
	var sum int64
	winners := 0
	for i, a := range st.Attempts {
		sum += a.ChunksDelivered
		if a.Index != i {
			viol = append(viol, fmt.Sprintf("Attempts[%d].Index=%d", i, a.Index))
		}
		if a.Outcome == hedgeprobe.AttemptWinner {
			winners++
		}
		if a.Outcome == hedgeprobe.AttemptRunning {
			viol = append(viol, fmt.Sprintf("attempt %d still running after the call", i))
		}
		if a.ChunksDelivered > a.ContentChunks {
			viol = append(viol, fmt.Sprintf("attempt %d delivered %d > received %d", i, a.ChunksDelivered, a.ContentChunks))
		}
		if a.Outcome == hedgeprobe.AttemptFailed && a.Err == nil {
			viol = append(viol, fmt.Sprintf("attempt %d failed without Err", i))
		}
	}
	if sum != st.ChunksDelivered {
		viol = append(viol, fmt.Sprintf("sum of attempts' ChunksDelivered %d != Stats.ChunksDelivered %d", sum, st.ChunksDelivered))
	}
	// An attempt's content chunks received are those its source gave
	// before the attempt ended: a loser's too (rule 5 discards only what
	// comes later), though the caller was away from Next.
	c.mu.Lock()
	for _, o := range c.opens {
		if o.src == nil || o.a.Index >= len(st.Attempts) {
			continue
		}
		a := st.Attempts[o.a.Index]
		end := start.Add(a.LaunchOffset + a.Duration)
		before := 0
		for _, at := range o.src.contentAt {
			if at.Before(end) {
				before++
			}
		}
		if a.ContentChunks > int64(len(o.src.contentAt)) || a.ContentChunks < int64(before) {
			viol = append(viol, fmt.Sprintf("attempt %d (%s) received %d content chunks; its source gave %d, %d of them before it ended at %v",
				o.a.Index, a.Outcome, a.ContentChunks, len(o.src.contentAt), before, end.Sub(start)))
		}
	}
	c.mu.Unlock()
	if len(st.Attempts) > maxAtt || maxAtt > hedgeprobe.MaxAttemptsLimit {
		viol = append(viol, fmt.Sprintf("%d attempts, MaxAttempts %d", len(st.Attempts), maxAtt))
	}
	if st.Outcome == hedgeprobe.OutcomeOK {
		if winners != 1 || st.Winner < 0 || st.Winner >= len(st.Attempts) || st.Attempts[st.Winner].Outcome != hedgeprobe.AttemptWinner {
			viol = append(viol, fmt.Sprintf("outcome ok: %d winner attempts, Stats.Winner %d", winners, st.Winner))
		}
	} else if winners > 0 {
		viol = append(viol, fmt.Sprintf("outcome %s with %d attempt(s) of outcome winner", st.Outcome, winners))
	}
	if st.Winner >= 0 && st.Winner < len(st.Attempts) && st.WinnerRoute != st.Attempts[st.Winner].Route {
		viol = append(viol, fmt.Sprintf("WinnerRoute %q, attempt %d route %q", st.WinnerRoute, st.Winner, st.Attempts[st.Winner].Route))
	}
	if content > 0 && st.Winner < 0 {
		viol = append(viol, "content delivered with Stats.Winner -1")
	}
	// Outcome vs Err.
	err := res.err
	switch st.Outcome {
	case hedgeprobe.OutcomeOK:
		if err != nil {
			viol = append(viol, fmt.Sprintf("outcome ok with Err %v", err))
		}
	case hedgeprobe.OutcomeCanceled:
		switch {
		case canceledByUs.Load() && errors.Is(err, context.Canceled):
		case closedBeforeEnd && err == nil:
		default:
			viol = append(viol, fmt.Sprintf("outcome canceled, Err %v, closed=%v canceled=%v", err, closedByUs.Load(), canceledByUs.Load()))
		}
	case hedgeprobe.OutcomeTTFTTimeout:
		var te *hedgeprobe.TimeoutError
		if !errors.Is(err, hedgeprobe.ErrTTFTTimeout) || !errors.As(err, &te) || content != 0 {
			viol = append(viol, fmt.Sprintf("outcome ttft_timeout, Err %v, %d chunks delivered", err, content))
		}
	case hedgeprobe.OutcomeStallTimeout:
		var te *hedgeprobe.TimeoutError
		if !errors.As(err, &te) || !errors.Is(err, hedgeprobe.ErrStallTimeout) {
			viol = append(viol, fmt.Sprintf("outcome stall_timeout, Err %v", err))
		} else if te.ChunksDelivered != st.ChunksDelivered || te.Truncated != (st.ChunksDelivered > 0) {
			viol = append(viol, fmt.Sprintf("stall TimeoutError delivered=%d truncated=%v, stats %d", te.ChunksDelivered, te.Truncated, st.ChunksDelivered))
		}
	case hedgeprobe.OutcomeError:
		if err == nil || errors.Is(err, hedgeprobe.ErrTimeout) {
			viol = append(viol, fmt.Sprintf("outcome error with Err %v", err))
		}
	}
	if st.Outcome != hedgeprobe.OutcomeCanceled && closedByUs.Load() && err == nil && st.Outcome != hedgeprobe.OutcomeOK {
		viol = append(viol, fmt.Sprintf("outcome %s with nil Err", st.Outcome))
	}
	// Timing, exact in virtual time.
	cfg := res.cfg
	if st := cfg.StallTimeout; st > 0 && cfg.Delivery == hedgeprobe.Streaming {
		if maxStall > st {
			viol = append(viol, fmt.Sprintf("the caller waited %v in Next since the latest content chunk, StallTimeout %v", maxStall, st))
		}
		if res.st.Outcome == hedgeprobe.OutcomeStallTimeout && res.st.ChunksDelivered > 0 && lastWait != st && !strings.HasPrefix(caller.kind, "stop") {
			viol = append(viol, fmt.Sprintf("stall_timeout after the caller waited %v, StallTimeout %v", lastWait, st))
		}
	}
	c.mu.Lock()
	for i, w := range c.resumeAt {
		if cfg.ResumeAfter > 0 && w > cfg.ResumeAfter {
			viol = append(viol, fmt.Sprintf("resume %d after commit due after the caller waited %v, ResumeAfter %v", i, w, cfg.ResumeAfter))
		}
		if cfg.ResumeAfter > 0 && w < cfg.ResumeAfter {
			if v := earlyResume(res.st.Attempts, c.resumeElapsed[i], c.resumeAttempt[i]); v != "" {
				viol = append(viol, fmt.Sprintf("resume %d after commit at %v, after the caller waited %v < ResumeAfter %v: %s (resume events at %v, launching %v)",
					i, c.resumeElapsed[i], w, cfg.ResumeAfter, v, c.resumeElapsed, c.resumeAttempt))
			}
		}
	}
	var firstContent time.Duration = -1
	earlyEnd := false
	for _, o := range c.opens {
		if o.src == nil {
			continue
		}
		if !o.src.firstContent.IsZero() {
			if f := o.src.firstContent.Sub(start); firstContent < 0 || f < firstContent {
				firstContent = f
			}
		}
		if !o.src.endAt.IsZero() && o.src.endAt.Sub(start) <= cfg.TTFTTimeout {
			earlyEnd = true
		}
	}
	c.mu.Unlock()
	if tt := cfg.TTFTTimeout; tt > 0 {
		if res.st.Outcome == hedgeprobe.OutcomeTTFTTimeout {
			if endAt != tt {
				viol = append(viol, fmt.Sprintf("ttft_timeout at %v, TTFTTimeout %v", endAt, tt))
			}
			if firstContent >= 0 && firstContent < tt {
				viol = append(viol, fmt.Sprintf("ttft_timeout, but an attempt had content at %v", firstContent))
			}
		} else if (firstContent < 0 || firstContent > tt) && endAt > tt && !earlyEnd && (caller.kind == "read" || caller.kind == "slow" ||
			(caller.kind == "close" || caller.kind == "cancel") && caller.at > tt) {
			viol = append(viol, fmt.Sprintf("no content by TTFTTimeout %v (first at %v), call ended %s at %v", tt, firstContent, res.st.Outcome, endAt))
		}
	}
	if cfg.HedgeAfter > 0 {
		for i, a := range res.st.Attempts {
			if i == 0 || a.Trigger != hedgeprobe.TriggerTTFT || res.st.Attempts[i-1].Trigger == hedgeprobe.TriggerResume {
				continue
			}
			// A hedge pushback refused when due launches when the pushback
			// ends, later. It is due at want; or, when a live attempt had
			// content after the previous launch (the silence was the stall
			// trigger's) and then failed, at that failure; and a stall hedge
			// refused before that failure is the one that launches, as a
			// TTFT hedge once the silence is the TTFT trigger's (counted
			// once, at the stall's refusal).
			prev := res.st.Attempts[i-1].LaunchOffset
			want := prev + cfg.HedgeAfter
			c.mu.Lock()
			pushedBack := slices.ContainsFunc(c.pushedBack, func(at time.Duration) bool {
				return at > prev && at <= a.LaunchOffset
			})
			c.mu.Unlock()
			if a.LaunchOffset != want && !(pushedBack && a.LaunchOffset > want) {
				viol = append(viol, fmt.Sprintf("ttft hedge %d launched at %v, want %v (previous launch + HedgeAfter)", i, a.LaunchOffset, want))
			}
		}
	}
	// An error relaunch launches at the failure that asked for it, or,
	// having waited for a route (PushbackWait), within PushbackWait of it.
	for i, a := range res.st.Attempts {
		if a.Trigger != hedgeprobe.TriggerError {
			continue
		}
		failed := time.Duration(-1)
		for _, b := range res.st.Attempts[:i] {
			if end := b.LaunchOffset + b.Duration; b.Outcome == hedgeprobe.AttemptFailed && end <= a.LaunchOffset && end > failed {
				failed = end
			}
		}
		if failed < 0 || a.LaunchOffset != failed && a.LaunchOffset-failed > cfg.PushbackWait {
			viol = append(viol, fmt.Sprintf("error relaunch %d at %v, the latest failure before it at %v, PushbackWait %v", i, a.LaunchOffset, failed, cfg.PushbackWait))
		}
	}
	// Hooks: OnAttemptDone once per attempt, matching the stats.
	c.mu.Lock()
	for i, a := range st.Attempts {
		evs := c.done[i]
		if len(evs) != 1 {
			viol = append(viol, fmt.Sprintf("OnAttemptDone fired %d times for attempt %d", len(evs), i))
			continue
		}
		e := evs[0]
		if e.Outcome != a.Outcome || e.ChunksDelivered != a.ChunksDelivered || e.ContentChunks != a.ContentChunks {
			viol = append(viol, fmt.Sprintf("attempt %d: OnAttemptDone outcome=%s delivered=%d content=%d, Stats outcome=%s delivered=%d content=%d",
				i, e.Outcome, e.ChunksDelivered, e.ContentChunks, a.Outcome, a.ChunksDelivered, a.ContentChunks))
		}
	}
	for i := range c.done {
		if i >= len(st.Attempts) {
			viol = append(viol, fmt.Sprintf("OnAttemptDone for attempt %d not in Stats", i))
		}
	}
	// Prefix of a resume after commit: the delivered text.
	for _, o := range c.opens {
		if o.a.Trigger != hedgeprobe.TriggerResume || o.a.Index >= len(st.Attempts) {
			continue
		}
		a := st.Attempts[o.a.Index]
		if a.DeliveredBefore > 0 && int64(o.startW) != a.DeliveredBefore {
			viol = append(viol, fmt.Sprintf("resume attempt %d: Prefix has %d words, DeliveredBefore %d", o.a.Index, o.startW, a.DeliveredBefore))
		}
	}
	if len(c.opens) != len(st.Attempts) {
		viol = append(viol, fmt.Sprintf("%d Opens, %d attempts in Stats", len(c.opens), len(st.Attempts)))
	}
	c.mu.Unlock()
	// Spans.
	ended := ss.sr.Ended()
	spans := ended[ss.seen:]
	ss.seen = len(ended)
	var callSpan sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.Name() == "streamwatch.call" {
			if callSpan != nil {
				viol = append(viol, "two call spans")
			}
			callSpan = sp
		}
	}
	if callSpan == nil {
		viol = append(viol, "no call span ended")
		return res, viol
	}
	if v, _ := ivAttr(callSpan, semconv.Outcome); v.AsString() != string(st.Outcome) {
		viol = append(viol, fmt.Sprintf("call span outcome %q, Stats %q", v.AsString(), st.Outcome))
	}
	if v, ok := ivAttr(callSpan, semconv.CallerChunkOffsetsUs); int64(len(v.AsInt64Slice())) != st.ChunksDelivered {
		viol = append(viol, fmt.Sprintf("call span caller offsets %d (present %v), ChunksDelivered %d", len(v.AsInt64Slice()), ok, st.ChunksDelivered))
	}
	if v, _ := ivAttr(callSpan, semconv.Attempts); v.AsInt64() != int64(len(st.Attempts)) {
		viol = append(viol, fmt.Sprintf("call span attempts %d, Stats %d", v.AsInt64(), len(st.Attempts)))
	}
	seenIdx := map[int64]int{}
	for _, sp := range spans {
		if sp.Parent().SpanID() != callSpan.SpanContext().SpanID() {
			continue
		}
		iv, _ := ivAttr(sp, semconv.AttemptIndex)
		i := iv.AsInt64()
		seenIdx[i]++
		if i < 0 || i >= int64(len(st.Attempts)) {
			viol = append(viol, fmt.Sprintf("attempt span index %d", i))
			continue
		}
		a := st.Attempts[i]
		o, _ := ivAttr(sp, semconv.AttemptOutcome)
		cc, _ := ivAttr(sp, semconv.ChunkCount)
		cd, _ := ivAttr(sp, semconv.ChunksDelivered)
		if o.AsString() != string(a.Outcome) || cc.AsInt64() != a.ContentChunks || cd.AsInt64() != a.ChunksDelivered {
			viol = append(viol, fmt.Sprintf("attempt %d span outcome=%s count=%d delivered=%d, Stats outcome=%s content=%d delivered=%d",
				i, o.AsString(), cc.AsInt64(), cd.AsInt64(), a.Outcome, a.ContentChunks, a.ChunksDelivered))
		}
	}
	for i := range st.Attempts {
		if seenIdx[int64(i)] != 1 {
			viol = append(viol, fmt.Sprintf("attempt %d has %d spans", i, seenIdx[int64(i)]))
		}
	}
	return res, viol
}

var (
	invSeed     = flag.Uint64("invariants.seed", 20260611, "TestInvariantsRandom: the first session's seed")
	invSessions = flag.Int("invariants.sessions", 2000, "TestInvariantsRandom: sessions of 5 calls (1 reruns the session of -invariants.seed)")
	invTrace    = flag.String("invariants.trace", "", "TestInvariantsRandom: write each call's seed to this file")
)

var ivTrace *os.File

// earlyResume checks a resume event after commit that came before the
// caller had waited ResumeAfter (rule 10), at time at since the call's
// start; launched is the attempt it launched, or -1. It must come at the
// failure of an attempt: the last one live (the committed stream, or the
// last resume racing it after the stream failed), or a resume that failed
// with a transient error while only the silent stream lives — and then it
// launches on another route than the failed resume's. It returns what is
// wrong, or "".
func earlyResume(attempts []hedgeprobe.AttemptStats, at time.Duration, launched int) string {
	end := func(a hedgeprobe.AttemptStats) time.Duration { return a.LaunchOffset + a.Duration }
	// The attempts before the event: those launched before the one it
	// launched (a chain of failures and launches can share one instant),
	// else those launched before it.
	var before []hedgeprobe.AttemptStats
	if launched >= 0 && launched <= len(attempts) {
		before = attempts[:launched]
	} else {
		before = slices.DeleteFunc(slices.Clone(attempts), func(a hedgeprobe.AttemptStats) bool { return a.LaunchOffset >= at })
	}
	fi := -1 // the latest of them to fail then
	for i, a := range before {
		if a.Outcome == hedgeprobe.AttemptFailed && end(a) == at {
			fi = i
		}
	}
	if fi < 0 {
		return "no attempt failed then"
	}
	failed := before[fi]
	live := 0 // the others, live then
	for i, a := range before {
		if i != fi && end(a) > at {
			live++
		}
	}
	switch {
	case live == 0:
		return ""
	case live > 1:
		return fmt.Sprintf("attempt %d failed then, but %d other attempts were live", failed.Index, live)
	case failed.Trigger != hedgeprobe.TriggerResume || !hedgeprobe.IsTransient(failed.Err):
		return fmt.Sprintf("attempt %d (%s, %v) failed then while another attempt lived", failed.Index, failed.Trigger, failed.Err)
	case launched >= 0 && launched < len(attempts) && attempts[launched].Route == failed.Route:
		return fmt.Sprintf("the resume at once went back to %s, whose resume had just failed", failed.Route)
	}
	return ""
}

// TestInvariantsRandom runs random calls on random configurations and
// scripted upstreams in virtual time and checks the invariants after each
// (ivSession.run): the text exactly once, Stats against what Next
// returned, outcome against Err, hooks and spans against Stats, every
// Source closed once, no goroutine left, the watchdogs' and hedges' exact
// times, and of a continuation (with Items.Opening and Items.Follows in
// some sessions) no second opening, its early usage and what follows the
// answer delivered before its first word. Each session shares one Prober
// over 5 calls, so route health and the budget carry over. A violation names its seed: rerun it with
// -invariants.seed=N -invariants.sessions=1.
func TestInvariantsRandom(t *testing.T) {
	if *invTrace != "" {
		ivTrace, _ = os.Create(*invTrace)
		defer ivTrace.Close()
	}
	sessions, perSession := *invSessions, 5
	seed0 := *invSeed
	synctest.Test(t, func(t *testing.T) {
		calls, failures := 0, 0
		outcomes := map[hedgeprobe.Outcome]int{}
		triggers := map[hedgeprobe.Trigger]int{}
		seen := map[string]int{}
		for sn := range sessions {
			seed := seed0 + uint64(sn)
			r := rand.New(rand.NewPCG(seed, 1))
			ss := newIVSession(t, r)
			for ci := range perSession {
				if ivTrace != nil {
					fmt.Fprintf(ivTrace, "seed %d call %d\n", seed, ci)
				}
				res, viol := ss.run(r, seed, ci)
				calls++
				outcomes[res.st.Outcome]++
				for _, a := range res.st.Attempts {
					triggers[a.Trigger]++
				}
				if len(viol) == 0 {
					continue
				}
				failures++
				key := viol[0]
				if i := strings.IndexAny(key, "0123456789"); i > 0 {
					key = key[:i]
				}
				seen[key]++
				if seen[key] <= 2 {
					t.Errorf("violation (seed %d, call %d):\n  %s\n%s", seed, ci, strings.Join(viol, "\n  "), res.describe())
				}
			}
		}
		t.Logf("%d calls, %d with violations; outcomes %v; attempts by trigger %v; violation kinds %v", calls, failures, outcomes, triggers, seen)
	})
}
