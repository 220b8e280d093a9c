//go:build race

package hedgesim

// raceEnabled: the race detector slows the simulation tenfold; the
// target tests run without it (make test's second step).
const raceEnabled = true
