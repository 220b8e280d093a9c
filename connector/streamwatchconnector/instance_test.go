package streamwatchconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamwatch/streamwatch/semconv"
)

// replicaMetrics runs the golden hedged spans through a connector whose
// collector has the service.instance.id instance ("" for none) and returns
// what one flush sends.
func replicaMetrics(t *testing.T, instance string) pmetric.Metrics {
	t.Helper()
	f := NewFactory()
	set := connectortest.NewNopSettings(f.Type())
	if instance != "" {
		set.TelemetrySettings.Resource.Attributes().PutStr(string(semconv.ServiceInstanceID), instance)
	}
	sink := &consumertest.MetricsSink{}
	c, err := f.CreateTracesToMetrics(context.Background(), set, createDefaultConfig(), sink)
	require.NoError(t, err)
	sw := c.(*streamwatch)
	require.NoError(t, sw.ConsumeTraces(context.Background(), hedgedInput(t)))
	require.NoError(t, sw.flush(context.Background()))
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0]
}

// TestReplicaIdentity: every resource a replica sends carries that
// replica's service.instance.id beside the spans' service.name, so two
// replicas pushing to one backend keep separate series.
func TestReplicaIdentity(t *testing.T) {
	for _, id := range []string{"gateway-0", "gateway-1"} {
		md := replicaMetrics(t, id)
		rms := md.ResourceMetrics()
		require.Positive(t, rms.Len())
		for i := 0; i < rms.Len(); i++ {
			attrs := rms.At(i).Resource().Attributes()
			v, ok := attrs.Get(string(semconv.ServiceInstanceID))
			require.True(t, ok, "resource %d has no %s", i, semconv.ServiceInstanceID)
			require.Equal(t, id, v.Str())
			_, ok = attrs.Get("service.name")
			require.True(t, ok, "the spans' service.name stays")
		}
	}
}

// TestNoReplicaIdentity: a collector without a service.instance.id (a
// test host) adds nothing.
func TestNoReplicaIdentity(t *testing.T) {
	md := replicaMetrics(t, "")
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		_, ok := rms.At(i).Resource().Attributes().Get(string(semconv.ServiceInstanceID))
		require.False(t, ok)
	}
}
