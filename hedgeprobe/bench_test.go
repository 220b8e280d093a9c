package hedgeprobe

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// endless is an in-memory Source that never ends and never blocks: the
// cheapest possible upstream, so the benchmarks measure the probe.
type endless struct {
	n   int
	cur chunk
}

func (e *endless) Next() bool {
	e.n++
	e.cur = chunk{Kind: Content, Text: "token"}
	if e.n%16 == 0 {
		e.cur.Kind = Keepalive
	}
	return true
}
func (e *endless) Current() chunk { return e.cur }
func (e *endless) Err() error     { return nil }
func (e *endless) Close() error   { return nil }

func endlessRoute() Route[chunk] {
	return Route[chunk]{Name: "mem", Provider: "mem", Model: "m", Open: func(context.Context, Attempt) (Source[chunk], error) {
		return &endless{}, nil
	}}
}

// sink keeps results alive.
var sink Kind

// Baseline: the Source read directly, with the classifier call a caller
// would make anyway.
func BenchmarkChunkDirectSource(b *testing.B) {
	b.ReportAllocs()
	var src Source[chunk] = &endless{}
	for b.Loop() {
		if !src.Next() {
			b.Fatal("end")
		}
		sink = classifyChunk(src.Current())
	}
}

func benchCommitted(b *testing.B, cfg Config, opts ...any) {
	benchCommittedOn(b, cfg, endlessRoute(), opts...)
}

func benchCommittedOn(b *testing.B, cfg Config, r Route[chunk], opts ...any) {
	p := mustNew(b, cfg, opts...)
	s := p.Stream(context.Background(), r)
	defer s.Close()
	if !s.Next() {
		b.Fatal(s.Err())
	}
	b.ReportAllocs()
	for b.Loop() {
		if !s.Next() {
			b.Fatal(s.Err())
		}
		sink = classifyChunk(s.Current())
	}
}

// A committed stream read through Stream, no watchdog.
func BenchmarkChunkStream(b *testing.B) { benchCommitted(b, Config{MaxAttempts: 1}) }

// A committed stream whose Items count output tokens: OutputTokens is
// asked about every content and control item (usage may ride on any of
// them), under a deferred recover.
func BenchmarkChunkStreamTokens(b *testing.B) {
	benchCommitted(b, Config{MaxAttempts: 1}, withTokens(tokensOf))
}

// A committed stream with the stall watchdog armed.
func BenchmarkChunkStreamWatchdog(b *testing.B) {
	benchCommitted(b, Config{MaxAttempts: 1, StallTimeout: time.Minute, TTFTTimeout: time.Minute})
}

// A committed stream that can be resumed: its reading goroutine relays
// every item to the caller's Next (so a resume can race it), and each
// content chunk's text is kept for the continuation.
func BenchmarkChunkStreamResumable(b *testing.B) {
	r := endlessRoute()
	r.Continues = true
	benchCommittedOn(b, Config{MaxAttempts: 2, StallTimeout: time.Minute}, r, withText())
}

// The same with Items.Relabel set: each content chunk delivered is also
// kept as the answer a continuation would be relabelled from.
func BenchmarkChunkStreamResumableRelabel(b *testing.B) {
	r := endlessRoute()
	r.Continues = true
	benchCommittedOn(b, Config{MaxAttempts: 2, StallTimeout: time.Minute}, r, withText(),
		itemsOpt(func(i *Items[chunk]) { i.Relabel = func(_, v chunk) chunk { return v } }))
}

