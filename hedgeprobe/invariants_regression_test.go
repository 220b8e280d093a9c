package hedgeprobe_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// ivScriptRoute is a route "r0" that continues, whose attempt i plays
// script[i].
func ivScriptRoute(script map[int][]ivOp) hedgeprobe.Route[ivItem] {
	return hedgeprobe.Route[ivItem]{Name: "r0", Continues: true,
		Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[ivItem], error) {
			return &ivSrc{ctx: ctx, ops: script[a.Index], closed: make(chan struct{})}, nil
		}}
}

// ivReadText reads s to its end and returns the text of what Next gave.
func ivReadText(s *hedgeprobe.Stream[ivItem]) string {
	var text string
	for s.Next() {
		text += s.Current().Text
	}
	return text
}

func ivContent(after time.Duration, j int) ivOp {
	return ivOp{after: after, item: ivItem{Kind: hedgeprobe.Content, Text: ivWord(j), Word: j}}
}

// Regression, found by TestInvariantsRandom: a resume attempt that had won
// the race and delivered content, then failed with a fatal error
// mid-stream, was taken for a route that refused the continuation: the
// call's Err was the stale error of an earlier, transient failure instead
// of the winner's fatal one, a ResumeEvent with Skipped "refused" was
// reported for a resume that had been launched and won, and the route was
// barred from resuming for ResumeRefusedFor, so the next call's resume was
// skipped with "no_route". Only a fatal error before the continuation's
// first content is a refusal.
func TestRegressionResumeFatalMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []hedgeprobe.ResumeEvent
		p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: 10 * time.Second, ResumeAfter: time.Second,
			MaxAttempts: 3, EjectFailures: hedgeprobe.NoEjection}, ivItems,
			hedgeprobe.OnResume(func(e hedgeprobe.ResumeEvent) { events = append(events, e) }))
		if err != nil {
			t.Fatal(err)
		}
		script := map[int][]ivOp{
			// primary: one word, then a transient error (resume at once)
			0: {ivContent(100*time.Millisecond, 0), {after: 100 * time.Millisecond, err: &ivStatusErr{503}}},
			// the continuation: two words, then a fatal error mid-stream
			1: {ivContent(100*time.Millisecond, 1), ivContent(100*time.Millisecond, 2), {after: 100 * time.Millisecond, err: &ivStatusErr{400}}},
		}
		s := p.Stream(context.Background(), ivScriptRoute(script))
		text := ivReadText(s)
		st := s.Stats()
		t.Logf("text %q outcome %s Err %v winner %d (%s, err %v)", text, st.Outcome, s.Err(), st.Winner,
			st.Attempts[st.Winner].Outcome, st.Attempts[st.Winner].Err)
		if text != "w0.w1.w2." {
			t.Fatalf("text %q", text)
		}
		var se *ivStatusErr
		if !errors.As(s.Err(), &se) || se.code != 400 {
			t.Errorf("Err = %v, want the winner's fatal status 400 (the attempt that ended the call); IsTransient(Err) = %v", s.Err(), hedgeprobe.IsTransient(s.Err()))
		}
		for _, e := range events {
			if e.Skipped == hedgeprobe.ResumeRefused {
				t.Errorf("ResumeEvent{Attempt: %d, Skipped: refused} for a resume that was launched, won and delivered %d chunks", e.Attempt, st.Attempts[e.Attempt].ChunksDelivered)
			}
		}
		// The next call on the route: primary stalls after one word; a
		// resume is due after 1s.
		events = nil
		script = map[int][]ivOp{
			0: {ivContent(100*time.Millisecond, 0), ivContent(5*time.Second, 1)},
			1: {ivContent(100*time.Millisecond, 1)},
		}
		s = p.Stream(context.Background(), ivScriptRoute(script))
		for s.Next() {
		}
		if len(events) == 0 {
			t.Fatal("second call: no resume was tried; the checks below would pass on nothing")
		}
		for _, e := range events {
			if e.Skipped != "" {
				t.Errorf("second call: resume skipped %q (route barred by the first call's mid-stream error)", e.Skipped)
			}
		}
	})
}

// Regression, the same cause with a worse effect: the stale error was a
// pre-commit attempt stall timeout, so a call whose caller got every chunk
// of a committed answer and that ended on the resume winner's fatal 400
// reported outcome stall_timeout, with a TimeoutError saying 0 delivered,
// not truncated.
func TestRegressionResumeFatalMidStreamStallOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: 10 * time.Second, ResumeAfter: time.Second,
			StallTimeout: 3 * time.Second, HoldChunks: 2, MaxAttempts: 3, EjectFailures: hedgeprobe.NoEjection}, ivItems)
		if err != nil {
			t.Fatal(err)
		}
		script := map[int][]ivOp{
			// primary: one word, then silent past StallTimeout before commit
			0: {ivContent(100*time.Millisecond, 0), ivContent(time.Hour, 1)},
			// error hedge: commits at its second word, then falls silent
			1: {ivContent(100*time.Millisecond, 0), ivContent(100*time.Millisecond, 1), {hang: true}},
			// the resume: one word, then a fatal error mid-stream
			2: {ivContent(100*time.Millisecond, 2), {after: 100 * time.Millisecond, err: &ivStatusErr{400}}},
		}
		s := p.Stream(context.Background(), ivScriptRoute(script))
		text := ivReadText(s)
		st := s.Stats()
		for _, a := range st.Attempts {
			t.Logf("attempt %d %s %s delivered %d err %v", a.Index, a.Trigger, a.Outcome, a.ChunksDelivered, a.Err)
		}
		t.Logf("text %q outcome %s Err %v", text, st.Outcome, s.Err())
		if st.Outcome != hedgeprobe.OutcomeError {
			t.Errorf("outcome %s, want error (the committed resume failed with a fatal 400); Err %v", st.Outcome, s.Err())
		}
	})
}
