// Command demo is `make demo`: it starts fakellm (a steady, a stalling, a
// slow and a failing profile) and otelcol-streamwatch on localhost, runs a
// hedged workload through hedgeprobe in both delivery modes, waits for the
// collector's metrics, and prints what it measured — read back from the
// collector's Prometheus endpoint — beside what the probe itself saw. It
// stops everything it started, also on Ctrl-C.
//
// With -otlp it starts no collector: it sends the workload's spans to one
// already running (a gateway that pushes its metrics by remote write has
// no endpoint to read back), and prints, beside what the probe saw, the
// PromQL that reads the same counts where that collector's metrics go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/streamwatch/streamwatch/internal/testbed/stack"
	"github.com/streamwatch/streamwatch/internal/testbed/workload"
)

// metricsInterval is the demo collector's flush interval: short, so the
// figures come soon after the workload.
const metricsInterval = 2 * time.Second

// demoService is the service.name of the demo's spans: the job label of
// the collector's metrics for them.
const demoService = "streamwatch-demo"

func main() {
	collector := flag.String("collector", "bin/otelcol-streamwatch", "otelcol-streamwatch binary")
	fakellm := flag.String("fakellm", "bin/fakellm", "fakellm binary")
	config := flag.String("config", "deploy/collector.yaml", "collector configuration (its connector's interval must be ${env:STREAMWATCH_METRICS_INTERVAL}, which the demo sets)")
	profiles := flag.String("profiles", "", "fakellm timing profiles file (default: fakellm's built-in profiles)")
	keep := flag.Bool("keep", false, "keep fakellm and the collector the demo started running after the report, until Ctrl-C")
	otlp := flag.String("otlp", "", "send the spans over OTLP/HTTP to this host:port of a collector already running (deploy/gateway.yaml, say) instead of starting one (-collector is then unused); the report gives the PromQL that checks its counts")
	flag.Parse()
	if *otlp != "" {
		if err := checkOTLP(*otlp); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(2)
		}
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "config" {
				fmt.Fprintln(os.Stderr, "demo: -config configures the collector the demo starts; with -otlp it starts none")
				os.Exit(2)
			}
		})
	}

	// SIGHUP too: a closed terminal stops the demo as Ctrl-C does.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, *collector, *fakellm, *config, *profiles, *otlp, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// checkOTLP refuses an -otlp value that is not host:port (a URL, say,
// which the exporter would quietly turn into a path), and one where
// nothing listens: its spans would be lost after the workload's 31 s,
// reported by the exporter's retries alone.
func checkOTLP(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil || strings.Contains(addr, "/") {
		return fmt.Errorf("-otlp %q: want host:port, the collector's OTLP/HTTP receiver (127.0.0.1:4318)", addr)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return fmt.Errorf("-otlp %s: no collector there: %w", addr, err)
	}
	return c.Close()
}

// countingExporter counts the spans its exporter failed to send: the
// tracer provider's batcher hands export errors to OpenTelemetry's error
// handler alone, and the demo must not report spans sent that never
// arrived.
type countingExporter struct {
	sdktrace.SpanExporter
	failed atomic.Int64
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.failed.Add(int64(len(spans)))
	}
	return err
}

