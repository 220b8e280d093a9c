package streamwatchconnector

import (
	"context"
	"fmt"
	"strings"
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
	// stopped is set once Shutdown has closed stop, finished once it has
	// sent the last snapshot (a Shutdown whose context ended first leaves
	// it for the next one to send).
	stop     chan struct{}
	done     chan struct{}
	stopped  bool
	finished bool
	// cancelLoop cancels the context of the loop's snapshots: Shutdown
	// cuts short one that an exporter holds (retrying through an outage,
	// without a queue), whose counts go in the last snapshot instead.
	cancelLoop context.CancelFunc
	// flushing is held by whoever is sending a snapshot: the loop's tick
	// and Shutdown's last snapshot must not overlap, or a cumulative
	// snapshot could reach the exporter after a newer one.
	flushing chan struct{}
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

		flushing: make(chan struct{}, 1),
	}
	if v, ok := set.TelemetrySettings.Resource.Attributes().Get(string(semconv.ServiceInstanceID)); ok {
		c.instance = v.AsString()
		// The id tells replicas' series apart (docs/scale.md, "Replicas").
		// A blank one, or the "<nil>" the collector makes of
		// ${env:POD_NAME} with POD_NAME unset, is the same on every
		// replica: their cumulative series would overwrite each other
		// wherever they meet, so refuse to start rather than corrupt them.
		if id := strings.TrimSpace(c.instance); id == "" || id == "<nil>" {
			return nil, fmt.Errorf("streamwatch connector: the collector's service.instance.id is %q, the same on every replica, so replicas' metrics would merge: "+
				"set it to a value unique per replica (is the environment variable it reads unset?) or leave it out, and the collector draws a random one", c.instance)
		}
	}
	c.cfg.Dimensions = append([]string(nil), cfg.Dimensions...)
	c.rec = measure.New(measure.Options{
		Options: aggregate.Options{
			MaxSeries:    cfg.MaxSeries,
			MaxExemplars: cfg.Exemplars.MaxPerDataPoint,
			LeadingZero:  cfg.LeadingZero,
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

// Start starts the flush loop. A second Start is a no-op: it would
// otherwise leave the first loop running for ever.
func (c *streamwatch) Start(context.Context, component.Host) error {
	if c.stop != nil {
		return nil
	}
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	// Not Start's context, which ends when Start returns.
	ctx, cancel := context.WithCancel(context.Background())
	c.cancelLoop = cancel
	go c.loop(ctx, c.stop, c.done)
	return nil
}

// Shutdown stops the flush loop and sends the last snapshot, so a collector
// that stops loses no interval (where the metrics are pushed; a pull
// exporter stops before anything scrapes it). A snapshot the loop is
// sending is cancelled — an exporter that honours its context stops
// retrying it — and its counts go in the last one. Shutdown waits for ctx
// only while the loop's snapshot is still under way: a context that has
// already ended still gets the last snapshot sent when the loop is idle,
// and if ctx ends first a later Shutdown sends it. It is safe to call
// without Start and more than once.
func (c *streamwatch) Shutdown(ctx context.Context) error {
	if c.stop == nil || c.finished {
		return nil
	}
	if !c.stopped {
		close(c.stop)
		c.cancelLoop()
		c.stopped = true
	}
	// The non-blocking try first: a select with an ended ctx would
	// otherwise pick at random between the two.
	select {
	case c.flushing <- struct{}{}:
	default:
		select {
		case c.flushing <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := c.flush(ctx, true)
	<-c.flushing
	c.finished = true
	// The loop sends nothing once stop is closed, so it returns at once.
	<-c.done
	return err
}

// loop flushes every interval until stop is closed, then closes done.
// Its snapshots are sent under ctx, which Shutdown cancels.
func (c *streamwatch) loop(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		select {
		case <-stop:
			return
		case c.flushing <- struct{}{}:
		}
		// Shutdown may have closed stop while both were ready: its last
		// snapshot is then the newest one, and this one must not follow it.
		select {
		case <-stop:
			<-c.flushing
			return
		default:
		}
		err := c.flush(ctx, false)
		<-c.flushing
		if err != nil && ctx.Err() == nil { // cancelled: the last snapshot sends it
			c.logger.Warn("sending streamwatch metrics failed", zap.Error(err))
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

// flush sends a cumulative snapshot of every series downstream; last is
// Shutdown's, after which none follows, so it sends every count (a new
// series without its leading zero). The snapshot is built under the lock
// and sent outside it, so a slow exporter never blocks ConsumeTraces.
func (c *streamwatch) flush(ctx context.Context, last bool) error {
	c.mu.Lock()
	// Read under the lock: a series born before it was taken started no
	// later than now, so no point has a start after its time.
	now := pcommon.NewTimestampFromTime(time.Now())
	if c.rec.Empty() {
		c.mu.Unlock()
		return nil
	}
	md := pmetric.NewMetrics()
	c.rec.Emit(md, metadata.ScopeName, c.version, now, last)
	c.rec.TakeOverflowed(c.tel.overflowed)
	c.mu.Unlock()
	if c.instance != "" {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			rms.At(i).Resource().Attributes().PutStr(string(semconv.ServiceInstanceID), c.instance)
		}
	}
	if err := c.next.ConsumeMetrics(ctx, md); err != nil {
		// Flushes never overlap (c.flushing), so no Emit came between.
		c.mu.Lock()
		c.rec.Unsent()
		c.mu.Unlock()
		return err
	}
	return nil
}
