package hedgesim

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/streamwatch/streamwatch/internal/testbed/hedgeenv"
)

func TestMain(m *testing.M) {
	// hedgeprobe.New fills a zero Config field from the environment: a
	// STREAM__STALL_TIMEOUT_S set in the shell would give the rows that
	// leave the watchdog off (TTFT-only, the zero-value Config) one, under
	// their own names. The report describes the settings it sets alone, so
	// every variable of hedgeprobe's prefixes is unset.
	hedgeenv.Unset()
	goleak.VerifyTestMain(m)
}
