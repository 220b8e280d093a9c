package streamwatchconnector

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamwatch/streamwatch/processor/streamwatchprocessor"
	"github.com/streamwatch/streamwatch/semconv"
)

// rawProbeSpans strips everything the processor writes from the golden
// hedged input, leaving what hedgeprobe emits.
func rawProbeSpans(t *testing.T) ptrace.Traces {
	td := hedgedInput(t)
	derived := []string{
		string(semconv.TTFTMs), string(semconv.E2EMs), string(semconv.GenerationMs), string(semconv.StallMs),
		string(semconv.StallCount), string(semconv.ActiveGenerationMs), string(semconv.ITLMeanMs),
		string(semconv.StallThresholdMs), string(semconv.Derivation),
	}
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		for _, k := range derived {
			spans.At(i).Attributes().Remove(k)
		}
		spans.At(i).Events().RemoveIf(func(e ptrace.SpanEvent) bool { return e.Name() == semconv.EventStall })
	}
	return td
}

func connectorMetrics(t *testing.T, td ptrace.Traces) pmetric.Metrics {
	t.Helper()
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	require.NoError(t, c.flush(context.Background()))
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0]
}

// TestAfterProcessor runs raw probe spans through the real streamwatch
// processor (with stall spans on) and then the connector, and checks the
// metrics equal those the connector derives itself from the same raw spans:
// processor and connector share internal/breakdown, so a figure on a span
// and the metric built from it cannot disagree.
func TestAfterProcessor(t *testing.T) {
	pf := streamwatchprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig()
	pcfg.(*streamwatchprocessor.Config).StallSpans = true
	require.NoError(t, componenttest.CheckConfigStruct(pcfg))
	traceSink := &consumertest.TracesSink{}
	p, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pcfg, traceSink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), rawProbeSpans(t)))
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, traceSink.AllTraces(), 1)
	processed := traceSink.AllTraces()[0]
	spans := processed.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	require.Equal(t, 4, spans.Len(), "call, two attempts, one synthetic stall span")
	winner := spans.At(2)
	d, ok := winner.Attributes().Get(string(semconv.Derivation))
	require.True(t, ok, "the processor derived the winner")
	require.Equal(t, semconv.DerivationComplete, d.Str())

	viaProcessor := connectorMetrics(t, processed)
	direct := connectorMetrics(t, rawProbeSpans(t))
	require.NoError(t, pmetrictest.CompareMetrics(direct, viaProcessor,
		pmetrictest.IgnoreTimestamp(),
		pmetrictest.IgnoreStartTimestamp(),
		pmetrictest.IgnoreMetricDataPointsOrder(),
	))
}
