package loadgen

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector"
	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor"
)

// The whole traces pipeline in one goroutine, per export request of the
// load test's shape: unmarshal (what the OTLP receiver does), the
// streamwatch processor, a batch of batchSpans spans (what the batch
// processor does: move each request into a pending batch), and the
// streamwatch connector — placed where deploy/collector.yaml puts it (on
// the batch) or straight behind the processor. No gRPC, no process, so
// variants compare without the noise of a shared machine; the figure is
// ns per content chunk.

// batchSpans is the batch processor's default send_batch_size.
const batchSpans = 8192

type pipelineVariant struct {
	processor, connector, connectorOnBatch, dropTimeline bool
}

func BenchmarkPipeline(b *testing.B) {
	for _, v := range []struct {
		name string
		pipelineVariant
	}{
		// The baseline: receiver and batch only.
		{"baseline", pipelineVariant{}},
		{"processor", pipelineVariant{processor: true}},
		{"processor_drop_timeline", pipelineVariant{processor: true, dropTimeline: true}},
		// deploy/collector.yaml: the connector reads each batch.
		{"shipped", pipelineVariant{processor: true, connector: true, connectorOnBatch: true}},
		{"shipped_drop_timeline", pipelineVariant{processor: true, connector: true, connectorOnBatch: true, dropTimeline: true}},
		// The connector right behind the processor, on each request.
		{"connector_first", pipelineVariant{processor: true, connector: true}},
		{"connector_first_drop_timeline", pipelineVariant{processor: true, connector: true, dropTimeline: true}},
		// deploy/gateway.yaml: no processor, the connector derives each
		// request itself.
		{"connector_alone", pipelineVariant{connector: true}},
	} {
		b.Run(v.name, func(b *testing.B) { benchPipeline(b, v.pipelineVariant) })
	}
}

func benchPipeline(b *testing.B, v pipelineVariant) {
	reqs, err := DefaultShape().Requests(32, 1, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	host := componenttest.NewNopHost()

	var conn consumer.Traces = consumertest.NewNop()
	if v.connector {
		cf := streamwatchconnector.NewFactory()
		c, err := cf.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(cf.Type()), cf.CreateDefaultConfig(), consumertest.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx, host); err != nil {
			b.Fatal(err)
		}
		defer c.Shutdown(ctx)
		conn = c
	}
	pending := ptrace.NewTraces()
	batch := func(td ptrace.Traces) error {
		td.ResourceSpans().MoveAndAppendTo(pending.ResourceSpans())
		if pending.SpanCount() < batchSpans {
			return nil
		}
		full := pending
		pending = ptrace.NewTraces()
		if v.connectorOnBatch {
			return conn.ConsumeTraces(ctx, full)
		}
		return nil
	}
	var next consumer.Traces
	next, _ = consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if v.connector && !v.connectorOnBatch {
			if err := conn.ConsumeTraces(ctx, td); err != nil {
				return err
			}
		}
		return batch(td)
	})
	if v.processor {
		pf := streamwatchprocessor.NewFactory()
		pcfg := pf.CreateDefaultConfig().(*streamwatchprocessor.Config)
		pcfg.StallSpans = true // as deploy/collector.yaml
		pcfg.DropTimeline = v.dropTimeline
		p, err := pf.CreateTraces(ctx, processortest.NewNopSettings(pf.Type()), pcfg, next)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(ctx, host); err != nil {
			b.Fatal(err)
		}
		defer p.Shutdown(ctx)
		next = p
	}

	var u ptrace.ProtoUnmarshaler
	var chunks int64
	b.ReportAllocs()
	i := 0
	cpu0 := processCPU(b)
	for b.Loop() {
		r := reqs[i%len(reqs)]
		i++
		td, err := u.UnmarshalTraces(r.Body)
		if err != nil {
			b.Fatal(err)
		}
		if err := next.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		chunks += r.Counts.Chunks
	}
	cpu := processCPU(b) - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/chunk")
	// CPU time of the whole process (GC workers included) per chunk: on a
	// shared machine it drifts far less than wall time.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(chunks), "cpu-ns/chunk")
}

// processCPU is the user and system time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
