package streamwatchprocessor

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/annotate"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/metadata"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/timeline"
	"github.com/streamwatch/streamwatch/semconv"
)

// Buffers past these sizes are not returned to the pool, so one enormous
// span cannot pin megabytes for the life of the process.
const (
	maxPooledOffsets  = 1 << 16
	maxPooledSegments = 1 << 12
)

// streamwatch derives the breakdown of every span carrying a timeline. It
// keeps no state across spans; it is safe for concurrent use because every
// call to processTraces takes its own scratch buffers from the pool.
type streamwatch struct {
	thresholdUs  int64
	maxSegments  int
	dropTimeline bool
	stallSpans   bool
	telemetry    *metadata.TelemetryBuilder
	scratch      sync.Pool // *scratch
}

// scratch holds the per-call buffers, reused across spans and calls.
type scratch struct {
	tl   timeline.Buffers
	segs []breakdown.Segment
}

// counts are the processor's own telemetry for one batch, recorded once.
type counts struct{ derived, partial, anomaly, dropped int64 }

func newProcessor(cfg *Config, set component.TelemetrySettings) (*streamwatch, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &streamwatch{
		thresholdUs:  cfg.StallThreshold.Microseconds(),
		maxSegments:  cfg.MaxSegments,
		dropTimeline: cfg.DropTimeline,
		stallSpans:   cfg.StallSpans,
		telemetry:    tb,
		scratch:      sync.Pool{New: func() any { return new(scratch) }},
	}, nil
}

func (p *streamwatch) shutdown(context.Context) error {
	p.telemetry.Shutdown()
	return nil
}

func (p *streamwatch) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*scratch)
	var c counts
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			// Stall spans are appended past n and are not visited again.
			n := spans.Len()
			for k := range n {
				p.processSpan(spans.At(k), spans, sc, &c)
			}
		}
	}
	p.release(sc)
	p.record(ctx, &c)
	return td, nil
}

// processSpan derives one span. It never drops a span and never fails: bad
// input is flagged on the span as an anomaly.
func (p *streamwatch) processSpan(span ptrace.Span, siblings ptrace.SpanSlice, sc *scratch, c *counts) {
	// A span derived once (by an earlier collector tier) is left alone, so
	// running the processor twice cannot duplicate events or stall spans.
	if _, done := span.Attributes().Get(string(semconv.Derivation)); done {
		return
	}
	in := timeline.Read(span, &sc.tl)
	if in.Form == timeline.None {
		return
	}
	c.derived++
	if in.Problem != "" {
		annotate.Anomaly(span, p.thresholdUs, in.Problem)
		c.anomaly++
		return
	}
	r := breakdown.Derive(in.Timeline(p.thresholdUs), p.segments(sc, len(in.Chunks)))
	annotate.Figures(span, &r, p.thresholdUs, in.Note)
	switch r.Status {
	case breakdown.Anomaly:
		// The timeline stays on the span as the evidence.
		c.anomaly++
		return
	case breakdown.Partial:
		c.partial++
	}
	c.dropped += int64(r.SegmentsDropped)
	annotate.StallEvents(span, r.Segments)
	if p.stallSpans {
		annotate.StallSpans(span, r.Segments, siblings)
	}
	if p.dropTimeline {
		timeline.Drop(span)
	}
}

// segments returns an empty segment buffer whose capacity is the segment
// limit for a timeline of n chunks. A timeline of n chunks has fewer than n
// segments, so capping at n bounds the buffer by the input, not by
// max_segments.
func (p *streamwatch) segments(sc *scratch, n int) []breakdown.Segment {
	want := min(p.maxSegments, n)
	if cap(sc.segs) < want {
		sc.segs = make([]breakdown.Segment, 0, want)
	}
	return sc.segs[:0:want]
}

func (p *streamwatch) release(sc *scratch) {
	if cap(sc.tl.Chunks) > maxPooledOffsets {
		sc.tl.Chunks = nil
	}
	if cap(sc.tl.Keepalives) > maxPooledOffsets {
		sc.tl.Keepalives = nil
	}
	if cap(sc.segs) > maxPooledSegments {
		sc.segs = nil
	}
	p.scratch.Put(sc)
}

func (p *streamwatch) record(ctx context.Context, c *counts) {
	if c.derived == 0 {
		return
	}
	p.telemetry.ProcessorStreamwatchSpansDerived.Add(ctx, c.derived)
	if c.partial > 0 {
		p.telemetry.ProcessorStreamwatchSpansPartial.Add(ctx, c.partial)
	}
	if c.anomaly > 0 {
		p.telemetry.ProcessorStreamwatchSpansAnomaly.Add(ctx, c.anomaly)
	}
	if c.dropped > 0 {
		p.telemetry.ProcessorStreamwatchSegmentsDropped.Add(ctx, c.dropped)
	}
}
