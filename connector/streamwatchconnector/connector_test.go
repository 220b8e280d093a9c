package streamwatchconnector

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/metadata"
	"github.com/streamwatch/streamwatch/semconv"
)

func hedgedInput(t testing.TB) ptrace.Traces {
	t.Helper()
	td, err := golden.ReadTraces(filepath.Join("testdata", "hedged_stall_winner", "input.yaml"))
	require.NoError(t, err)
	return td
}

func create(t testing.TB, cfg *Config, next consumer.Metrics) *streamwatch {
	t.Helper()
	f := NewFactory()
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(t, err)
	return c.(*streamwatch)
}

// snapshot sends a snapshot of everything consumed so far, as a stopping
// connector's last flush does. The flush loop sends a new series first at
// zero (TestLeadingZero); the tests that call this check what the series
// hold.
func snapshot(t testing.TB, c *streamwatch) {
	t.Helper()
	require.NoError(t, c.flush(context.Background(), true))
}

// seriesID names a data point: its resource's attributes, its metric and
// its attributes.
func seriesID(resource pcommon.Map, metric string, attrs pcommon.Map) string {
	return fmt.Sprintf("%v|%s|%v", resource.AsRaw(), metric, attrs.AsRaw())
}

// leadingZeros checks that zero, a flush loop's first snapshot, holds
// every series of full (the next snapshot, with nothing consumed between)
// and nothing else, each at zero with no exemplars and the start time it
// has in full, and that full counted something.
func leadingZeros(t testing.TB, zero, full pmetric.Metrics) {
	t.Helper()
	type point struct {
		start pcommon.Timestamp
		value float64 // a sum's value, a histogram's count + sum + buckets + exemplars
	}
	points := func(md pmetric.Metrics) map[string]point {
		out := map[string]point{}
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			res := rms.At(i).Resource().Attributes()
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				m := ms.At(j)
				switch m.Type() {
				case pmetric.MetricTypeSum:
					for k := 0; k < m.Sum().DataPoints().Len(); k++ {
						dp := m.Sum().DataPoints().At(k)
						out[seriesID(res, m.Name(), dp.Attributes())] = point{dp.StartTimestamp(), float64(dp.IntValue())}
					}
				case pmetric.MetricTypeHistogram:
					for k := 0; k < m.Histogram().DataPoints().Len(); k++ {
						dp := m.Histogram().DataPoints().At(k)
						v := float64(dp.Count()) + dp.Sum() + float64(dp.Exemplars().Len())
						for _, b := range dp.BucketCounts().All() {
							v += float64(b)
						}
						require.Equal(t, dp.ExplicitBounds().Len()+1, dp.BucketCounts().Len(), "%s: buckets", m.Name())
						out[seriesID(res, m.Name(), dp.Attributes())] = point{dp.StartTimestamp(), v}
					}
				default:
					t.Fatalf("%s: unexpected type %s", m.Name(), m.Type())
				}
			}
		}
		return out
	}
	z, f := points(zero), points(full)
	require.NotEmpty(t, f)
	require.Len(t, z, len(f), "the same series")
	var counted float64
	for id, p := range f {
		zp, ok := z[id]
		require.True(t, ok, "series %s has no leading zero", id)
		assert.Zero(t, zp.value, "%s: leading point", id)
		assert.Equal(t, p.start, zp.start, "%s: start time", id)
		counted += p.value
	}
	assert.Positive(t, counted, "the next snapshot holds the counts")
}

