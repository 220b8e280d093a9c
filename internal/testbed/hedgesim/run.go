package hedgesim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Report holds every strategy's calls on one scenario.
type Report struct {
	// Scenario is what was played.
	Scenario Scenario
	// Rows are the strategies in report order.
	Rows []Row
	// Wall is the real time the run took.
	Wall time.Duration
}

// Row is one strategy's results.
type Row struct {
	// Strategy is what made the calls.
	Strategy Strategy
	// Results holds one entry per call, in call order.
	Results []Result
	// Summary is derived from Results.
	Summary Summary
	// Refused429 counts the strategy's attempts the 429 storm refused.
	Refused429 int
}

// Run plays sc.Calls calls through every strategy of Strategies, each
// strategy on its own goroutine starting its calls sc.Interarrival apart
// (or one after another). It must run inside a synctest bubble (see
// SwapHedgedQueue for hedgedhttp).
func Run(ctx context.Context, sc Scenario) (*Report, error) {
	strategies, err := Strategies()
	if err != nil {
		return nil, err
	}
	return RunWith(ctx, sc, strategies)
}

// RunWith is Run with the given strategies.
func RunWith(ctx context.Context, sc Scenario, strategies []Strategy) (*Report, error) {
	rep := &Report{Scenario: sc, Rows: make([]Row, len(strategies))}
	var wg sync.WaitGroup
	for i, s := range strategies {
		rep.Rows[i].Strategy = s
		wg.Go(func() {
			// Each strategy meets upstreams of its own: its load, not
			// another row's, fills the storm's rate limit.
			st := newStorm(&rep.Scenario)
			res := make([]Result, sc.Calls)
			var calls sync.WaitGroup
			for n := range res {
				if sc.Interarrival <= 0 {
					res[n] = s.run(ctx, &call{sc: &rep.Scenario, index: n, faults: true, storm: st})
					continue
				}
				if n > 0 {
					time.Sleep(sc.Interarrival)
				}
				calls.Go(func() { res[n] = s.run(ctx, &call{sc: &rep.Scenario, index: n, faults: true, storm: st}) })
			}
			calls.Wait()
			rep.Rows[i].Results = res
			rep.Rows[i].Refused429 = st.Refused()
			rep.Rows[i].Summary = summarize(res)
		})
	}
	wg.Wait()
	return rep, ctx.Err()
}

// Row returns the row named name, or nil.
func (r *Report) Row(name string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Strategy.Name == name {
			return &r.Rows[i]
		}
	}
	return nil
}

// Summary is the figures of one strategy.
type Summary struct {
	// Calls is the number of calls summarized.
	Calls int
	// OK is the share of calls that got the whole answer.
	OK float64
	// Done and TTFT are the p50, p99 and p99.9 of completion and of caller
	// TTFT. TTFT covers the calls that delivered at least one chunk
	// (TTFTCalls of them).
	Done, TTFT [3]time.Duration
	TTFTCalls  int
	// DoneOK is the p50, p99 and p99.9 of completion over the calls that
	// got the whole answer: Done counts a failed call at its failure, so
	// a strategy whose failures come fast (a 503 at once) looks faster in
	// the tail than one that rescues those calls.
	DoneOK [3]time.Duration
	// DoneNever is the p50, p99 and p99.9 of completion with every failed
	// call counted as never done (Never): the quantile a caller who needs
	// the answer lives with. Done flatters fast failures and DoneOK drops
	// them; this one says "failed" where more than 1 % (0.1 %) of calls do.
	DoneNever [3]time.Duration
	// Restarted counts the calls whose answer a retry started again after
	// the caller had been given content of it (Result.Restarted).
	Restarted int
	// AnswerTTFT is the p50, p99 and p99.9, over the calls that got the
	// whole answer, of the time to the first chunk of the answer kept: a
	// restarted call's TTFT is the first chunk it showed its caller, this
	// the first of the text it ended with.
	AnswerTTFT [3]time.Duration
	// ExtraAttempts is (attempts − calls) / calls: hedges and retries.
	ExtraAttempts float64
	// Hedges, Streams, Throttled and ThrottledPushback are totals over
	// the calls.
	Hedges, Streams, Throttled, ThrottledPushback int
	// ByTrigger totals Result.ByTrigger.
	ByTrigger [4]int
	// Failures counts failed calls by cause (see cause).
	Failures map[string]int
	// Wasted is the total of content chunks received and not part of
	// the answer (see Result.Wasted).
	Wasted int64
}

var quantiles = [3]float64{0.50, 0.99, 0.999}

// Never stands, in DoneNever, for the completion of a call that failed.
const Never = time.Duration(math.MaxInt64)

