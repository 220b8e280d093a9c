// Command loadtest is `make loadtest`: it starts otelcol-streamwatch once
// per pipeline under test — the baseline (otlp → batch → debug, no
// streamwatch component), the shipped deploy/collector.yaml, the same with
// drop_timeline — and sends each, in turn, hedgeprobe-shaped spans from
// internal/testbed/loadgen over OTLP/gRPC, closed loop, for a few seconds.
// The turns alternate for several rounds, so a drift in what else runs on
// the machine falls on every pipeline alike. It prints, per pipeline,
// spans/s and chunks/s acknowledged, the collector's CPU seconds per
// million chunks (from /proc) and its memory, with the throughput and CPU
// ratios to the first pipeline. Everything binds 127.0.0.1 and stops at
// the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/streamwatch/streamwatch/internal/testbed/loadgen"
	"github.com/streamwatch/streamwatch/internal/testbed/stack"
)

// pipelines are the collector configurations a run can compare, by name:
// config files merged in order, relative to the repository root.
var pipelines = map[string][]string{
	"baseline":          {"testdata/loadtest/baseline.yaml"},
	"shipped":           {"deploy/collector.yaml"},
	"drop_timeline":     {"deploy/collector.yaml", "testdata/loadtest/drop_timeline.yaml"},
	"gateway":           {"deploy/gateway.yaml"},
	"gateway_processor": {"deploy/gateway.yaml", "testdata/loadtest/gateway_processor.yaml"},
	"no_batch":          {"deploy/collector.yaml", "testdata/loadtest/no_batch.yaml"},
	// The same three exporting their traces over OTLP/HTTP (to a
	// discarding endpoint), as a collector in front of a trace backend
	// does: what drop_timeline buys there.
	"baseline_export":      {"testdata/loadtest/baseline.yaml", "testdata/loadtest/export_baseline.yaml"},
	"shipped_export":       {"deploy/collector.yaml", "testdata/loadtest/export.yaml"},
	"drop_timeline_export": {"deploy/collector.yaml", "testdata/loadtest/drop_timeline.yaml", "testdata/loadtest/export.yaml"},
}

type options struct {
	collector, root string
	pipelines       []string
	slice, warmup   time.Duration
	rounds, senders int
	rate            float64
	pprof           string
	capRoutes       int
}

