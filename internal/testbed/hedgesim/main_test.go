package hedgesim

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

func TestMain(m *testing.M) {
	// hedgeprobe.New fills a zero Config field from the environment: a
	// STREAM__STALL_TIMEOUT_S set in the shell would give the rows that
	// leave the watchdog off (TTFT-only, the zero-value Config) one, under
	// their own names. The report describes the settings it sets alone.
	for _, v := range []string{
		hedgeprobe.EnvHedgeAfter, hedgeprobe.EnvStallAfter, hedgeprobe.EnvResumeAfter,
		hedgeprobe.EnvTTFTTimeout, hedgeprobe.EnvStallTimeout,
		hedgeprobe.EnvEjectFailures, hedgeprobe.EnvEjectBase, hedgeprobe.EnvEjectMax,
	} {
		_ = os.Unsetenv(v)
	}
	goleak.VerifyTestMain(m)
}
