package loadgen

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector"
	"github.com/streamwatch/streamwatch/internal/testbed/hedgeenv"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor"
	"github.com/streamwatch/streamwatch/semconv"
)

// TestMain runs the tests with hedgeprobe's settings their own (see
// hedgeenv) and checks that none leaks a goroutine.
func TestMain(m *testing.M) {
	hedgeenv.Unset()
	goleak.VerifyTestMain(m)
}

func decode(t *testing.T, r Request) ptrace.Traces {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(r.Body); err != nil {
		t.Fatal(err)
	}
	return req.Traces()
}

// TestCountsAreWhatStreamwatchDerives runs generated requests through the
// real streamwatch processor and connector, with the timeline kept and
// with drop_timeline (whose pooled ITL comes from the gap counts), and
// checks the metrics equal the Counts the generator claims: the shape is
// one the components read the way hedgeprobe's spans are read, and the
// e2e tests can trust Counts. The processor finds nothing to note on any
// span (streamwatch.derivation.problem), as on hedgeprobe's: a note would
// cost the load test a formatted string per span that no real load pays.
func TestCountsAreWhatStreamwatchDerives(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("drop_timeline=%v", drop), func(t *testing.T) { countsAreWhatStreamwatchDerives(t, drop) })
	}
}

func countsAreWhatStreamwatchDerives(t *testing.T, dropTimeline bool) {
	shape := DefaultShape()
	shape.CallsPerRequest = 50
	reqs, err := shape.Requests(8, 7, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var want Counts
	for _, r := range reqs {
		want.Add(r.Counts)
	}
	if want.Hedges == 0 || want.Stalls == 0 || want.CallsError == 0 {
		t.Fatalf("400 calls should hold hedges, stalls and errors: %+v", want)
	}

	ctx := context.Background()
	sink := &consumertest.MetricsSink{}
	cf := streamwatchconnector.NewFactory()
	conn, err := cf.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(cf.Type()), cf.CreateDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	var derived int
	noted, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		forEachSpan(td, func(sp ptrace.Span) {
			if _, ok := sp.Attributes().Get(string(semconv.Derivation)); ok {
				derived++
			}
			if v, ok := sp.Attributes().Get(string(semconv.DerivationProblem)); ok && len(notes) < 3 {
				notes = append(notes, sp.Name()+": "+v.AsString())
			}
		})
		return conn.ConsumeTraces(ctx, td)
	})
	if err != nil {
		t.Fatal(err)
	}
	pf := streamwatchprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*streamwatchprocessor.Config)
	pcfg.StallSpans = true
	pcfg.DropTimeline = dropTimeline
	proc, err := pf.CreateTraces(ctx, processortest.NewNopSettings(pf.Type()), pcfg, noted)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	if err := conn.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	var spans, chunks int64
	for _, r := range reqs {
		td := decode(t, r)
		spans += int64(td.SpanCount())
		chunks += countChunks(td)
		if err := proc.ConsumeTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	if err := proc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Shutdown(ctx); err != nil { // sends the last snapshot
		t.Fatal(err)
	}
	if spans != want.Spans || chunks != want.Chunks {
		t.Errorf("requests hold %d spans and %d chunks, Counts say %d and %d", spans, chunks, want.Spans, want.Chunks)
	}
	if derived == 0 || len(notes) > 0 {
		t.Errorf("the processor derived %d spans and noted a problem on %q", derived, notes)
	}
	mds := sink.AllMetrics()
	if len(mds) == 0 {
		t.Fatal("the connector sent nothing")
	}
	md := mds[len(mds)-1]
	for _, c := range []struct {
		metric, outcome string
		want            int64
	}{
		{semconv.MetricCalls, "", want.Calls},
		{semconv.MetricCalls, semconv.OutcomeOK, want.CallsOK},
		{semconv.MetricCalls, semconv.OutcomeError, want.CallsError},
		{semconv.MetricHedges, "", want.Hedges},
		{semconv.MetricStalls, "", want.Stalls},
		// The caller's view is the winner's timeline: callers see every
		// stall (losers never stall here).
		{semconv.MetricCallStalls, "", want.Stalls},
	} {
		if got := sumOf(md, c.metric, c.outcome); got != c.want {
			t.Errorf("%s{outcome=%q} = %d, generator counted %d", c.metric, c.outcome, got, c.want)
		}
	}
	if got := histogramCount(md, semconv.MetricTimePerOutputChunk); got != uint64(want.WinnerGaps) {
		t.Errorf("%s count = %d, generator counted %d winner gaps", semconv.MetricTimePerOutputChunk, got, want.WinnerGaps)
	}
}

// metricsNamed calls fn with every metric called name in md.
func metricsNamed(md pmetric.Metrics, name string, fn func(pmetric.Metric)) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				if ms.At(k).Name() == name {
					fn(ms.At(k))
				}
			}
		}
	}
}

// histogramCount is the total count of histogram name over its series.
func histogramCount(md pmetric.Metrics, name string) uint64 {
	var n uint64
	metricsNamed(md, name, func(m pmetric.Metric) {
		dps := m.Histogram().DataPoints()
		for d := range dps.Len() {
			n += dps.At(d).Count()
		}
	})
	return n
}

func countChunks(td ptrace.Traces) int64 {
	var n int64
	forEachSpan(td, func(sp ptrace.Span) {
		if v, ok := sp.Attributes().Get(string(semconv.ChunkOffsetsUs)); ok {
			n += int64(v.Slice().Len())
		}
	})
	return n
}