func main() {
	var o options
	var names string
	flag.StringVar(&o.collector, "collector", "bin/otelcol-streamwatch", "otelcol-streamwatch binary")
	flag.StringVar(&o.root, "root", ".", "repository root (the configs are read from it)")
	flag.StringVar(&names, "pipelines", "baseline,shipped,drop_timeline", "pipelines to compare, the first is the reference: "+strings.Join(known(), ", ")+
		"; NAME@PATH runs pipeline NAME on the collector binary at PATH (a before/after comparison in one run)")
	flag.DurationVar(&o.slice, "slice", 5*time.Second, "measured time per pipeline per round")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each slice")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each gives every pipeline one slice")
	flag.IntVar(&o.senders, "senders", 4, "concurrent senders")
	flag.Float64Var(&o.rate, "rate", 0, "requests per second per pipeline (0: closed loop, as fast as acknowledged)")
	flag.StringVar(&o.pprof, "pprof", "", "write a 10 s CPU profile of each pipeline's collector under load into this directory (needs the pprof extension)")
	flag.IntVar(&o.capRoutes, "cap", 0, "instead of the comparison: send calls over this many distinct routes to the shipped pipeline and report its /metrics scrape (size, series) once max_series is reached, then to a gateway replica and report one flush of its remote write (bytes, data points)")
	flag.Parse()
	o.pipelines = strings.Split(names, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	do := run
	if o.capRoutes > 0 {
		do = scrapeAtCap
	}
	if err := do(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// known lists the pipelines by name, sorted, so -h and the error for an
// unknown name read the same on every run.
func known() []string {
	return slices.Sorted(maps.Keys(pipelines))
}

// tally is what one pipeline did over every slice.
type tally struct {
	name string
	col  *stack.Collector
	// rates are the chunks/s of each round's slice, for the per-round
	// ratios to the reference.
	rates   []float64
	sent    loadgen.Counts
	refused int64
	elapsed time.Duration
	cpu     time.Duration
	rss     int64
	// machine is the whole machine's CPU time over the slices, for its
	// idle share.
	machine cpuTimes
	pprof   string // the pprof extension's address, when profiling
}

// splitPipeline splits NAME@PATH into the pipeline's name and its
// collector binary (def when no @PATH).
func splitPipeline(p, def string) (name, binary string) {
	if name, binary, ok := strings.Cut(p, "@"); ok {
		return name, binary
	}
	return p, def
}

func run(ctx context.Context, o options) error {
	for _, p := range o.pipelines {
		name, _ := splitPipeline(p, "")
		if _, ok := pipelines[name]; !ok {
			return fmt.Errorf("unknown pipeline %q (known: %s)", p, strings.Join(known(), ", "))
		}
	}
	dir, err := os.MkdirTemp("", "streamwatch-loadtest-")
	if err != nil {
		return err
	}
	shape := loadgen.DefaultShape()
	reqs, err := shape.Requests(32, 1, time.Now())
	if err != nil {
		return err
	}
	fmt.Printf("==> load: %s\n", shape)
	fmt.Printf("==> %d senders, %d rounds × %s per pipeline (after %s warm-up), logs in %s\n", o.senders, o.rounds, o.slice, o.warmup, dir)
	fmt.Printf("==> machine: %d cores, load average %s (figures are noisy while other work runs)\n", runtime.NumCPU(), loadavg())

	// An endpoint that takes and drops everything: remote write for the
	// gateway pipelines, OTLP/HTTP traces for the *_export ones.
	rw, sinkURL, err := discardServer(nil)
	if err != nil {
		return err
	}
	defer rw.Close()

	tallies := make([]*tally, len(o.pipelines))
	for i, p := range o.pipelines {
		name, binary := splitPipeline(p, o.collector)
		pdir := filepath.Join(dir, fmt.Sprintf("%d-%s", i, name))
		if err := os.Mkdir(pdir, 0o755); err != nil {
			return err
		}
		var cfgs []string
		for _, c := range pipelines[name] {
			cfgs = append(cfgs, filepath.Join(o.root, c))
		}
		env := []string{"STREAMWATCH_REMOTE_WRITE=" + sinkURL + "/api/v1/write", "STREAMWATCH_TRACES_SINK=" + sinkURL}
		var pprofAddr string
		if o.pprof != "" {
			port, err := stack.FreePort()
			if err != nil {
				return err
			}
			pprofAddr = stack.Addr(port)
			cfgs = append(cfgs, filepath.Join(o.root, "testdata", "loadtest", "pprof.yaml"))
			env = append(env, "STREAMWATCH_PPROF="+pprofAddr)
		}
		col, err := stack.StartCollector(ctx, pdir, binary, cfgs, env...)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		defer col.Stop()
		tallies[i] = &tally{name: p, col: col, pprof: pprofAddr}
	}

	for r := range o.rounds {
		for _, t := range tallies {
			res, err := slice(ctx, o, reqs, t)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, t.name, err)
			}
			t.rates = append(t.rates, float64(res.Sent.Chunks)/res.Elapsed.Seconds())
			fmt.Printf("    round %d %-14s %8.0f spans/s\n", r+1, t.name, float64(res.Sent.Spans)/res.Elapsed.Seconds())
		}
	}
	report(os.Stdout, tallies)
	if o.pprof != "" {
		for _, t := range tallies {
			if err := profile(ctx, o, reqs, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// slice loads one pipeline for the warm-up, then for the measured slice.
func slice(ctx context.Context, o options, reqs []loadgen.Request, t *tally) (loadgen.Result, error) {
	opts := loadgen.Options{Targets: []string{t.col.OTLPGRPC}, Requests: reqs, Senders: o.senders, Rate: o.rate}
	if o.warmup > 0 {
		opts.Duration = o.warmup
		if _, err := loadgen.Send(ctx, opts); err != nil {
			return loadgen.Result{}, err
		}
	}
	u0, err := t.col.Usage()
	if err != nil {
		return loadgen.Result{}, err
	}
	m0, err := machineCPU()
	if err != nil {
		return loadgen.Result{}, err
	}
	opts.Duration = o.slice
	res, err := loadgen.Send(ctx, opts)
	if err != nil {
		return loadgen.Result{}, err
	}
	u1, err := t.col.Usage()
	if err != nil {
		return loadgen.Result{}, err
	}
	m1, err := machineCPU()
	if err != nil {
		return loadgen.Result{}, err
	}
	t.machine = t.machine.add(m1.sub(m0))
	t.sent.Add(res.Sent)
	t.refused += res.Refused
	t.elapsed += res.Elapsed
	t.cpu += u1.CPU - u0.CPU
	t.rss = max(t.rss, u1.RSS)
	return res, nil
}

// profile writes a 10 s CPU profile of a pipeline's collector, taken by
// its pprof extension while the pipeline is under load, to DIR/NAME.pprof.
func profile(ctx context.Context, o options, reqs []loadgen.Request, t *tally) error {
	if err := os.MkdirAll(o.pprof, 0o755); err != nil {
		return err
	}
	const seconds = 10
	load := make(chan error, 1)
	go func() {
		_, err := loadgen.Send(ctx, loadgen.Options{
			Targets: []string{t.col.OTLPGRPC}, Requests: reqs, Senders: o.senders, Rate: o.rate,
			Duration: (seconds + 2) * time.Second,
		})
		load <- err
	}()
	client := &http.Client{Timeout: (seconds + 10) * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", t.pprof, seconds))
	if err != nil {
		<-load
		return err
	}
	defer resp.Body.Close()
	path := filepath.Join(o.pprof, strings.NewReplacer("/", "_", "@", "_").Replace(t.name)+".pprof")
	f, err := os.Create(path)
	if err != nil {
		<-load
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if lerr := <-load; err == nil {
		err = lerr
	}
	if err == nil {
		fmt.Printf("==> %s: CPU profile in %s (go tool pprof -top %s)\n", t.name, path, path)
	}
	return err
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// discardServer answers every request (a remote write, an OTLP/HTTP export)
// with 204 and keeps nothing but, when received is not nil, the count of
// requests and body bytes; it returns its base URL.
func discardServer(received *counts) (*http.Server, string, error) {
	port, err := stack.FreePort()
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Addr: stack.Addr(port), ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if received != nil {
			received.bytes.Add(n)
			received.requests.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return nil, "", err
	}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + srv.Addr, nil
}

// counts is what a discardServer received.
type counts struct{ requests, bytes atomic.Int64 }
