package metadata

import (
	"testing"

	"github.com/streamwatch/streamwatch/internal/owntelemetry/owntelemetrytest"
)

func TestTelemetryInStepWithMetadata(t *testing.T) {
	owntelemetrytest.CheckInStep(t, "../../metadata.yaml", new(TelemetryBuilder).counters())
}
