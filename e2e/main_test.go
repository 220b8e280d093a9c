//go:build e2e

package e2e

import (
	"os"
	"testing"

	"github.com/streamwatch/streamwatch/internal/testbed/hedgeenv"
)

// TestMain runs the suite with hedgeprobe's settings its own (see
// hedgeenv), the processes it starts included: they inherit this
// environment.
func TestMain(m *testing.M) {
	hedgeenv.Unset()
	os.Exit(m.Run())
}
