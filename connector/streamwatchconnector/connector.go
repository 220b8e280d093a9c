package streamwatchconnector

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/aggregate"
	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/measure"
	"github.com/streamwatch/streamwatch/connector/streamwatchconnector/internal/metadata"
	"github.com/streamwatch/streamwatch/semconv"
)

// streamwatch is the connector. ConsumeTraces may run concurrently with
// itself and with flush; mu guards the recorder, which holds every series.
type streamwatch struct {
	cfg     Config
	next    consumer.Metrics
	logger  *zap.Logger
	tel     telemetry
	version string
	// instance is the collector's service.instance.id, put on the resource
	// of every metric sent, so the metrics of two replicas never merge in
	// a backend they both push to (docs/scale.md). Empty when the
	// collector has none.
	instance string

	mu  sync.Mutex
	rec *measure.Recorder

	// stop ends the flush loop; done is closed when it has returned.
	stop chan struct{}
	done chan struct{}
}

var _ connector.Traces = (*streamwatch)(nil)

func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics) (*streamwatch, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	tel := telemetry{tb}
	c := &streamwatch{
		cfg:     *cfg,
		next:    next,
		logger:  set.Logger,
		tel:     tel,
		version: set.BuildInfo.Version,
	}
	if v, ok := set.TelemetrySettings.Resource.Attributes().Get(string(semconv.ServiceInstanceID)); ok {
		c.instance = v.AsString()
	}
	c.cfg.Dimensions = append([]string(nil), cfg.Dimensions...)
	c.rec = measure.New(measure.Options{
		Options: aggregate.Options{
			MaxSeries:    cfg.MaxSeries,
			MaxExemplars: cfg.Exemplars.MaxPerDataPoint,
		},
		StallThresholdUs: cfg.StallThreshold.Microseconds(),
		Dimensions:       c.cfg.Dimensions,
	}, tel)
	return c, nil
}

// Capabilities implements consumer.Traces: spans are only read.
func (c *streamwatch) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// Start starts the flush loop.
func (c *streamwatch) Start(context.Context, component.Host) error {
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	go c.loop(c.stop, c.done)
	return nil
}

// Shutdown stops the flush loop and sends the last snapshot, so a collector
// that stops loses no interval. It is safe to call without Start and more
// than once.
func (c *streamwatch) Shutdown(ctx context.Context) error {
	if c.stop == nil {
		return nil
	}
	close(c.stop)
	c.stop = nil
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.flush(ctx)
}

// loop flushes every interval until stop is closed, then closes done. It
// takes the channels as arguments: Shutdown clears the fields.
func (c *streamwatch) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := c.flush(context.Background()); err != nil {
				c.logger.Warn("sending streamwatch metrics failed", zap.Error(err))
			}
		}
	}
}

// ConsumeTraces records the spans of td.
func (c *streamwatch) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	now := pcommon.NewTimestampFromTime(time.Now())
	c.mu.Lock()
	c.rec.Traces(td, now)
	c.mu.Unlock()
	return nil
}

// flush sends a cumulative snapshot of every series downstream. The
// snapshot is built under the lock and sent outside it, so a slow exporter
// never blocks ConsumeTraces.
func (c *streamwatch) flush(ctx context.Context) error {
	now := pcommon.NewTimestampFromTime(time.Now())
	c.mu.Lock()
	if c.rec.Empty() {
		c.mu.Unlock()
		return nil
	}
	md := pmetric.NewMetrics()
	c.rec.Emit(md, metadata.ScopeName, c.version, now)
	c.rec.TakeOverflowed(c.tel.overflowed)
	c.mu.Unlock()
	if c.instance != "" {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			rms.At(i).Resource().Attributes().PutStr(string(semconv.ServiceInstanceID), c.instance)
		}
	}
	return c.next.ConsumeMetrics(ctx, md)
}