// TestLeadingZero: the flush loop sends a new series first at zero and
// its counts from the next flush on, so that a backend computing
// increases between samples counts them; a series born later gets its own
// leading zero while the older ones carry on; with leading_zero off, and
// in a stopping connector's last flush, the first snapshot holds every
// count.
func TestLeadingZero(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
	require.NoError(t, c.flush(context.Background(), false))
	require.NoError(t, c.flush(context.Background(), false))
	leadingZeros(t, sink.AllMetrics()[0], sink.AllMetrics()[1])
	assert.Equal(t, int64(1), metricCount(sink.AllMetrics()[1], semconv.MetricCalls))

	// The same calls under another model: new series, beside the old.
	other := hedgedInput(t)
	spans := other.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		spans.At(i).Attributes().PutStr(string(semconv.GenAIRequestModel), "another-model")
	}
	require.NoError(t, c.ConsumeTraces(context.Background(), other))
	require.NoError(t, c.flush(context.Background(), false))
	require.NoError(t, c.flush(context.Background(), false))
	calls := func(md pmetric.Metrics) map[string]int64 {
		out := map[string]int64{}
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() != semconv.MetricCalls {
				continue
			}
			for k := 0; k < ms.At(j).Sum().DataPoints().Len(); k++ {
				dp := ms.At(j).Sum().DataPoints().At(k)
				model, _ := dp.Attributes().Get(string(semconv.GenAIRequestModel))
				out[model.Str()] = dp.IntValue()
			}
		}
		return out
	}
	model := hedgedInput(t).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()[string(semconv.GenAIRequestModel)].(string)
	assert.Equal(t, map[string]int64{model: 1, "another-model": 0}, calls(sink.AllMetrics()[2]), "the new series' leading zero")
	assert.Equal(t, map[string]int64{model: 1, "another-model": 1}, calls(sink.AllMetrics()[3]))

	for _, tc := range []struct {
		name    string
		leading bool
		last    bool
	}{{"leading_zero off", false, false}, {"last flush", true, true}} {
		sink := &consumertest.MetricsSink{}
		cfg := createDefaultConfig().(*Config)
		cfg.LeadingZero = tc.leading
		c := create(t, cfg, sink)
		require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
		require.NoError(t, c.flush(context.Background(), tc.last))
		assert.Equal(t, int64(1), metricCount(sink.AllMetrics()[0], semconv.MetricCalls), tc.name)
	}
}

// TestLeadingZeroOfAFailedPush: a snapshot the backend never got does not
// count as a series' leading zero. The first snapshot that does reach it
// carries the zero again, then the counts — where it used to carry the
// counts at once, which rate() then takes for where the series started.
// A series already sent is not sent at zero again after a failed push:
// that would read as a counter reset.
func TestLeadingZeroOfAFailedPush(t *testing.T) {
	var got []int64
	fail := 0
	next, err := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		if fail > 0 {
			fail--
			return errors.New("backend down")
		}
		got = append(got, metricCount(md, semconv.MetricCalls))
		return nil
	})
	require.NoError(t, err)
	c := create(t, createDefaultConfig().(*Config), next)
	require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
	fail = 2
	require.Error(t, c.flush(context.Background(), false))
	require.Error(t, c.flush(context.Background(), false))
	require.NoError(t, c.flush(context.Background(), false))
	require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
	fail = 1
	require.Error(t, c.flush(context.Background(), false))
	require.NoError(t, c.flush(context.Background(), false))
	assert.Equal(t, []int64{0, 2}, got)
}

// metricCount returns the count (histogram) or value (sum) of the first
// data point of the metric name in md, or -1.
func metricCount(md pmetric.Metrics, name string) int64 {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != name {
					continue
				}
				switch m.Type() {
				case pmetric.MetricTypeHistogram:
					return int64(m.Histogram().DataPoints().At(0).Count())
				case pmetric.MetricTypeSum:
					return m.Sum().DataPoints().At(0).IntValue()
				}
			}
		}
	}
	return -1
}

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "streamwatch", f.Type().String())
	assert.Equal(t, metadata.TracesToMetricsStability, f.TracesToMetricsStability())
	c := create(t, createDefaultConfig().(*Config), consumertest.NewNop())
	assert.False(t, c.Capabilities().MutatesData)
}

// TestLifecycle: create, start, consume, shutdown; the last snapshot is sent
// at shutdown and no goroutine survives (goleak in TestMain).
func TestLifecycle(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
	require.NoError(t, c.Shutdown(context.Background()))
	require.Len(t, sink.AllMetrics(), 1)
	assert.Equal(t, int64(1), metricCount(sink.AllMetrics()[0], "streamwatch.calls"))
	require.NoError(t, c.Shutdown(context.Background()), "a second shutdown is harmless")
}

func TestShutdownWithoutStart(t *testing.T) {
	c := create(t, createDefaultConfig().(*Config), consumertest.NewNop())
	require.NoError(t, c.Shutdown(context.Background()))
}

