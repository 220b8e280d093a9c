package measure

import "testing"

// TestSlotOf: every slot's key finds its slot; keys of the same length and
// near misses find none.
func TestSlotOf(t *testing.T) {
	for s, k := range slotKeys {
		if got, ok := slotOf(k); !ok || got != slot(s) {
			t.Errorf("%q: slot %d, %v; want %d", k, got, ok, s)
		}
	}
	for _, k := range []string{"", "streamwatch.routf", "streamwatch.route ", "gen_ai.request.stream", "streamwatch.chunk.offsets_us",
		"a key far longer than any attribute key the connector reads, by design"} {
		if s, ok := slotOf(k); ok {
			t.Errorf("%q: found slot %d", k, s)
		}
	}
}
