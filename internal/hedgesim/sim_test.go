package hedgesim

import (
	"flag"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

var (
	callsFlag = flag.Int("calls", 0, "calls per strategy for TestSimulationReport (0: skip the report)")
)

// simulate runs sc in one synctest bubble and returns the report.
func simulate(t *testing.T, sc Scenario) *Report {
	t.Helper()
	// hedgedhttp keeps timers in a sync.Pool; a timer made in an earlier
	// bubble must not be reused in this one. Two GCs empty a sync.Pool
	// (primary, then victim cache).
	runtime.GC()
	runtime.GC()
	var rep *Report
	wall := time.Now()
	var restore func()
	synctest.Test(t, func(t *testing.T) {
		restore = SwapHedgedQueue()
		var err error
		rep, err = Run(t.Context(), sc)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Let hedgedhttp's idle pool workers time out and exit, so the
		// bubble ends with no goroutine left.
		time.Sleep(HedgedIdle)
	})
	restore()
	if rep != nil {
		rep.Wall = time.Since(wall)
	}
	return rep
}

func TestSimulation(t *testing.T) {
	sc := DefaultScenario(2000)
	rep := simulate(t, sc)
	if t.Failed() {
		return
	}
	t.Logf("\n%s", rep.Markdown())
	_ = fmt.Sprint
}
