package timeline

import (
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamwatch/streamwatch/semconv"
)

// readContext reads the attributes that refine the derivation. A value of
// an unexpected type is treated as absent: these are optional inputs, and
// their absence only removes the figures that need them.
//
// A context attribute that is present but unreadable is left out, and the
// input's note says which and why: it silently costs figures (a token
// count given as a string loses TPOT and active TPS), so the span says so.
func readContext(attrs pcommon.Map, in *Input) {
	if v, ok := attrs.Get(string(semconv.ChunkCount)); ok {
		if n, ok := readCount(v); ok {
			in.ExpectedChunks = n
		} else {
			in.unreadable(string(semconv.ChunkCount), "a count", v)
		}
	}
	readOutputTokens(attrs, in)
	if v, ok := attrs.Get(string(semconv.AttemptLaunchOffsetMs)); ok {
		const maxMs = MaxOffsetUs / 1000
		switch v.Type() {
		case pcommon.ValueTypeInt:
			if ms := v.Int(); ms >= 0 && ms <= maxMs {
				in.LaunchOffsetUs, in.HasLaunchOffset = ms*1000, true
			}
		case pcommon.ValueTypeDouble:
			// The negated test also rejects NaN.
			if ms := v.Double(); ms >= 0 && ms <= maxMs {
				in.LaunchOffsetUs, in.HasLaunchOffset = int64(ms*1000+0.5), true
			}
		}
		if !in.HasLaunchOffset {
			in.unreadable(string(semconv.AttemptLaunchOffsetMs), "a duration of 0 to 7 days", v)
		}
	}
}

// droppedAttributes is the note of a span whose producer dropped n
// attributes past its limit (an OpenTelemetry SDK's attribute count
// limit, say). The timeline itself was found, but the attributes that
// refine it (the chunk count, the token count, the launch offset, the
// keepalive list) may be among those dropped, and a figure that needs one
// is then absent with nothing else on the span to say why.
func droppedAttributes(n uint32) string {
	if n == 1 {
		return "the span dropped 1 attribute, figures that need it are absent"
	}
	return fmt.Sprintf("the span dropped %d attributes, figures that need one are absent", n)
}

// readOutputTokens reads gen_ai.usage.output_tokens into in, the same
// way on an attempt and on a call span: the two spans' tpot_ms must not
// differ because one of them reads a whole-valued double and the other
// does not.
func readOutputTokens(attrs pcommon.Map, in *Input) {
	v, ok := attrs.Get(string(semconv.GenAIUsageOutputTokens))
	if !ok {
		return
	}
	if n, ok := readCount(v); !ok {
		in.unreadable(string(semconv.GenAIUsageOutputTokens), "a count", v)
	} else if n > 0 {
		in.OutputTokens = n
	}
}

// unreadable notes that the context attribute key, value v, is not what
// it must be (want) and is left out.
func (in *Input) unreadable(key, want string, v pcommon.Value) {
	if v.Type() == pcommon.ValueTypeInt || v.Type() == pcommon.ValueTypeDouble {
		in.note(fmt.Sprintf("%s = %s is not %s: ignored", key, v.AsString(), want))
		return
	}
	in.note(fmt.Sprintf("%s is not %s (type %s): ignored", key, want, v.Type()))
}

// readCount reads a count attribute: an int, or a double with an integral
// value (a producer whose numbers are all doubles, as JavaScript's can
// be), as the connector reads counts, so that a span's figures and its
// metrics agree. A negative, fractional or non-finite value, one past
// 2⁵³, or another type is not a count.
func readCount(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), v.Int() >= 0
	case pcommon.ValueTypeDouble:
		// The negated test also rejects NaN.
		if f := v.Double(); f >= 0 && f <= 1<<53 && f == math.Trunc(f) {
			return int64(f), true
		}
	}
	return 0, false
}
