package hedgeenv

import (
	"os"
	"testing"
)

func TestUnset(t *testing.T) {
	t.Setenv("STREAM__STALL_TIMEOUT_S", "0.001")
	t.Setenv("HEDGE__SOMETHING_LATER", "1")
	t.Setenv("ROUTE__EJECT_FAILURES", "1")
	t.Setenv("STREAMING", "kept") // not a prefix of hedgeprobe's
	Unset()
	for _, name := range []string{"STREAM__STALL_TIMEOUT_S", "HEDGE__SOMETHING_LATER", "ROUTE__EJECT_FAILURES"} {
		if v, ok := os.LookupEnv(name); ok {
			t.Errorf("%s=%q is still set", name, v)
		}
	}
	if os.Getenv("STREAMING") != "kept" {
		t.Error("STREAMING was unset: it is not hedgeprobe's")
	}
}