// Per-call set-up and tear-down of a single-route call whose upstream
// answers one chunk at once.
func BenchmarkCallSingleRoute(b *testing.B) {
	p := mustNew(b, Config{HedgeAfter: time.Second, StallTimeout: time.Minute})
	one := Route[chunk]{Name: "mem", Provider: "mem", Model: "m", Open: func(ctx context.Context, _ Attempt) (Source[chunk], error) {
		return &scripted{ctx: ctx, steps: []step{{kind: Content, text: "x"}}, closed: make(chan struct{})}, nil
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := p.Stream(ctx, one)
		for s.Next() {
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
	}
}

// BenchmarkCallSingleRoute's calls from GOMAXPROCS goroutines on one
// Prober, whose budget, route health and counters they share: run with
// -cpu 1,2,… to see whether calls per second grow with the cores. Its
// baseline is BenchmarkCallSingleRouteParallelApart.
func BenchmarkCallSingleRouteParallel(b *testing.B) { benchCallsParallel(b, true) }

// BenchmarkCallSingleRouteParallelApart is BenchmarkCallSingleRouteParallel
// with a Prober per goroutine: calls that share nothing.
func BenchmarkCallSingleRouteParallelApart(b *testing.B) { benchCallsParallel(b, false) }

func benchCallsParallel(b *testing.B, shared bool) {
	cfg := Config{HedgeAfter: time.Second, StallTimeout: time.Minute}
	p := mustNew(b, cfg)
	one := Route[chunk]{Name: "mem", Provider: "mem", Model: "m", Open: func(ctx context.Context, _ Attempt) (Source[chunk], error) {
		return &scripted{ctx: ctx, steps: []step{{kind: Content, text: "x"}}, closed: make(chan struct{})}, nil
	}}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := p
		if !shared {
			p = mustNew(b, cfg)
		}
		for pb.Next() {
			s := p.Stream(ctx, one)
			for s.Next() {
			}
			if s.Err() != nil {
				b.Error(s.Err())
				return
			}
		}
	})
}

// The adaptive delay look-up of a warmed route × model.
func BenchmarkHedgeDelayLookup(b *testing.B) {
	p := mustNew(b, Config{})
	for i := range 1000 {
		p.delays.observe("mem", "m", time.Duration(i)*time.Millisecond, time.Now())
	}
	b.ReportAllocs()
	var d time.Duration
	for b.Loop() {
		d += p.HedgeDelay("mem", "m")
	}
	_ = d
}

// chunksPerCall is the stream length of the telemetry benchmarks: each
// op is one chunk, and a new call starts every chunksPerCall chunks, so
// the call's set-up and span end (with its chunksPerCall offsets) are in
// the per-chunk figure, amortized.
const chunksPerCall = 10000

func benchChunksPerCall(b *testing.B, opts ...any) {
	p := mustNew(b, Config{MaxAttempts: 1, StallTimeout: time.Minute}, opts...)
	ctx := context.Background()
	var s *Stream[chunk]
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i%chunksPerCall == 0 {
			if s != nil {
				s.Close()
			}
			s = p.Stream(ctx, endlessRoute())
		}
		i++
		if !s.Next() {
			b.Fatal(s.Err())
		}
	}
	s.Close()
}

func recordingProvider(b *testing.B) trace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// Baseline of the two below: no telemetry (the global no-op provider).
func BenchmarkChunkNoTelemetry(b *testing.B) { benchChunksPerCall(b) }

// A sampled-out call: the call span does not record.
func BenchmarkChunkNotRecording(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	benchChunksPerCall(b, WithTracerProvider(tp))
}

// A recording call span and attempt span with the compact timeline.
func BenchmarkChunkRecordingSpan(b *testing.B) {
	benchChunksPerCall(b, WithTracerProvider(recordingProvider(b)))
}

// The same with the Items functions that describe the response on the
// attempt span (input tokens and finish reasons are asked about every
// content chunk; the id until known), as the adapters set them.
func BenchmarkChunkRecordingSpanDescribed(b *testing.B) {
	benchChunksPerCall(b, WithTracerProvider(recordingProvider(b)), itemsOpt(func(i *Items[chunk]) {
		i.ResponseID = func(c chunk) (string, bool) { return c.Text, c.Text != "" }
		i.InputTokens = tokensOf
		i.FinishReasons = func(c chunk, finished func(int, string)) {
			if c.Kind == Control {
				finished(0, c.Text)
			}
		}
	}))
}

// Per-call cost of the spans: a single-route one-chunk call, recording.
func BenchmarkCallSingleRouteRecording(b *testing.B) {
	p := mustNew(b, Config{HedgeAfter: time.Second, StallTimeout: time.Minute}, WithTracerProvider(recordingProvider(b)))
	one := Route[chunk]{Name: "mem", Provider: "mem", Model: "m", Open: func(ctx context.Context, _ Attempt) (Source[chunk], error) {
		return &scripted{ctx: ctx, steps: []step{{kind: Content, text: "x"}}, closed: make(chan struct{})}, nil
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := p.Stream(ctx, one)
		for s.Next() {
		}
	}
}