func summarize(res []Result) Summary {
	s := Summary{Calls: len(res), Failures: map[string]int{}}
	done := make([]time.Duration, 0, len(res))
	doneOK := make([]time.Duration, 0, len(res))
	never := make([]time.Duration, 0, len(res))
	answerTTFT := make([]time.Duration, 0, len(res))
	ttft := make([]time.Duration, 0, len(res))
	attempts, ok := 0, 0
	for _, r := range res {
		done = append(done, r.Done)
		if r.TTFT >= 0 {
			ttft = append(ttft, r.TTFT)
		}
		if r.Restarted {
			s.Restarted++
		}
		if r.OK {
			ok++
			doneOK = append(doneOK, r.Done)
			never = append(never, r.Done)
			answerTTFT = append(answerTTFT, r.AnswerTTFT)
		} else {
			s.Failures[cause(r.Err)]++
			never = append(never, Never)
		}
		attempts += r.Attempts
		s.Hedges += r.Hedges
		s.Streams += r.Streams
		s.Throttled += r.Throttled
		s.ThrottledPushback += r.ThrottledPushback
		for i, n := range r.ByTrigger {
			s.ByTrigger[i] += n
		}
		s.Wasted += r.Wasted
	}
	s.OK = float64(ok) / float64(max(len(res), 1))
	s.ExtraAttempts = float64(attempts-len(res)) / float64(max(len(res), 1))
	s.TTFTCalls = len(ttft)
	s.Done = percentiles(done)
	s.DoneOK = percentiles(doneOK)
	s.DoneNever = percentiles(never)
	s.AnswerTTFT = percentiles(answerTTFT)
	s.TTFT = percentiles(ttft)
	return s
}

// percentiles are nearest-rank: the smallest value with at least q of the
// sample at or below it, so p99.9 of 2,000 calls is the 1,998th: the
// third worst.
func percentiles(d []time.Duration) (out [3]time.Duration) {
	if len(d) == 0 {
		return out
	}
	slices.Sort(d)
	for i, q := range quantiles {
		k := int(q*float64(len(d))+0.999999) - 1
		out[i] = d[min(max(k, 0), len(d)-1)]
	}
	return out
}

// Markdown renders the scenario, the strategies and the table.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Scenario\n\n%s\n### Strategies\n\n", r.Scenario.Markdown())
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "* **%s**: %s\n", row.Strategy.Name, row.Strategy.Config)
	}
	fmt.Fprintf(&b, "\n### Results (%d calls per strategy, virtual time; wall %v)\n\n", r.Scenario.Calls, r.Wall.Round(time.Millisecond))
	b.WriteString("| strategy | ok | completion p50 | p99 | p99.9 | TTFT p50 | p99 | p99.9 | extra attempts/call | wasted chunks/call | hedges throttled |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		s := row.Summary
		fmt.Fprintf(&b, "| %s | %.2f %% | %s | %s | %s | %s | %s | %s | %.3f | %.2f | %d |\n",
			row.Strategy.Name, 100*s.OK, sec(s.Done[0]), sec(s.Done[1]), sec(s.Done[2]),
			sec(s.TTFT[0]), sec(s.TTFT[1]), sec(s.TTFT[2]),
			s.ExtraAttempts, float64(s.Wasted)/float64(max(s.Calls, 1)), s.Throttled)
	}
	b.WriteString("\n| strategy | completion p99 / p99.9, a failed call never done | ok calls' completion p99 / p99.9 | answers restarted | kept answer's TTFT p99 | hedges/call | ttft / stall / error / resume | retries/call | throttled: budget / pushback | failed calls by cause |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range r.Rows {
		s := row.Summary
		n := float64(max(s.Calls, 1))
		retries := 0.0
		if s.Streams > 0 {
			retries = float64(s.Streams-s.Calls) / n
		}
		fmt.Fprintf(&b, "| %s | %s / %s | %s / %s | %d | %s | %.3f | %d / %d / %d / %d | %.3f | %d / %d | %s |\n", row.Strategy.Name,
			sec(s.DoneNever[1]), sec(s.DoneNever[2]), sec(s.DoneOK[1]), sec(s.DoneOK[2]), s.Restarted, sec(s.AnswerTTFT[1]), float64(s.Hedges)/n,
			s.ByTrigger[byTTFT], s.ByTrigger[byStall], s.ByTrigger[byError], s.ByTrigger[byResume], retries,
			s.Throttled-s.ThrottledPushback, s.ThrottledPushback, failures(s.Failures))
	}
	b.WriteString("\nCompletion: call start → last content chunk delivered, or → failure; the second table counts a failed call as never done (\"failed\" where the quantile lands on one), then leaves failed calls out. TTFT: call start → first content chunk delivered, over calls that delivered one; an answer restarted by a retry keeps the first chunk its caller saw, and the kept answer's TTFT is the first chunk of the text the call ended with. Percentiles are nearest-rank.\n")
	return b.String()
}

// cause names the error a failed call ended with.
func cause(err error) string {
	var se *StatusError
	var te *hedgeprobe.TimeoutError
	switch {
	case errors.As(err, &se):
		return strconv.Itoa(se.Code)
	case errors.As(err, &te):
		return string(te.Kind) + " timeout"
	case errors.Is(err, ErrGarbled):
		return "garbled"
	case err == nil:
		return "incomplete"
	default:
		return fmt.Sprintf("%T", err)
	}
}

func failures(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sec(d time.Duration) string {
	if d == Never {
		return "failed"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
