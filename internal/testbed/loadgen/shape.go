package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Route is one upstream of the generated calls.
type Route struct {
	Name, Provider, Model string
	// ServerAddress and ServerPort are the upstream's server.address and
	// server.port, as hedgeprobe's routes report them (the sse adapter
	// sets them from BaseURL). Empty, 0: not reported.
	ServerAddress string
	ServerPort    int
}

// Shape is the traffic of generated calls. The zero value of a field means
// none of it (no hedges, no stalls…), except where said.
type Shape struct {
	// Service is the resource's service.name. Empty: "loadgen".
	Service string
	// CallsPerRequest is the calls in one export request. Default 100.
	CallsPerRequest int
	// Chunks is the content chunks of a complete stream. Default 300.
	Chunks int
	// ChunkGap is the time between two content chunks. Default 20 ms.
	ChunkGap time.Duration
	// TTFT is the primary's time to first chunk.
	TTFT time.Duration
	// StallFraction of calls have a winner that falls silent once, for
	// Stall, half-way through its stream (one stall segment).
	StallFraction float64
	Stall         time.Duration
	// KeepaliveEvery is the keepalive period of every stream (0: none).
	KeepaliveEvery time.Duration
	// HedgeFraction of calls are hedged: half on a late first chunk (the
	// primary is canceled with no chunk), half on a silence after a few
	// chunks (the primary is canceled with them); the hedge wins.
	HedgeFraction float64
	// ErrorFraction of calls fail at once: one failed attempt, no chunk,
	// outcome error.
	ErrorFraction float64
	// Routes are the upstreams; call i's primary is Routes[i mod n] and its
	// hedge the next one. Default: two routes of one model.
	Routes []Route
}

// DefaultShape is the traffic of the load test: 300 chunks 20 ms apart,
// 10 % of winners with one 30 s silence, keepalives every 5 s, 20 %
// hedged, 2 % failed, 100 calls per request.
func DefaultShape() Shape {
	return Shape{
		CallsPerRequest: 100,
		Chunks:          300,
		ChunkGap:        20 * time.Millisecond,
		TTFT:            400 * time.Millisecond,
		StallFraction:   0.1,
		Stall:           30 * time.Second,
		KeepaliveEvery:  5 * time.Second,
		HedgeFraction:   0.2,
		ErrorFraction:   0.02,
	}
}

// Counts is what one request, or a run, holds.
type Counts struct {
	Requests int64
	// Calls by outcome.
	Calls, CallsOK, CallsError int64
	// Spans are call and attempt spans.
	Spans int64
	// Chunks are content-chunk offsets, over every attempt.
	Chunks int64
	// Hedges are attempts with index above 0.
	Hedges int64
	// Stalls are stall segments the processor derives (silences above 2 s
	// between two content chunks).
	Stalls int64
	// WinnerGaps are the gaps between content chunks of winning attempts:
	// the observations of time_per_output_chunk, as the generator writes
	// no other attempt that gave the caller every chunk it received.
	WinnerGaps int64
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Requests += o.Requests
	c.Calls += o.Calls
	c.CallsOK += o.CallsOK
	c.CallsError += o.CallsError
	c.Spans += o.Spans
	c.Chunks += o.Chunks
	c.Hedges += o.Hedges
	c.Stalls += o.Stalls
	c.WinnerGaps += o.WinnerGaps
}

// Request is one marshalled OTLP export request and what it holds.
type Request struct {
	Body   []byte
	Counts Counts
}

// operation is gen_ai.operation.name of every span.
const operation = "chat"

// hedgeLaunch is when a TTFT hedge is launched, since the call start.
const hedgeLaunch = 1500 * time.Millisecond

// stallHedgeAfter is the primary's content chunks before it falls silent
// and is hedged on that silence.
const stallHedgeAfter = 50

// stallAfter is hedgeprobe's StallAfter in the generated calls.
const stallAfter = 5 * time.Second

// Requests builds n export requests of s, with span ids drawn from seed and
// calls starting a few minutes before now.
func (s Shape) Requests(n int, seed uint64, now time.Time) ([]Request, error) {
	s = s.withDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	b := builder{Shape: s, rng: rand.New(rand.NewPCG(seed, 0x5eed)), base: now.Add(-5 * time.Minute)}
	out := make([]Request, n)
	for i := range out {
		td, counts := b.request()
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return nil, err
		}
		out[i] = Request{Body: body, Counts: counts}
	}
	return out, nil
}

func (s Shape) withDefaults() Shape {
	if s.Service == "" {
		s.Service = "loadgen"
	}
	if s.CallsPerRequest == 0 {
		s.CallsPerRequest = 100
	}
	if s.Chunks == 0 {
		s.Chunks = 300
	}
	if s.ChunkGap == 0 {
		s.ChunkGap = 20 * time.Millisecond
	}
	if len(s.Routes) == 0 {
		s.Routes = []Route{
			{Name: "primary", Provider: "openai", Model: "gpt-load", ServerAddress: "api.openai.com", ServerPort: 443},
			{Name: "secondary", Provider: "openai", Model: "gpt-load", ServerAddress: "api.openai.com", ServerPort: 443},
		}
	}
	return s
}

func (s Shape) validate() error {
	switch {
	case s.CallsPerRequest < 1:
		return fmt.Errorf("loadgen: CallsPerRequest must be at least 1, got %d", s.CallsPerRequest)
	case s.Chunks < stallHedgeAfter+2:
		return fmt.Errorf("loadgen: Chunks must be at least %d, got %d", stallHedgeAfter+2, s.Chunks)
	case s.ChunkGap <= 0 || s.TTFT < 0 || s.Stall < 0 || s.KeepaliveEvery < 0:
		return fmt.Errorf("loadgen: durations must not be negative")
	case s.StallFraction > 0 && s.Stall <= 2*time.Second:
		return fmt.Errorf("loadgen: Stall must exceed the default stall threshold of 2s, got %s", s.Stall)
	}
	for _, f := range []float64{s.StallFraction, s.HedgeFraction, s.ErrorFraction} {
		if f < 0 || f > 1 {
			return fmt.Errorf("loadgen: fractions must be within [0, 1], got %v", f)
		}
	}
	return nil
}

// String describes the shape in one line, for reports.
func (s Shape) String() string {
	s = s.withDefaults()
	return fmt.Sprintf("%d calls/request, %d chunks %s apart, %s stall on %s of winners, keepalive every %s, %s hedged, %s failed, %d routes",
		s.CallsPerRequest, s.Chunks, s.ChunkGap, s.Stall, pct(s.StallFraction), s.KeepaliveEvery, pct(s.HedgeFraction), pct(s.ErrorFraction), len(s.Routes))
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'g', 3, 64) + " %" }
