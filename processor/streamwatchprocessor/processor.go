package streamwatchprocessor

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/internal/breakdown"
	"github.com/streamwatch/streamwatch/internal/timeline"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/annotate"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor/internal/metadata"
	"github.com/streamwatch/streamwatch/semconv"
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
	scratch      sync.Pool // *timeline.Buffers
}

// counts are the processor's own telemetry for one batch, recorded once.
type counts struct{ derived, partial, anomaly, burst, dropped int64 }

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
		scratch:      sync.Pool{New: func() any { return new(timeline.Buffers) }},
	}, nil
}

func (p *streamwatch) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*timeline.Buffers)
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
	sc.Shrink()
	p.scratch.Put(sc)
	p.record(ctx, &c)
	return td, nil
}

// processSpan derives one span: an attempt span from its own timeline, a
// call span from the caller's view. It never drops a span and never fails:
// bad input is flagged on the span as an anomaly.
func (p *streamwatch) processSpan(span ptrace.Span, siblings ptrace.SpanSlice, sc *timeline.Buffers, c *counts) {
	// A span derived once (by an earlier collector tier) is left alone, so
	// running the processor twice cannot duplicate events or stall spans.
	// Only the processor's own values say so: any other (a number, a word
	// of the producer's) would have kept the span from being derived, and
	// is replaced.
	foreign := false
	if v, ok := span.Attributes().Get(string(semconv.Derivation)); ok {
		if v.Type() == pcommon.ValueTypeStr && breakdown.IsStatus(v.Str()) {
			return
		}
		foreign = true
	}
	d := timeline.Derive(span, sc, p.thresholdUs, p.maxSegments)
	if d.Form == timeline.None {
		return
	}
	c.derived++
	r := &d.Result
	problem := d.Problem()
	if foreign {
		problem = addProblem(problem, fmt.Sprintf("replaced a %s value the processor did not write", semconv.Derivation))
	}
	if n := annotate.RemoveStallEvents(span); n > 0 {
		note := fmt.Sprintf("removed %d %s events the producer wrote", n, semconv.EventStall)
		if n == 1 {
			note = fmt.Sprintf("removed 1 %s event the producer wrote", semconv.EventStall)
		}
		problem = addProblem(problem, note)
	}
	// The timeline goes before the figures are written: its attributes'
	// slots in the span's attribute array then take figures, which
	// otherwise often grow the array (a new one, every attribute copied).
	// An anomaly keeps it as the evidence. Nothing below reads it: the
	// derivation and the gap counts are in d and sc.
	drop := p.dropTimeline && r.Status != breakdown.Anomaly
	if drop {
		timeline.Drop(span)
	}
	annotate.Figures(span, r, p.thresholdUs, problem, d.GapCounts(sc))
	if r.Incomplete() {
		c.partial++
	}
	switch r.Status {
	case breakdown.Anomaly:
		// The timeline stays on the span as the evidence.
		c.anomaly++
		return
	case breakdown.Burst:
		c.burst++
	}
	c.dropped += int64(r.SegmentsDropped)
	annotate.StallEvents(span, r.Segments)
	if p.stallSpans {
		annotate.StallSpans(span, r.Segments, siblings)
	}
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
	if c.burst > 0 {
		p.telemetry.ProcessorStreamwatchSpansBurst.Add(ctx, c.burst)
	}
	if c.dropped > 0 {
		p.telemetry.ProcessorStreamwatchSegmentsDropped.Add(ctx, c.dropped)
	}
}

// addProblem appends what to a derivation's problem text.
func addProblem(problem, what string) string {
	if problem == "" {
		return what
	}
	return problem + "; " + what
}
