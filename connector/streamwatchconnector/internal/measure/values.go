package measure

import (
	"math"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/semconv"
)

// Reading the values of a span, and the series they go to.

// slot is an attribute of call and attempt spans that the Recorder reads.
type slot uint8

const (
	slotIndex slot = iota
	slotProvider
	slotModel
	slotRoute
	slotAttemptOutcome
	slotTrigger
	slotChunkCount
	slotDelivered
	slotDerivation
	slotTTFT
	slotGeneration
	slotActive
	slotStall
	slotStallCount
	slotGapCounts
	slotOutcome
	slotWinnerRoute
	slotCallTTFT
	slotOperation
	slotErrorType
	numSlots
)

// slotKeys are the attribute keys of the slots, for reports.
var slotKeys = [numSlots]string{
	slotIndex:          string(semconv.AttemptIndex),
	slotProvider:       string(semconv.GenAIProviderName),
	slotModel:          string(semconv.GenAIRequestModel),
	slotRoute:          string(semconv.Route),
	slotAttemptOutcome: string(semconv.AttemptOutcome),
	slotTrigger:        string(semconv.AttemptTrigger),
	slotChunkCount:     string(semconv.ChunkCount),
	slotDelivered:      string(semconv.ChunksDelivered),
	slotDerivation:     string(semconv.Derivation),
	slotTTFT:           string(semconv.TTFTMs),
	slotGeneration:     string(semconv.GenerationMs),
	slotActive:         string(semconv.ActiveGenerationMs),
	slotStall:          string(semconv.StallMs),
	slotStallCount:     string(semconv.StallCount),
	slotGapCounts:      string(semconv.GapBucketCounts),
	slotOutcome:        string(semconv.Outcome),
	slotWinnerRoute:    string(semconv.WinnerRoute),
	slotCallTTFT:       string(semconv.GenAIResponseTimeToFirstChunk),
	slotOperation:      string(semconv.GenAIOperationName),
	slotErrorType:      string(semconv.ErrorType),
}

// slotsByLen lists the slots by the length of their key. Most of a span's
// keys have a length no slot's key has and cost one table read; the rest
// are compared with the one or two keys of their length. A switch on the
// string compares bytes at every probe of its search, and in a batch long
// out of the caches every key's bytes are a miss.
var slotsByLen = func() [][]slot {
	var t [][]slot
	for s, k := range slotKeys {
		for len(t) <= len(k) {
			t = append(t, nil)
		}
		t[len(k)] = append(t[len(k)], slot(s))
	}
	return t
}()

// slotOf returns the slot of attribute key k.
func slotOf(k string) (slot, bool) {
	if len(k) >= len(slotsByLen) {
		return 0, false
	}
	for _, s := range slotsByLen[len(k)] {
		if slotKeys[s] == k {
			return s, true
		}
	}
	return 0, false
}

// values are the slots of one span, found in one pass over its attributes:
// a derived span carries 25–30 attributes, and a Map.Get per key read
// would scan them once per key (docs/scale.md). As with Map.Get, the
// first of duplicate keys wins.
type values struct {
	v     [numSlots]pcommon.Value
	found uint32
}

func (vs *values) scan(a pcommon.Map) {
	vs.found = 0
	for k, v := range a.All() {
		if s, ok := slotOf(k); ok && vs.found&(1<<s) == 0 {
			vs.found |= 1 << s
			vs.v[s] = v
		}
	}
}

// get returns the value of slot s and whether the span has it.
func (vs *values) get(s slot) (pcommon.Value, bool) {
	return vs.v[s], vs.found&(1<<s) != 0
}

func (r *Recorder) series(m int, service string) *aggregate.Series {
	return r.store.Series(m, service, &r.key, r.now)
}

// add adds n to sum metric m's series; a sum that would pass 2⁶³−1 stays
// there, and is reported.
func (r *Recorder) add(m int, service string, n int64) {
	if r.series(m, service).Add(n) {
		r.p.Invalid(Descs[m].Name, ReasonOutOfRange)
	}
}

func (r *Recorder) observe(m int, service string, v float64, ex aggregate.Exemplar) {
	if v > MaxSeconds {
		r.p.Invalid(Descs[m].Name, ReasonOutOfRange)
		return
	}
	if r.series(m, service).Observe(r.store.Bounds(m), v, ex) {
		r.p.Invalid(Descs[m].Name, ReasonOutOfRange)
	}
}

