//go:build e2e

package e2e

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/streamwatch/streamwatch/internal/testbed/hedgeenv"
)

// TestMain runs the suite with hedgeprobe's settings its own (see
// hedgeenv), the processes it starts included: they inherit this
// environment. It checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	hedgeenv.Unset()
	goleak.VerifyTestMain(m)
}
