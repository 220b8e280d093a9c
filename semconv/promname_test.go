package semconv

import "testing"

func TestPromName(t *testing.T) {
	for _, tc := range []struct {
		name, unit string
		counter    bool
		want       string
	}{
		{MetricTimeToFirstChunk, UnitSeconds, false, "gen_ai_client_operation_time_to_first_chunk_seconds"},
		{MetricStalls, UnitStall, true, "streamwatch_stalls_total"},
		{MetricWastedChunks, UnitChunk, true, "streamwatch_wasted_chunks_total"},
		{MetricCallStallDuration, UnitSeconds, false, "streamwatch_call_stall_duration_seconds"},
		{MetricRouteEjections, UnitEjection, true, "streamwatch_route_ejections_total"},
		{MetricThrottledHedges, UnitHedge, true, "streamwatch_throttled_hedges_total"},
	} {
		if got := PromName(tc.name, tc.unit, tc.counter); got != tc.want {
			t.Errorf("PromName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPromLabel(t *testing.T) {
	if got := PromLabel(string(GenAIProviderName)); got != "gen_ai_provider_name" {
		t.Errorf("PromLabel = %q", got)
	}
}
