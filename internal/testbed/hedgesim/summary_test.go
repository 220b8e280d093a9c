package hedgesim

import (
	"errors"
	"testing"
	"time"
)

// results are n calls, the first ok ones done at 1…ok ms, the rest failed
// at once (1 µs): fast failures, which Done would put first.
func results(n, ok int) []Result {
	res := make([]Result, n)
	for i := range res {
		if i < ok {
			res[i] = Result{OK: true, Done: time.Duration(i+1) * time.Millisecond, TTFT: time.Millisecond, AnswerTTFT: time.Millisecond}
		} else {
			res[i] = Result{Done: time.Microsecond, TTFT: -1, AnswerTTFT: -1, Err: errors.New("failed")}
		}
	}
	return res
}

// A failed call counts as never done in DoneNever: at 1 % failed the p99
// is still an ok call's (the 990th of 1,000), one more failure makes it
// "failed"; the p99.9 is "failed" in both. Done puts the fast failures
// first and DoneOK leaves them out.
func TestSummaryFailedCallNeverDone(t *testing.T) {
	s := summarize(results(1000, 990))
	if s.DoneNever[1] != 990*time.Millisecond || s.DoneNever[2] != Never {
		t.Errorf("10 of 1,000 failed: DoneNever p99 %v, p99.9 %v; want 990ms and Never", s.DoneNever[1], s.DoneNever[2])
	}
	if s.Done[1] != 980*time.Millisecond || s.DoneOK[1] != 981*time.Millisecond {
		t.Errorf("Done p99 %v (the 10 failures counted at 1µs first), DoneOK p99 %v; want 980ms and 981ms", s.Done[1], s.DoneOK[1])
	}
	s = summarize(results(1000, 989))
	if s.DoneNever[1] != Never {
		t.Errorf("11 of 1,000 failed: DoneNever p99 %v, want Never", s.DoneNever[1])
	}
	if got := sec(s.DoneNever[1]); got != "failed" {
		t.Errorf("the report shows Never as %q, want failed", got)
	}
}

// A restarted answer keeps the TTFT its caller saw; the kept answer's
// TTFT is counted over the ok calls, and the restarts are counted.
func TestSummaryRestartedAnswers(t *testing.T) {
	res := results(10, 10)
	for i := range 3 {
		res[i].Restarted, res[i].AnswerTTFT = true, 40*time.Second
	}
	s := summarize(res)
	if s.Restarted != 3 {
		t.Errorf("Restarted %d, want 3", s.Restarted)
	}
	if s.TTFT[1] != time.Millisecond || s.AnswerTTFT[1] != 40*time.Second || s.AnswerTTFT[0] != time.Millisecond {
		t.Errorf("TTFT p99 %v, kept answer's TTFT p50 %v p99 %v; want 1ms, 1ms, 40s", s.TTFT[1], s.AnswerTTFT[0], s.AnswerTTFT[1])
	}
}

// CallSilenceShare makes every attempt of the calls it draws fall
// silent, and leaves every other draw as it was; NoContinuation makes
// the routes unable to continue.
func TestScenarioAssumptions(t *testing.T) {
	base := SeedScenario(2000)
	callWide := base
	callWide.CallSilenceShare = 0.05
	silentCalls := 0
	for call := range base.Calls {
		every := true
		for _, route := range []string{Primary, Secondary} {
			for k := range 3 {
				b, c := base.draw(call, route, k, true), callWide.draw(call, route, k, true)
				if b.stallAt >= 0 && (c.stallAt != b.stallAt || c.stall != b.stall) {
					t.Fatalf("call %d %s #%d: an attempt's own silence changed: %+v → %+v", call, route, k, b, c)
				}
				if b.ttft != c.ttft || b.status != c.status || b.gapSeed != c.gapSeed {
					t.Fatalf("call %d %s #%d: a draw other than the silence changed: %+v → %+v", call, route, k, b, c)
				}
				every = every && c.stallAt >= 0
			}
		}
		if every {
			silentCalls++
		}
	}
	// 5 % of 2,000 call-wide, plus the few whose six attempts all fell
	// silent on their own (10 %^6).
	if silentCalls < 70 || silentCalls > 130 {
		t.Errorf("%d of 2,000 calls silent on every attempt, want about 100", silentCalls)
	}

	noCont := base
	noCont.NoContinuation = true
	if (&call{sc: &base}).route(Primary).Continues != true || (&call{sc: &noCont}).route(Primary).Continues != false {
		t.Error("NoContinuation does not decide Route.Continues")
	}
}
