//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/internal/testbed/loadgen"
	"github.com/streamwatch/streamwatch/internal/testbed/stack"
	"github.com/streamwatch/streamwatch/semconv"
)

// TestCrashShippedConfig kills a collector running deploy/collector.yaml
// as shipped (batch processor in front of the connector, Prometheus
// pulling) but for a 2 s connector interval, and measures what it loses
// against the bound of docs/scale.md: the batch processor's buffer (its
// 1 s timeout) + one connector interval + one scrape interval. The kill
// is timed to the worst moment, as TestReplicas' is: just before the
// next flush is seen in Prometheus. The gateway's bound, without a batch
// processor, is TestReplicas'.
func TestCrashShippedConfig(t *testing.T) {
	const (
		interval       = 2 * time.Second // STREAMWATCH_METRICS_INTERVAL
		batchTimeout   = time.Second     // deploy/collector.yaml's batch timeout
		scrapeInterval = time.Second     // stack.StartPrometheus scrapes every second
		rate           = 10              // requests a second, 1,000 calls a second
	)
	root := repoRoot(t)
	collectorBin, promBin := stackBinaries(t, root)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()

	col, prom := startScraped(ctx, t, dir, collectorBin, promBin,
		[]string{filepath.Join(root, "deploy", "collector.yaml")},
		"STREAMWATCH_METRICS_INTERVAL="+interval.String())

	reqs, err := loadgen.DefaultShape().Requests(16, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	calls := semconv.PromName(semconv.MetricCalls, semconv.UnitCall, true)
	// A flush shows in Prometheus at the scrape after it: four changes of
	// the count give the phase and the period of the flushes as
	// Prometheus sees them.
	c := crashBeforeFlush(ctx, t, prom, col, reqs, rate, fmt.Sprintf("sum(%s)", calls), interval, 4, 0)
	res, flushed, period, killed := c.sent, c.lastSeen, c.period, c.killed
	if res.Refused > 0 {
		t.Fatalf("%d requests refused; the bound is about acknowledged calls", res.Refused)
	}
	callsPerSecond := float64(res.Sent.Calls) / res.Elapsed.Seconds()

	// The scrape target is gone: Prometheus marks its series stale at the
	// next failed scrape, so the last value scraped is read over a range.
	time.Sleep(scrapeInterval)
	stored := scalarOr0(ctx, t, prom, fmt.Sprintf("sum(last_over_time(%s[1m]))", calls))
	lost := float64(res.Sent.Calls) - stored
	lostSeconds := lost / callsPerSecond
	bound := (batchTimeout + interval + scrapeInterval).Seconds() + 1.0/rate
	t.Logf("killed the collector: it acknowledged %d calls, Prometheus holds %.0f: lost %.0f calls = %.2f s of its traffic (%.0f calls/s; bound %.2f s: batch %s + interval %s + scrape %s + one request)",
		res.Sent.Calls, stored, lost, lostSeconds, callsPerSecond, bound, batchTimeout, interval, scrapeInterval)
	if lost < 0 {
		t.Fatalf("Prometheus holds more calls (%.0f) than the collector acknowledged (%d)", stored, res.Sent.Calls)
	}
	if stored == 0 {
		t.Fatalf("Prometheus holds no call: nothing was scraped before the kill, so the test measured nothing")
	}
	// 1 s of slack (as in TestReplicas' crashLoss): the pacing of the
	// load and a scrape that comes late on a loaded machine (one scrape
	// interval).
	if lostSeconds > bound+1 {
		t.Errorf("lost %.2f s of traffic, bound %.2f s", lostSeconds, bound)
	}
	// The bound's three terms are not all of the same certainty: the
	// batch buffer and the scrape's lag vary from kill to kill, so a loss
	// within bound+1 does not show that the interval is the one the bound
	// assumes. The flushes' period does: the median of three periods
	// seen, each a scrape off the interval at worst.
	if limit := interval + scrapeInterval/2; period > limit {
		t.Errorf("flushes seen %v apart, more than the interval %s", period.Round(time.Millisecond), interval)
	}
	// And what is lost came in after the snapshot Prometheus holds: at
	// most since the flush seen last (which preceded it by up to a
	// scrape), plus what the batch processor held then.
	since := killed.Sub(flushed)
	t.Logf("killed the collector %v after the flush seen last (flushes seen %v apart)", since.Round(time.Millisecond), period.Round(time.Millisecond))
	if most := (since + scrapeInterval + batchTimeout).Seconds() + 1.0/rate + 0.5; lostSeconds > most {
		t.Errorf("lost %.2f s of traffic, more than the %.2f s since the snapshot Prometheus holds and the batch", lostSeconds, most)
	}
}

// killLead is how long before the next push a crash test kills its
// collector: late enough that nearly a whole interval is lost, early
// enough that the push has not begun on a loaded machine.
const killLead = 300 * time.Millisecond

// crash is what crashBeforeFlush did.
type crash struct {
	sent             loadgen.Result // what the collector acknowledged
	lastSeen, killed time.Time      // the flush seen last; the kill
	period           time.Duration  // between flushes, as seen
}

// crashBeforeFlush sends reqs to col at rate requests a second until its
// next flush is killLead from showing in Prometheus (pushesSeen on query,
// with n, merge), then stops the load and kills col with SIGKILL right
// after its last acknowledged request: the worst moment for a crash, the
// one that loses nearly a whole interval.
func crashBeforeFlush(ctx context.Context, t *testing.T, prom *stack.Prometheus, col *stack.Collector, reqs []loadgen.Request, rate float64, query string, interval time.Duration, n int, merge time.Duration) crash {
	t.Helper()
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	type sent struct {
		res loadgen.Result
		err error
	}
	done := make(chan sent, 1)
	go func() {
		res, err := loadgen.Send(sendCtx, loadgen.Options{
			Targets:  []string{col.OTLPGRPC},
			Requests: reqs,
			Senders:  1,
			Rate:     rate,
			Duration: time.Minute,
		})
		done <- sent{res, err}
	}()
	lastSeen, period := pushesSeen(ctx, t, prom, query, interval, n, merge)
	time.Sleep(time.Until(lastSeen.Add(period - killLead)))
	stopSending()
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	col.Kill()
	return crash{sent: s.res, lastSeen: lastSeen, killed: time.Now(), period: period}
}

// pushesSeen polls query, a collector's count in Prometheus, while load
// runs, until it has seen n changes, and returns when the latest was seen
// and the median time between them: the phase and the period of the
// collector's flushes as Prometheus sees them — measured, not assumed, so
// that a collector that flushes less often than a bound assumes is killed
// late in its own interval. Changes less than merge apart are one push
// (the remote-write exporter may split one push into two writes; a
// scraped count changes once a flush). A scraped flush is seen at the
// first scrape after it, so one period seen may be a scrape off the
// interval either way (the first under load often is); the median of
// several is not.
func pushesSeen(ctx context.Context, t *testing.T, prom *stack.Prometheus, query string, interval time.Duration, n int, merge time.Duration) (time.Time, time.Duration) {
	t.Helper()
	last := scalarOr0(ctx, t, prom, query)
	var pushes []time.Time
	deadline := time.Now().Add(time.Duration(n+8) * interval)
	for len(pushes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d changes of %s seen in %v under load", len(pushes), query, time.Duration(n+8)*interval)
		}
		time.Sleep(50 * time.Millisecond)
		if v := scalarOr0(ctx, t, prom, query); v != last {
			last = v
			if now := time.Now(); len(pushes) == 0 || now.Sub(pushes[len(pushes)-1]) >= merge {
				pushes = append(pushes, now)
			}
		}
	}
	gaps := make([]time.Duration, n-1)
	for i := range gaps {
		gaps[i] = pushes[i+1].Sub(pushes[i])
	}
	slices.Sort(gaps)
	return pushes[n-1], gaps[(n-1)/2]
}
