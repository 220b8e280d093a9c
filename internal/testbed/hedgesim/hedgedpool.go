package hedgesim

import (
	"time"
	_ "unsafe" // for go:linkname

	_ "github.com/cristalhq/hedgedhttp" // taskQueue below lives there
)

// hedgedTaskQueue is hedgedhttp's package-level worker queue (v0.9.2,
// hedged.go: `var taskQueue = make(chan func())`). Its idle workers block
// in a select on it for 10 s before they exit. A channel made outside a
// synctest bubble is not "durably blocking", so a bubble with such a
// worker never advances its clock and hangs. SwapHedgedQueue points the
// library at a channel made inside the bubble, which makes the real,
// unmodified hedgedhttp run in virtual time.
//
//go:linkname hedgedTaskQueue github.com/cristalhq/hedgedhttp.taskQueue
var hedgedTaskQueue chan func()

// HedgedIdle is how long hedgedhttp's idle workers live (its
// cleanupDuration, 10 s) plus a margin: a bubble that used hedgedhttp
// sleeps this long at its end so that every worker has exited.
const HedgedIdle = 11 * time.Second

// SwapHedgedQueue must be called inside the bubble before Run, on a
// goroutine with no hedgedhttp call in flight; the returned func restores
// the original queue and must be called after the bubble has ended (all
// its goroutines are gone then). Tests using it must not run in parallel.
func SwapHedgedQueue() (restore func()) {
	orig := hedgedTaskQueue
	hedgedTaskQueue = make(chan func())
	return func() { hedgedTaskQueue = orig }
}
