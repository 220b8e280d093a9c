package hedgesim

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// hedgeprobe.New fills a zero Config field from the environment: a
	// STREAM__STALL_TIMEOUT_S set in the shell would give the rows that
	// leave the watchdog off (TTFT-only, the zero-value Config) one, under
	// their own names. The report describes the settings it sets alone, so
	// every variable of hedgeprobe's prefixes (hedgeprobe.EnvHedgeAfter
	// and the others; a later one too) is unset.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		for _, prefix := range []string{"HEDGE__", "STREAM__", "ROUTE__"} {
			if strings.HasPrefix(name, prefix) {
				_ = os.Unsetenv(name)
			}
		}
	}
	goleak.VerifyTestMain(m)
}
