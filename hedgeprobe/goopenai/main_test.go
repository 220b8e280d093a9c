package goopenai_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/streamwatch/streamwatch/internal/testbed/hedgeenv"
)

// TestMain runs the tests with hedgeprobe's settings their own (see
// hedgeenv) and checks that none leaks a goroutine.
func TestMain(m *testing.M) {
	hedgeenv.Unset()
	goleak.VerifyTestMain(m)
}
