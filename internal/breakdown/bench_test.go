package breakdown

import "testing"

// benchTimeline is 2,000 chunks 25 ms apart with a 30 s silence after
// chunk 500, a 5 s one after 1,200 and three 3 s ones near the end, plus a
// keepalive every 10 s of each long silence.
func benchTimeline(n int) (offs, kas []int64) {
	offs = make([]int64, n)
	var t int64 = 300_000
	for i := range offs {
		switch i {
		case 501:
			for k := t + 10e6; k < t+30e6; k += 10e6 {
				kas = append(kas, k)
			}
			t += 30e6
		case 1201:
			t += 5e6
		case 1800, 1850, 1900:
			t += 3e6
		}
		offs[i] = t
		t += 25_000
	}
	return offs, kas
}

// BenchmarkDerive reports the cost of the whole derivation of one span of
// 2,000 chunks, per chunk (ns/chunk) and per span (allocs/op).
func BenchmarkDerive(b *testing.B) {
	offs, kas := benchTimeline(2000)
	segs := make([]Segment, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		r := Derive(Timeline{ChunkOffsetsUs: offs, KeepaliveOffsetsUs: kas, OutputTokens: 2500, ThresholdUs: 2e6, ExpectedChunks: 2000}, segs)
		if r.StallCount != 5 {
			b.Fatalf("stall count %d", r.StallCount)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(offs)), "ns/chunk")
}

// BenchmarkBaselineSum is the floor: one pass that only sums the gaps.
func BenchmarkBaselineSum(b *testing.B) {
	offs, _ := benchTimeline(2000)
	var sink int64
	b.ReportAllocs()
	for b.Loop() {
		var s int64
		for i := 1; i < len(offs); i++ {
			s += offs[i] - offs[i-1]
		}
		sink += s
	}
	_ = sink
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(offs)), "ns/chunk")
}