// TestFlushInterval checks, in virtual time, that a snapshot goes out
// exactly every interval, cumulative, and only once something was recorded.
func TestFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &consumertest.MetricsSink{}
		cfg := createDefaultConfig().(*Config)
		c := create(t, cfg, sink)
		start := time.Now()
		require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))

		time.Sleep(cfg.Interval)
		synctest.Wait()
		assert.Empty(t, sink.AllMetrics(), "nothing recorded, nothing sent")

		require.NoError(t, c.ConsumeTraces(t.Context(), hedgedInput(t)))
		time.Sleep(cfg.Interval - time.Nanosecond)
		synctest.Wait()
		assert.Empty(t, sink.AllMetrics(), "not before the tick")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Len(t, sink.AllMetrics(), 1)
		md := sink.AllMetrics()[0]
		assert.Equal(t, int64(0), metricCount(md, "streamwatch.calls"), "a new series' leading zero")
		dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
		assert.Equal(t, 2*cfg.Interval, dp.Timestamp().AsTime().Sub(start), "sent at the second tick")
		assert.Equal(t, cfg.Interval, dp.StartTimestamp().AsTime().Sub(start), "series started when first recorded")

		require.NoError(t, c.ConsumeTraces(t.Context(), hedgedInput(t)))
		time.Sleep(cfg.Interval)
		synctest.Wait()
		require.Len(t, sink.AllMetrics(), 2)
		assert.Equal(t, int64(2), metricCount(sink.AllMetrics()[1], "streamwatch.calls"), "cumulative")

		time.Sleep(cfg.Interval)
		synctest.Wait()
		require.Len(t, sink.AllMetrics(), 3, "cumulative series are re-sent every interval")
		assert.Equal(t, int64(2), metricCount(sink.AllMetrics()[2], "streamwatch.calls"))
		require.NoError(t, c.Shutdown(t.Context()))
	})
}

// TestExemplarsClearedPerFlush: an exemplar appears in one snapshot only,
// the first after its series' leading zero.
func TestExemplarsClearedPerFlush(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
	for range 3 {
		require.NoError(t, c.flush(context.Background(), false))
	}
	require.Len(t, sink.AllMetrics(), 3)
	exemplars := func(md pmetric.Metrics) int {
		n := 0
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := 0; i < ms.Len(); i++ {
			if ms.At(i).Type() == pmetric.MetricTypeHistogram {
				dps := ms.At(i).Histogram().DataPoints()
				for j := 0; j < dps.Len(); j++ {
					n += dps.At(j).Exemplars().Len()
				}
			}
		}
		return n
	}
	// One per observation, but one per attempt for time_per_output_chunk,
	// whose gaps are added at once.
	assert.Equal(t, 0, exemplars(sink.AllMetrics()[0]), "the leading zeros")
	assert.Equal(t, 10, exemplars(sink.AllMetrics()[1]))
	assert.Equal(t, 0, exemplars(sink.AllMetrics()[2]))
}

// TestExemplarCap: five 2,000-chunk winners keep max_per_data_point
// exemplars, one per winner while there is room.
func TestExemplarCap(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	cfg := createDefaultConfig().(*Config)
	cfg.Exemplars.MaxPerDataPoint = 3
	c := create(t, cfg, sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), benchBatch(5, 2000)))
	snapshot(t, c)
	ms := sink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() == "gen_ai.client.operation.time_per_output_chunk" {
			dp := ms.At(i).Histogram().DataPoints().At(0)
			assert.Equal(t, uint64(5*1999), dp.Count())
			assert.Equal(t, 3, dp.Exemplars().Len())
			return
		}
	}
	t.Fatal("no time_per_output_chunk")
}

// TestDownstreamError: a failing exporter is logged; the loop goes on.
func TestDownstreamError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := createDefaultConfig().(*Config)
		c := create(t, cfg, consumertest.NewErr(errors.New("exporter down")))
		require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))
		require.NoError(t, c.ConsumeTraces(t.Context(), hedgedInput(t)))
		time.Sleep(3 * cfg.Interval)
		synctest.Wait()
		require.ErrorContains(t, c.Shutdown(t.Context()), "exporter down", "the final flush reports it")
	})
}

