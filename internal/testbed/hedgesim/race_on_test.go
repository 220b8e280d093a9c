//go:build race

package hedgesim

// raceEnabled: the race detector slows the simulation tenfold, and can
// crash on a bubble of thousands of goroutines; the simulations run
// without it (make test's second step).
const raceEnabled = true
