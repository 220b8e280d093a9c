package main

// The -cap measurement: what the series cap costs a scrape and a
// gateway's remote write (docs/scale.md, Sizing).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/streamwatch/streamwatch/internal/testbed/loadgen"
	"github.com/streamwatch/streamwatch/internal/testbed/stack"
)

// scrapeAtCap fills the shipped pipeline's series past max_series with
// calls over o.capRoutes distinct routes and reports what one Prometheus
// scrape of it weighs.
func scrapeAtCap(ctx context.Context, o options) (err error) {
	dir, err := os.MkdirTemp("", "streamwatch-cap-")
	if err != nil {
		return err
	}
	// The collector's log is kept only where it can explain a failure.
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (collector log in %s)", err, dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	col, err := stack.StartCollector(ctx, dir, o.collector, []string{filepath.Join(o.root, "deploy", "collector.yaml")}, "STREAMWATCH_METRICS_INTERVAL=1s")
	if err != nil {
		return err
	}
	defer col.Stop()
	shape := loadgen.DefaultShape()
	for i := range o.capRoutes {
		shape.Routes = append(shape.Routes, loadgen.Route{Name: fmt.Sprintf("route-%d", i), Provider: fmt.Sprintf("provider-%d", i%7), Model: fmt.Sprintf("model-%d", i%50)})
	}
	n := 4 * o.capRoutes / shape.CallsPerRequest
	reqs, err := shape.Requests(n, 1, time.Now())
	if err != nil {
		return err
	}
	res, err := loadgen.Send(ctx, loadgen.Options{Targets: []string{col.OTLPGRPC}, Requests: reqs, Senders: o.senders, MaxRequests: int64(n), Duration: 5 * time.Minute})
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // two flushes
	// As Prometheus asks: OpenMetrics first, the format that carries
	// exemplars.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+col.Prometheus+"/metrics", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	samples, exemplars := 0, 0
	perMetric := map[string]int{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		samples++
		if strings.Contains(line, " # {") {
			exemplars++
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		perMetric[name]++
	}
	u, _ := col.Usage()
	fmt.Printf("==> %d calls over %d routes (%d spans) into deploy/collector.yaml (max_series 1000)\n", res.Sent.Calls, o.capRoutes, res.Sent.Spans)
	fmt.Printf("    one scrape: %.1f MiB, %d samples (series), %d with an exemplar; collector RSS %.0f MiB\n", float64(len(body))/(1<<20), samples, exemplars, float64(u.RSS)/(1<<20))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "metric\tseries\t\n")
	var names []string
	for k := range perMetric {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(tw, "%s\t%d\t\n", k, perMetric[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return remoteWriteAtCap(ctx, o, reqs, samples)
}

// remoteWriteAtCap sends the same requests to a gateway replica
// (deploy/gateway.yaml, flushing every 5 s) and reports what one flush of
// its remote write weighs at the cap: the bytes on the wire
// (snappy-compressed protobuf, as sent), per data point its exporter
// reports sent, and per Prometheus sample, taking the shipped pipeline's
// scrape (scraped samples) as the count of series, the same connector
// making the same ones. A flush is the requests between two quiet
// seconds: its requests all land within a few hundred milliseconds.
func remoteWriteAtCap(ctx context.Context, o options, reqs []loadgen.Request, scraped int) error {
	dir, err := os.MkdirTemp("", "streamwatch-cap-rw-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var got counts
	srv, sinkURL, err := discardServer(&got)
	if err != nil {
		return err
	}
	defer srv.Close()
	col, err := stack.StartCollector(ctx, dir, o.collector, []string{filepath.Join(o.root, "deploy", "gateway.yaml")},
		"STREAMWATCH_METRICS_INTERVAL=5s", "STREAMWATCH_REMOTE_WRITE="+sinkURL+"/api/v1/write")
	if err != nil {
		return err
	}
	defer col.Stop()
	if _, err := loadgen.Send(ctx, loadgen.Options{Targets: []string{col.OTLPGRPC}, Requests: reqs, Senders: o.senders, MaxRequests: int64(len(reqs)), Duration: 5 * time.Minute}); err != nil {
		return err
	}
	// flushed waits for the next flush to land whole: bytes arriving,
	// then a quiet second.
	flushed := func() error {
		deadline := time.Now().Add(30 * time.Second)
		start, last, changed := got.bytes.Load(), got.bytes.Load(), time.Now()
		for time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			if b := got.bytes.Load(); b != last {
				last, changed = b, time.Now()
			}
			if last != start && time.Since(changed) >= time.Second {
				return nil
			}
		}
		return fmt.Errorf("gateway: no whole flush in 30 s (log in %s)", dir)
	}
	if err := flushed(); err != nil { // the flush of the load's last spans
		return err
	}
	if err := flushed(); err != nil { // a flush of the whole state
		return err
	}
	points0, err := sentPoints(ctx, col.Telemetry)
	if err != nil {
		return err
	}
	u0, err := col.Usage()
	if err != nil {
		return err
	}
	b0, w0 := got.bytes.Load(), got.requests.Load()
	if err := flushed(); err != nil {
		return err
	}
	u1, err := col.Usage()
	if err != nil {
		return err
	}
	points1, err := sentPoints(ctx, col.Telemetry)
	if err != nil {
		return err
	}
	b, w, points := got.bytes.Load()-b0, got.requests.Load()-w0, points1-points0
	if points <= 0 || b == 0 {
		return fmt.Errorf("gateway: %d bytes and %.0f data points in one flush", b, points)
	}
	fmt.Printf("==> the same calls into deploy/gateway.yaml (remote write)\n")
	fmt.Printf("    one flush: %.1f MiB on the wire in %d requests, %.0f data points (%.0f B each); %.1f B per Prometheus sample (%d series); every 15 s, %.0f KiB/s\n",
		float64(b)/(1<<20), w, points, float64(b)/points, float64(b)/float64(scraped), scraped, float64(b)/15/(1<<10))
	// The window holds one flush and the idle seconds around it (no
	// spans come in): what a flush costs, and so a shorter interval.
	cpu := u1.CPU - u0.CPU
	fmt.Printf("    CPU over that flush's window: %v, %.1f %% of a core at a 15 s interval, %.0f %% at 1 s\n",
		cpu, 100*cpu.Seconds()/15, 100*cpu.Seconds())
	return nil
}

// sentPoints reads the data points the collector's exporters report sent
// from its own metrics at addr (host:port).
func sentPoints(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "otelcol_exporter_sent_metric_points") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", addr, line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("%s: no otelcol_exporter_sent_metric_points", addr)
	}
	return sum, nil
}
