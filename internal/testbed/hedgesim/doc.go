// Package hedgesim measures hedge effectiveness (docs/design.md §6): it plays
// thousands of calls against scripted upstreams in virtual time and runs
// every strategy — the no-fault oracle, no hedge, header-level hedging with
// the real cristalhq/hedgedhttp, TTFT-only hedging, watchdog + retry, and
// hedgeprobe in each delivery mode — on the same scripted call list, then
// prints percentiles side by side.
//
// Run must be called inside a testing/synctest bubble: every wait in the
// scripted upstreams is a timer, so a call that takes minutes of upstream
// time costs microseconds of wall time, and the timings are exact.
//
//	var restore func()
//	synctest.Test(t, func(t *testing.T) {
//		restore = hedgesim.SwapHedgedQueue() // hedgedhttp's pool, see hedgedpool.go
//		rep, err := hedgesim.Run(t.Context(), hedgesim.DefaultScenario(2000))
//		...
//		fmt.Print(rep.Markdown())
//		time.Sleep(hedgesim.HedgedIdle) // let hedgedhttp's idle workers exit
//	})
//	restore()
//
// Nothing here touches the network: the upstreams are in-memory Sources
// and an in-memory http.RoundTripper.
package hedgesim