// TestConcurrentConsume: ConsumeTraces and flush run concurrently (-race).
func TestConcurrentConsume(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	c := create(t, createDefaultConfig().(*Config), sink)
	td := hedgedInput(t)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				assert.NoError(t, c.ConsumeTraces(context.Background(), td))
			}
		}()
	}
	for range 10 {
		require.NoError(t, c.flush(context.Background(), false))
	}
	for range 4 {
		<-done
	}
	// Two flushes of the loop's kind: the second holds every count, the
	// first may have been a series' leading zero.
	require.NoError(t, c.flush(context.Background(), false))
	require.NoError(t, c.flush(context.Background(), false))
	last := sink.AllMetrics()[len(sink.AllMetrics())-1]
	assert.Equal(t, int64(200), metricCount(last, "streamwatch.calls"))
}

// TestShutdownCanceled: a shutdown whose context has already ended still
// sends the last snapshot when the loop is idle (there is nothing to wait
// for), stops the loop, and a second shutdown sends nothing more.
func TestShutdownCanceled(t *testing.T) {
	for range 20 { // the old code lost the snapshot on most runs
		sink := &consumertest.MetricsSink{}
		c := create(t, createDefaultConfig().(*Config), sink)
		require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
		require.NoError(t, c.ConsumeTraces(context.Background(), hedgedInput(t)))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, c.Shutdown(ctx))
		require.Len(t, sink.AllMetrics(), 1, "the last snapshot")
		assert.Equal(t, int64(1), metricCount(sink.AllMetrics()[0], "streamwatch.calls"))
		require.NoError(t, c.Shutdown(context.Background()))
		assert.Len(t, sink.AllMetrics(), 1, "sent once")
		<-c.done // the loop has stopped (goleak checks too)
	}
}

// TestShutdownDuringFlush: a shutdown whose context ends while the loop is
// still sending its own snapshot returns the context's error without
// sending, and the next shutdown sends the last snapshot, after the loop's.
func TestShutdownDuringFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var sent []int64
		next, err := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
			<-release
			sent = append(sent, metricCount(md, "streamwatch.calls"))
			return nil
		})
		require.NoError(t, err)
		c := heldSnapshot(t, next)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		require.ErrorIs(t, c.Shutdown(ctx), context.DeadlineExceeded)
		require.NoError(t, c.ConsumeTraces(t.Context(), hedgedInput(t)))

		close(release)
		require.NoError(t, c.Shutdown(t.Context()))
		assert.Equal(t, []int64{0, 2}, sent, "the loop's snapshot (the series' leading zero), then the last one")
		require.NoError(t, c.Shutdown(t.Context()))
		assert.Len(t, sent, 2, "sent once")
	})
}

// TestShutdownCancelsTheLoopsFlush (outside review): an exporter that holds
// a push until its context ends (one retrying through an outage, without a
// queue) held the loop's snapshot, which nothing could cancel: Shutdown
// waited out its own deadline and returned its error, leaving the loop
// running and the last snapshot unsent. Shutdown now cancels the loop's
// push and sends the last snapshot, with the counts of the cancelled one.
func TestShutdownCancelsTheLoopsFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pushes := 0
		var sent []int64
		next, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
			pushes++
			if pushes == 1 { // the outage, for the loop's push
				<-ctx.Done()
				return ctx.Err()
			}
			sent = append(sent, metricCount(md, "streamwatch.calls"))
			return nil
		})
		require.NoError(t, err)
		c := heldSnapshot(t, next)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		require.NoError(t, c.Shutdown(ctx))
		assert.Zero(t, time.Since(start), "Shutdown waited on the held push")
		assert.Equal(t, []int64{1}, sent, "the last snapshot, with the call the cancelled push carried")
		<-c.done
	})
}

// heldSnapshot starts a connector sending to next, in a synctest bubble,
// records a call, and returns once the loop's first snapshot has reached
// next, which holds it.
func heldSnapshot(t *testing.T, next consumer.Metrics) *streamwatch {
	cfg := createDefaultConfig().(*Config)
	c := create(t, cfg, next)
	require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, c.ConsumeTraces(t.Context(), hedgedInput(t)))
	time.Sleep(cfg.Interval)
	synctest.Wait() // the loop's snapshot waits on next
	return c
}

// TestStartTwice: a second Start starts no second loop, which Shutdown
// would leave running (goleak in TestMain).
func TestStartTwice(t *testing.T) {
	c := create(t, createDefaultConfig().(*Config), consumertest.NewNop())
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	done := c.done
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, c.Shutdown(context.Background()))
	select {
	case <-done:
	default:
		t.Fatal("the first Start's loop still runs after Shutdown")
	}
}
