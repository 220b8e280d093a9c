package breakdown

import (
	"encoding/binary"
	"testing"
)

// FuzzDerive feeds arbitrary timelines: Derive must never panic, and a
// complete or partial result must satisfy stall + active = generation with
// 0 ≤ active ≤ generation and a stall count no larger than the gap count.
func FuzzDerive(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 2}, []byte{}, int64(2000), int64(5))
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 3, 0, 9, 0, 0}, []byte{0, 0, 0, 4}, int64(1), int64(0))
	f.Fuzz(func(t *testing.T, chunks, keepalives []byte, threshold, k int64) {
		offs := decode(chunks)
		kas := decode(keepalives)
		segs := make([]Segment, 0, 4)
		r := Derive(Timeline{ChunkOffsetsUs: offs, KeepaliveOffsetsUs: kas, ThresholdUs: threshold, OutputTokens: k, ExpectedChunks: -1}, segs)
		if len(r.Segments) > cap(segs) {
			t.Fatalf("segments overflowed the buffer")
		}
		if r.Status == Anomaly {
			if _, ok := r.GenerationUs(); ok {
				t.Fatalf("anomaly with figures present")
			}
			return
		}
		gen, ok := r.GenerationUs()
		if !ok {
			if len(offs) != 0 {
				t.Fatalf("generation absent for %d chunks", len(offs))
			}
			return
		}
		stall, _ := r.StallUs()
		if active, ok := r.ActiveGenerationUs(); ok {
			if stall+active != gen || active < 0 || active > gen {
				t.Fatalf("stall %d + active %d != generation %d", stall, active, gen)
			}
		}
		if r.StallCount > len(offs) || r.StallCount != len(r.Segments)+r.SegmentsDropped {
			t.Fatalf("stall count %d, %d segments, %d dropped", r.StallCount, len(r.Segments), r.SegmentsDropped)
		}
	})
}

// decode reads big-endian int32 offsets, so the fuzzer can make small,
// ordered timelines as easily as wild ones.
func decode(b []byte) []int64 {
	out := make([]int64, 0, len(b)/4)
	for len(b) >= 4 {
		out = append(out, int64(int32(binary.BigEndian.Uint32(b))))
		b = b[4:]
	}
	return out
}

// FuzzDeriveWide uses full int64 offsets, so values near the limits (which
// would overflow a naive gap or sum) are explored too.
func FuzzDeriveWide(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 0x80, 0, 0, 0, 0, 0, 0, 0}, int64(2000), int64(1))
	f.Fuzz(func(t *testing.T, chunks []byte, threshold, launch int64) {
		var offs []int64
		for len(chunks) >= 8 {
			offs = append(offs, int64(binary.BigEndian.Uint64(chunks)))
			chunks = chunks[8:]
		}
		r := Derive(Timeline{ChunkOffsetsUs: offs, ThresholdUs: threshold, ExpectedChunks: -1, LaunchOffsetUs: launch, HasLaunchOffset: true}, nil)
		if gen, ok := r.GenerationUs(); ok {
			stall, _ := r.StallUs()
			if gen < 0 || stall < 0 || stall > gen {
				t.Fatalf("generation %d, stall %d", gen, stall)
			}
		}
		if c, ok := r.CallTTFTUs(); ok {
			if (launch >= 0) != (c >= r.ttftUs) {
				t.Fatalf("call ttft %d wrapped (launch %d, ttft %d)", c, launch, r.ttftUs)
			}
		}
	})
}
