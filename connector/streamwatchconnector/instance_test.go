package streamwatchconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

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
	snapshot(t, sw)
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

// TestBlankReplicaIdentity: an id that every replica would share — blank,
// or the "<nil>" the collector makes of an unset ${env:POD_NAME} — is
// refused with an error that says why; a real one is taken.
func TestBlankReplicaIdentity(t *testing.T) {
	f := NewFactory()
	for _, id := range []string{"", "  ", "<nil>"} {
		set := connectortest.NewNopSettings(f.Type())
		set.TelemetrySettings.Resource.Attributes().PutStr(string(semconv.ServiceInstanceID), id)
		_, err := f.CreateTracesToMetrics(context.Background(), set, createDefaultConfig(), &consumertest.MetricsSink{})
		require.ErrorContains(t, err, "replicas' metrics would merge", "id %q", id)
	}
	set := connectortest.NewNopSettings(f.Type())
	set.TelemetrySettings.Resource.Attributes().PutStr(string(semconv.ServiceInstanceID), "gateway-0")
	_, err := f.CreateTracesToMetrics(context.Background(), set, createDefaultConfig(), &consumertest.MetricsSink{})
	require.NoError(t, err)
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

// TestResourcePerServiceName: one output resource per service.name, a
// service.name that is not a string read as its string form (not merged
// with the spans that have none).
func TestResourcePerServiceName(t *testing.T) {
	td := ptrace.NewTraces()
	for _, set := range []func(pcommon.Map){
		func(m pcommon.Map) { m.PutInt("service.name", 42) },
		func(pcommon.Map) {},
		func(m pcommon.Map) { m.PutStr("service.name", "a") },
		func(m pcommon.Map) { m.PutStr("service.name", "a"); m.PutStr("host.name", "h") },
	} {
		rs := td.ResourceSpans().AppendEmpty()
		set(rs.Resource().Attributes())
		validAttempt(rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	}
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	snapshot(t, c)
	require.Len(t, sink.AllMetrics(), 1)
	streams := map[string]int64{}
	rms := sink.AllMetrics()[0].ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		md := pmetric.NewMetrics()
		rms.At(i).CopyTo(md.ResourceMetrics().AppendEmpty())
		name := "(none)"
		if v, ok := rms.At(i).Resource().Attributes().Get("service.name"); ok {
			name = v.Str()
		}
		streams[name] += metricCount(md, "streamwatch.generation.duration")
	}
	require.Equal(t, map[string]int64{"42": 1, "(none)": 1, "a": 2}, streams)
}
