package streamwatchprocessor

import (
	"os"

	"github.com/streamwatch/streamwatch/internal/stallthreshold"
)

// The default config reads STREAM__STALL_THRESHOLD_MS (stallthreshold.FromEnv):
// the tests expect the 2s default wherever they do not set the variable
// themselves (t.Setenv), so a value exported in the shell that runs them
// (the shipped collector config's variable) must not reach them.
func init() { _ = os.Unsetenv(stallthreshold.EnvVar) }
