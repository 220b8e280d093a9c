package hedgeprobe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestAttemptLanes: an attempt takes the lowest lane no running attempt
// of its call holds. The primary (lane 0) is slow; the TTFT hedge races it
// in lane 1, wins, and the primary, cancelled, frees lane 0; the hedge's
// answer then falls silent, and the resume that races it takes lane 0
// again. Open's context carries each attempt's lane.
func TestAttemptLanes(t *testing.T) {
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
				lane, ok := LaneFromContext(ctx)
				mu.Lock()
				fromCtx = append(fromCtx, fmt.Sprintf("%d:%d:%v", at.Index, lane, ok))
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
		var lanes []string
		for _, at := range append(a.attempts(), b.attempts()...) {
			lanes = append(lanes, fmt.Sprintf("%d:%v:%d", at.Index, at.Trigger, at.Lane))
		}
		if got := fmt.Sprint(lanes); got != "[0:primary:0 2:resume:0 1:ttft:1]" {
			t.Errorf("attempts (index:trigger:lane) %s", got)
		}
		if got := fmt.Sprint(fromCtx); got != "[0:0:true 1:1:true 2:0:true]" {
			t.Errorf("LaneFromContext in Open (index:lane:ok) %s", got)
		}
		if _, ok := LaneFromContext(t.Context()); ok {
			t.Error("a lane outside any attempt")
		}
	})
}
