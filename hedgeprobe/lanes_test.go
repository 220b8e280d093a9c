package hedgeprobe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestAttemptIndexInContext: the context Open is given carries the
// attempt's index, for a transport to tell a call's attempts apart
// (sse.Lanes). The primary is slow; the TTFT hedge wins, the hedge's
// answer falls silent, and a resume continues it: three attempts, each
// with its own index in its context — the resume's too, though the
// primary it follows in the route list has ended by then.
func TestAttemptIndexInContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := continuing("a",
			[]step{content(5*time.Second, "late"), hang()},
			[]step{content(100*time.Millisecond, " world")})
		b := continuing("b", []step{content(100*time.Millisecond, "Hel"), content(10*time.Millisecond, "lo"), hang()})
		var (
			mu      sync.Mutex
			fromCtx []string
		)
		wrap := func(u *upstream) Route[chunk] {
			r := u.route()
			r.Open = func(ctx context.Context, at Attempt) (Source[chunk], error) {
				i, ok := AttemptIndexFromContext(ctx)
				mu.Lock()
				fromCtx = append(fromCtx, fmt.Sprintf("%d:%v:%d:%v", at.Index, at.Trigger, i, ok))
				mu.Unlock()
				return u.open(ctx, at)
			}
			return r
		}
		p := mustNew(t, Config{HedgeAfter: time.Second, ResumeAfter: 2 * time.Second, MaxAttempts: 3}, withText())
		s := p.Stream(t.Context(), wrap(a), wrap(b))
		g := drain(s, time.Now())
		if g.err != nil || joined(g) != "Hello world" {
			t.Fatalf("text %q err %v", joined(g), g.err)
		}
		if got := fmt.Sprint(fromCtx); got != "[0:primary:0:true 1:ttft:1:true 2:resume:2:true]" {
			t.Errorf("in Open (index:trigger:index in context:ok) %s", got)
		}
		if _, ok := AttemptIndexFromContext(t.Context()); ok {
			t.Error("an attempt index outside any attempt")
		}
	})
}
