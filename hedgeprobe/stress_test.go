package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// randomScript returns the script of one attempt: a lognormal first chunk,
// sometimes a long silence, keepalives and controls, sometimes an error
// (transient or fatal) or a hang. Every item's text names its attempt
// script ("o<open>.<index>") so the caller can check what it received.
func randomScript(r *rand.Rand, open int) []step {
	n := 1 + r.IntN(12)
	out := make([]step, 0, n+2)
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	for i := range n {
		var d time.Duration
		if i == 0 {
			d = ms(1600 * math.Exp(r.NormFloat64()*0.8))
		} else {
			d = ms(r.ExpFloat64() * 30)
		}
		if r.IntN(20) == 0 {
			d += ms(r.ExpFloat64() * 55000) // a mid-stream silence
		}
		k := Content
		switch r.IntN(8) {
		case 0:
			k = Keepalive
		case 1:
			k = Control
		}
		out = append(out, step{after: d, kind: k, text: fmt.Sprintf("o%d.%d", open, i)})
	}
	switch r.IntN(12) {
	case 0:
		out = append(out, fail(ms(r.ExpFloat64()*100), &statusErr{code: 503}))
	case 1:
		out = append(out, fail(ms(r.ExpFloat64()*100), &statusErr{code: 400}))
	case 2:
		out = append(out, hang())
	case 3:
		out = out[:r.IntN(len(out))] // ends early, maybe with nothing
		out = append(out, fail(ms(r.ExpFloat64()*10), &statusErr{code: 429, after: ms(r.ExpFloat64() * 1000)}))
	}
	return out
}

// checkReceived verifies the caller got the items of exactly one attempt,
// in order, exactly once, and all of them when the call ended cleanly.
func checkReceived(ups []*upstream, g got) error {
	open := -1
	route := ""
	for i, txt := range g.texts {
		o, idx, ok := strings.Cut(strings.TrimPrefix(txt, "o"), ".")
		if !ok {
			return fmt.Errorf("item %q", txt)
		}
		on, _ := strconv.Atoi(o)
		ix, _ := strconv.Atoi(idx)
		var r string
		for k, v := range g.from {
			if v > 0 {
				r = k
			}
		}
		if i == 0 {
			open, route = on, r
		}
		if on != open || ix != i || len(g.from) != 1 || r != route {
			return fmt.Errorf("item %d is %q from %v: interleaved, reordered or repeated", i, txt, g.from)
		}
	}
	if g.err == nil && len(g.texts) > 0 {
		for _, u := range ups {
			if u.name != route {
				continue
			}
			want := 0
			for _, st := range u.scripts[min(open, len(u.scripts)-1)] {
				if st.err == nil && !st.end {
					want++
				}
			}
			if want != len(g.texts) {
				return fmt.Errorf("clean end after %d of %d items", len(g.texts), want)
			}
		}
	}
	return nil
}

// 10,000 calls with random timings, errors and cancellations in virtual
// time, 50 at a time on shared Probers: every call ends, the caller gets
// the items of exactly one attempt in order exactly once, every opened
// source is closed exactly once, no goroutine survives (synctest fails a
// bubble with a durably blocked goroutine; goleak checks the rest).
func TestStress(t *testing.T) {
	calls := 10000
	if testing.Short() {
		calls = 1000
	}
	synctest.Test(t, func(t *testing.T) {
		// Two of the Probers record spans, so telemetry sees every path too.
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
		defer tp.Shutdown(context.Background())
		probers := []*Prober[chunk]{
			mustNew(t, Config{MaxAttempts: 3, StallTimeout: 20 * time.Second, TTFTTimeout: 30 * time.Second, HedgeBudget: 0.3}, WithTracerProvider(tp), WithChunkEvents(true)),
			mustNew(t, Config{HedgeAfter: 2 * time.Second, StallAfter: 3 * time.Second, HoldChunks: 3, StallTimeout: 10 * time.Second}),
			mustNew(t, Config{HedgeAfter: time.Second, StallAfter: 5 * time.Second, Delivery: Buffered, MaxAttempts: 4, TTFTTimeout: 60 * time.Second, StallTimeout: 40 * time.Second}, WithTracerProvider(tp)),
			mustNew(t, Config{MaxAttempts: 1}),
		}
		const workers = 50
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		outcomes := make([]map[Outcome]int, workers)
		for w := range workers {
			outcomes[w] = map[Outcome]int{}
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 42))
				for c := w; c < calls; c += workers {
					ups := make([]*upstream, 1+r.IntN(3))
					routes := make([]Route[chunk], len(ups))
					for i := range ups {
						scripts := make([][]step, 5)
						for o := range scripts {
							scripts[o] = randomScript(r, o)
						}
						ups[i] = newUpstream(fmt.Sprintf("c%d-r%d", c, i), scripts...)
						routes[i] = ups[i].route()
					}
					ctx, cancel := context.WithCancel(context.Background())
					if r.IntN(10) == 0 {
						time.AfterFunc(time.Duration(r.ExpFloat64()*float64(3*time.Second)), cancel)
					}
					s := probers[r.IntN(len(probers))].Stream(ctx, routes...)
					var g got
					if r.IntN(10) == 0 {
						// The caller stops early.
						g = got{from: map[string]int{}}
						for i := r.IntN(3); i > 0 && s.Next(); i-- {
							g.texts = append(g.texts, s.Current().Text)
							g.from[s.Current().Route]++
						}
						s.Close()
						g.err = errors.New("closed early")
					} else {
						g = drain(s, time.Now())
					}
					cancel()
					st := s.Stats()
					outcomes[w][st.Outcome]++
					err := checkReceived(ups, g)
					if err == nil && st.Outcome == OutcomeRunning {
						err = errors.New("call did not end")
					}
					for _, u := range ups {
						for i, n := range u.closes() {
							if n != 1 && err == nil {
								err = fmt.Errorf("route %s source %d closed %d times", u.name, i, n)
							}
						}
					}
					if err != nil {
						errs <- fmt.Errorf("call %d: %w (stats %+v)", c, err, st)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Every admission left route health's grace-period count once: one
		// left behind would keep every ejection for good, one left twice
		// would forget an ejection while a stream it makes stale runs.
		for i, p := range probers {
			if n := p.health.live[0].Load() + p.health.live[1].Load(); n != 0 {
				t.Errorf("prober %d: %d admissions counted after every call ended", i, n)
			}
		}
		total := map[Outcome]int{}
		for _, m := range outcomes {
			for k, v := range m {
				total[k] += v
			}
		}
		t.Logf("outcomes: %v", total)
		for _, o := range []Outcome{OutcomeOK, OutcomeError, OutcomeCanceled, OutcomeStallTimeout, OutcomeTTFTTimeout} {
			if total[o] == 0 {
				t.Errorf("no call ended %q: the script does not cover it", o)
			}
		}
	})
}
