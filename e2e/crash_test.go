//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/internal/testbed/loadgen"
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