// extras reads the configured dimensions from the span, then the resource.
func (r *Recorder) extras(a, res pcommon.Map) {
	r.extra.Reset()
	for _, k := range r.opts.Dimensions {
		v, ok := a.Get(k)
		if !ok {
			v, ok = res.Get(k)
		}
		if ok {
			r.extra.Add(k, r.labelValue(k, v.AsString()))
		}
	}
}

// strAt, numberAt and countAt read slot s of the span being recorded.
func (r *Recorder) strAt(s slot) (string, bool) {
	v, ok := r.vals.get(s)
	return r.str(slotKeys[s], v, ok)
}

func (r *Recorder) numberAt(s slot) (float64, bool) {
	v, ok := r.vals.get(s)
	return r.number(slotKeys[s], v, ok)
}

func (r *Recorder) countAt(s slot) (int64, bool) {
	v, ok := r.vals.get(s)
	return r.count(slotKeys[s], v, ok)
}

// str reads string attribute k, present when ok; a present value of
// another type is reported.
func (r *Recorder) str(k string, v pcommon.Value, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	if v.Type() != pcommon.ValueTypeStr {
		r.p.Invalid(k, ReasonWrongType)
		return "", false
	}
	return r.labelValue(k, v.Str()), true
}

// labelValue returns s, the string of attribute k, made valid UTF-8 for a
// label. pdata does not check what it unmarshals, and a series made from
// invalid bytes would be re-sent in every flush: the Prometheus exporter
// drops it on every scrape, and an OTLP receiver that checks strings
// refuses each whole request, every valid series in it.
//
// A value is cut at MaxLabelBytes too: max_series bounds the series, and
// this bounds what each holds — its labels are kept for good and sent at
// every flush.
func (r *Recorder) labelValue(k, s string) string {
	if len(s) <= MaxLabelBytes && utf8.ValidString(s) { // inlined: every label of every span passes here
		return s
	}
	return r.repair(k, s)
}

func (r *Recorder) repair(k, s string) string {
	// Both judged on the value as sent (ValidString copies nothing); the
	// cut comes before the repair, which would copy the whole value.
	valid := utf8.ValidString(s)
	if len(s) > MaxLabelBytes {
		r.p.Invalid(k, ReasonTooLong)
		s = cut(s)
	}
	if !valid {
		r.p.Invalid(k, ReasonNotUTF8)
		// Each run of bad bytes becomes 3: the repaired value may pass
		// the bound again, and is cut again (one count for the value).
		s = cut(strings.ToValidUTF8(s, "\uFFFD"))
	}
	return s
}

// cut returns s cut to at most MaxLabelBytes, at a character's start (a
// byte that is no UTF-8 continuation) within the last utf8.UTFMax-1
// bytes — a run of bad bytes has none, and the cut is then at the bound
// (the repair that follows replaces them) — and copied: a cut that shared
// its bytes would keep the whole value alive.
func cut(s string) string {
	if len(s) <= MaxLabelBytes {
		return s
	}
	n := MaxLabelBytes
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	if !utf8.RuneStart(s[n]) {
		n = MaxLabelBytes
	}
	return strings.Clone(s[:n])
}

// number reads a finite, non-negative double (an int is accepted).
func (r *Recorder) number(k string, v pcommon.Value, ok bool) (float64, bool) {
	if !ok {
		return 0, false
	}
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	default:
		r.p.Invalid(k, ReasonWrongType)
		return 0, false
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		r.p.Invalid(k, ReasonNotFinite)
		return 0, false
	case f < 0:
		r.p.Invalid(k, ReasonNegative)
		return 0, false
	}
	return f, true
}

// count reads a non-negative integer (an integral double is accepted).
func (r *Recorder) count(k string, v pcommon.Value, ok bool) (int64, bool) {
	if !ok {
		return 0, false
	}
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			r.p.Invalid(k, ReasonNotFinite)
			return 0, false
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			r.p.Invalid(k, ReasonWrongType)
			return 0, false
		}
		n = int64(f)
	default:
		r.p.Invalid(k, ReasonWrongType)
		return 0, false
	}
	switch {
	case n < 0:
		r.p.Invalid(k, ReasonNegative)
		return 0, false
	case n > MaxCount:
		r.p.Invalid(k, ReasonOutOfRange)
		return 0, false
	}
	return n, true
}
