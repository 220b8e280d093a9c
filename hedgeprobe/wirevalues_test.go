package hedgeprobe_test

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/semconv"
)

// The wire values hedgeprobe spells itself are the ones semconv gives the
// collector to read: a value renamed on one side only would split a metric
// or drop a call from it.
func TestWireValuesMatchSemconv(t *testing.T) {
	for _, c := range [][2]string{
		{string(hedgeprobe.TriggerPrimary), semconv.TriggerPrimary},
		{string(hedgeprobe.TriggerTTFT), semconv.TriggerTTFT},
		{string(hedgeprobe.TriggerStall), semconv.TriggerStall},
		{string(hedgeprobe.TriggerError), semconv.TriggerError},
		{string(hedgeprobe.TriggerResume), semconv.TriggerResume},
		{string(hedgeprobe.AttemptWinner), semconv.AttemptOutcomeWinner},
		{string(hedgeprobe.AttemptCanceled), semconv.AttemptOutcomeCanceled},
		{string(hedgeprobe.AttemptFailed), semconv.AttemptOutcomeFailed},
		{string(hedgeprobe.OutcomeOK), semconv.OutcomeOK},
		{string(hedgeprobe.OutcomeTTFTTimeout), semconv.OutcomeTTFTTimeout},
		{string(hedgeprobe.OutcomeStallTimeout), semconv.OutcomeStallTimeout},
		{string(hedgeprobe.OutcomeError), semconv.OutcomeError},
		{string(hedgeprobe.OutcomeCanceled), semconv.OutcomeCanceled},
	} {
		got, want := c[0], c[1]
		if got != want {
			t.Errorf("hedgeprobe writes %q, semconv says %q", got, want)
		}
	}
}