// forEachSpan calls fn with every span of td.
func forEachSpan(td ptrace.Traces, fn func(ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			sp := sss.At(j).Spans()
			for k := range sp.Len() {
				fn(sp.At(k))
			}
		}
	}
}

// sumOf adds up every data point of the sum metric name, only those whose
// streamwatch.outcome is outcome when it is set.
func sumOf(md pmetric.Metrics, name, outcome string) int64 {
	var n int64
	metricsNamed(md, name, func(m pmetric.Metric) {
		dps := m.Sum().DataPoints()
		for d := range dps.Len() {
			if outcome != "" {
				v, _ := dps.At(d).Attributes().Get(string(semconv.Outcome))
				if v.AsString() != outcome {
					continue
				}
			}
			n += dps.At(d).IntValue()
		}
	})
	return n
}

func TestRequestsDeterministic(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	a, err := DefaultShape().Requests(2, 3, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DefaultShape().Requests(2, 3, now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if string(a[i].Body) != string(b[i].Body) || a[i].Counts != b[i].Counts {
			t.Fatalf("request %d differs between two builds with one seed", i)
		}
	}
}

func TestShapeValidate(t *testing.T) {
	for name, s := range map[string]Shape{
		"too few chunks":    {Chunks: 10},
		"fraction above 1":  {HedgeFraction: 1.5},
		"stall under 2 s":   {StallFraction: 0.1, Stall: time.Second},
		"negative duration": {TTFT: -time.Second},
	} {
		if _, err := s.Requests(1, 1, time.Now()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// otlpServer is an OTLP/gRPC traces endpoint on 127.0.0.1 that counts
// spans, and refuses every request while refuse is set.
type otlpServer struct {
	ptraceotlp.UnimplementedGRPCServer
	spans  atomic.Int64
	refuse atomic.Bool
	addr   string
}

func (s *otlpServer) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	if s.refuse.Load() {
		return ptraceotlp.NewExportResponse(), status.Error(codes.ResourceExhausted, "memory limit")
	}
	s.spans.Add(int64(req.Traces().SpanCount()))
	return ptraceotlp.NewExportResponse(), nil
}

func startServer(t *testing.T) *otlpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &otlpServer{addr: l.Addr().String()}
	gs := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(gs, s)
	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(l) })
	t.Cleanup(func() { gs.Stop(); wg.Wait() })
	return s
}

// TestSendSplitsRoundRobin: request n goes to target n mod 2, and the
// per-target counts are what each server received.
func TestSendSplitsRoundRobin(t *testing.T) {
	a, b := startServer(t), startServer(t)
	shape := DefaultShape()
	shape.CallsPerRequest = 5
	reqs, err := shape.Requests(3, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Send(t.Context(), Options{Targets: []string{a.addr, b.addr}, Requests: reqs, Senders: 3, MaxRequests: 11, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent.Requests != 11 || res.PerTarget[0].Requests != 6 || res.PerTarget[1].Requests != 5 {
		t.Fatalf("requests sent %d, per target %d and %d; want 11, 6 and 5", res.Sent.Requests, res.PerTarget[0].Requests, res.PerTarget[1].Requests)
	}
	if got := a.spans.Load(); got != res.PerTarget[0].Spans {
		t.Errorf("target 0 received %d spans, Send says %d", got, res.PerTarget[0].Spans)
	}
	if got := b.spans.Load(); got != res.PerTarget[1].Spans {
		t.Errorf("target 1 received %d spans, Send says %d", got, res.PerTarget[1].Spans)
	}
}

func TestSendCountsRefusals(t *testing.T) {
	s := startServer(t)
	s.refuse.Store(true)
	reqs, err := DefaultShape().Requests(1, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Send(t.Context(), Options{Targets: []string{s.addr}, Requests: reqs, MaxRequests: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused != 4 || res.Sent.Requests != 0 {
		t.Errorf("refused %d, sent %d; want 4 and 0", res.Refused, res.Sent.Requests)
	}
}

// TestSendStopsAtDuration: a closed loop against a live server ends by
// itself at its duration.
func TestSendStopsAtDuration(t *testing.T) {
	s := startServer(t)
	shape := DefaultShape()
	shape.CallsPerRequest = 1
	reqs, err := shape.Requests(1, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// 1 s: long enough that the connection and a first answer fit in it
	// on a loaded machine under -race.
	res, err := Send(t.Context(), Options{Targets: []string{s.addr}, Requests: reqs, Senders: 2, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Send ran %s past a 1 s bound", el)
	}
	if res.Sent.Requests == 0 {
		t.Error("nothing acknowledged in 1 s")
	}
}

func TestSendRefusesNonLoopback(t *testing.T) {
	reqs, err := DefaultShape().Requests(1, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"10.0.0.1:4317", "example.com:4317", "0.0.0.0:4317", "nohostport"} {
		if _, err := Send(t.Context(), Options{Targets: []string{target}, Requests: reqs, MaxRequests: 1}); err == nil {
			t.Errorf("%s: sent", target)
		}
	}
	if err := CheckLoopback("[::1]:4317"); err != nil {
		t.Error(err)
	}
}

func TestSendNeedsABound(t *testing.T) {
	reqs, err := DefaultShape().Requests(1, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Send(t.Context(), Options{Targets: []string{"127.0.0.1:1"}, Requests: reqs}); err == nil {
		t.Error("no bound accepted")
	}
}
