// Package hedgeenv keeps a test binary's hedgeprobe settings its own.
// hedgeprobe.New fills each zero Config field from an environment variable
// (docs/design.md §2 rule 9: HEDGE__AFTER_S, STREAM__STALL_TIMEOUT_S and
// the others), so one exported in a developer's shell would give a test
// a watchdog, a hedge delay or an ejection it does not set — and could
// hide the hang a test without a watchdog is there to catch.
package hedgeenv

import (
	"os"
	"strings"
)

// prefixes are those of every variable hedgeprobe reads (hedgeprobe.EnvHedgeAfter
// and the others), and of any it may read later.
var prefixes = []string{"HEDGE__", "STREAM__", "ROUTE__"}

// Unset unsets every variable of hedgeprobe's prefixes, for a TestMain to
// call before the tests run. A test that is about the environment sets
// its own with t.Setenv.
func Unset() {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		for _, prefix := range prefixes {
			if strings.HasPrefix(name, prefix) {
				_ = os.Unsetenv(name)
			}
		}
	}
}