func run(ctx context.Context, collectorBin, fakellmBin, config, profiles, otlp string, keep bool) error {
	dir, err := os.MkdirTemp("", "streamwatch-demo-")
	if err != nil {
		return err
	}
	fmt.Printf("==> logs in %s\n", dir)

	// fakellm binds a free port itself and says which: no other program
	// can take it between a choice and the bind.
	llmArgs := []string{"-addr", "127.0.0.1:0", "-seed", "1"}
	if profiles != "" {
		llmArgs = append(llmArgs, "-profiles", profiles)
	}
	llm, err := stack.Start(ctx, dir, "fakellm", fakellmBin, llmArgs, nil)
	if err != nil {
		return err
	}
	defer llm.Stop()
	llmAddr, err := listening(ctx, llm, 10*time.Second)
	if err != nil {
		return fmt.Errorf("fakellm: %w\n%s", err, llm.Log())
	}
	fmt.Printf("==> fakellm on http://%s\n", llmAddr)

	var col *stack.Collector
	endpoint := otlp
	if otlp == "" {
		cfgAbs, _ := filepath.Abs(config)
		col, err = stack.StartCollector(ctx, dir, collectorBin, []string{cfgAbs}, "STREAMWATCH_METRICS_INTERVAL="+metricsInterval.String())
		if err != nil {
			return err
		}
		defer col.Stop()
		fmt.Printf("==> otelcol-streamwatch: OTLP/HTTP %s, Prometheus exporter http://%s/metrics\n", col.OTLPHTTP, col.Prometheus)
		endpoint = col.OTLPHTTP
	} else {
		fmt.Printf("==> sending the spans to the collector at OTLP/HTTP %s\n", otlp)
	}

	otlpExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		return err
	}
	exp := &countingExporter{SpanExporter: otlpExp}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", demoService))))

	scenarios := workload.Scenarios()
	total := 0
	for _, s := range scenarios {
		total += s.Calls
	}
	fmt.Printf("==> %d calls in %d scenarios; about 31 s, because one profile falls silent for 30 s on purpose\n", total, len(scenarios))
	start := time.Now()
	done := make(chan struct{})
	go progress(done, start)
	results, err := workload.Run(ctx, workload.Options{BaseURL: "http://" + llmAddr + "/v1", TracerProvider: tp})
	close(done)
	if err != nil {
		return err
	}
	if err := tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flushing spans: %w", err)
	}
	if n := exp.failed.Load(); n > 0 {
		return fmt.Errorf("%d spans not delivered to the collector at %s (its log, or the lines above, say why)", n, endpoint)
	}
	if col == nil {
		fmt.Printf("\n==> workload done in %.1fs; %d calls' spans sent to %s\n", time.Since(start).Seconds(), total, otlp)
		printProbe(os.Stdout, results)
		printQueries(os.Stdout, workload.Totals(results))
		if keep {
			fmt.Printf("\n==> still running: fakellm http://%s/v1; Ctrl-C stops it\n", llmAddr)
			<-ctx.Done()
		}
		fmt.Println("==> stopping fakellm")
		return nil
	}
	fmt.Printf("\n==> workload done in %.1fs; waiting for the collector's metrics\n", time.Since(start).Seconds())

	m, err := waitMetrics(ctx, "http://"+col.Prometheus+"/metrics", total, metricsInterval, 60*time.Second)
	if err != nil {
		return err
	}
	printProbe(os.Stdout, results)
	printCollector(os.Stdout, m, workload.Totals(results))
	fmt.Printf(`
Where to look next:
  * what each line above means, and why the counts are what they are: docs/demo.md
  * keep the stack up and read the raw metrics:  make demo DEMO_FLAGS=-keep
    then  curl -s http://<exporter>/metrics | grep -E '^(gen_ai|streamwatch)_'
  * the full stack with Grafana, Prometheus and Tempo (needs Docker):
    make collector && docker compose -f deploy/compose.yaml up
    then open http://localhost:3000, dashboard "streamwatch: LLM streams" (built from dashboards/)
  * the definitions behind every figure: docs/design.md §4 (metrics: docs/telemetry.md)
`)
	if keep {
		fmt.Printf("\n==> still running: fakellm http://%s/v1, OTLP/HTTP %s, metrics http://%s/metrics; Ctrl-C stops everything\n",
			llmAddr, col.OTLPHTTP, col.Prometheus)
		<-ctx.Done()
	}
	fmt.Println("==> stopping fakellm and the collector")
	return nil
}

func progress(done <-chan struct{}, start time.Time) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			fmt.Printf("    … %2.0fs\n", time.Since(start).Seconds())
		}
	}
}

// listening waits for fakellm's first line, "fakellm listening on
// http://ADDR", and returns ADDR; it fails at once when fakellm exits.
func listening(ctx context.Context, p *stack.Process, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if _, rest, ok := strings.Cut(p.Log(), "fakellm listening on http://"); ok {
			if addr, _, ok := strings.Cut(rest, "\n"); ok {
				return addr, nil
			}
		}
		if p.Exited() {
			return "", errors.New("exited before it listened")
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("not listening after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
