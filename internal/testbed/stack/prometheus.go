package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Prometheus is a running Prometheus server: one scraping a target, or one
// receiving remote write.
type Prometheus struct {
	*Process
	Addr string
	API  promv1.API
}

// prometheusOptions says what a Prometheus started by startPrometheus
// takes its samples from.
type prometheusOptions struct {
	// ScrapeTarget (host:port), a collector's Prometheus exporter, is
	// scraped every second keeping its job and instance labels; empty
	// scrapes nothing.
	ScrapeTarget string
	// SelfTarget (host:port), the collector's own metrics, is scraped
	// every second as job otelcol-streamwatch-self, as
	// deploy/prometheus.yml does; empty scrapes nothing.
	SelfTarget string
	// RuleFiles are loaded as rule_files (absolute paths), evaluated
	// every second.
	RuleFiles []string
	// RemoteWriteReceiver accepts remote write at RemoteWriteURL.
	RemoteWriteReceiver bool
}

// StartPrometheus runs the prometheus binary on a free localhost port with
// its data in dir, scraping col's exporter and its own metrics every
// second, with the rule files ruleFiles (absolute paths) loaded.
func StartPrometheus(ctx context.Context, dir, bin string, col *Collector, ruleFiles ...string) (*Prometheus, error) {
	return startPrometheus(ctx, dir, bin, prometheusOptions{ScrapeTarget: col.Prometheus, SelfTarget: col.Telemetry, RuleFiles: ruleFiles})
}

// startPrometheus runs the prometheus binary on a free localhost port with
// its data in dir, evaluating every second, with exemplar storage, and
// waits until it is ready. A remote-write receiver has its own name (its
// log, config and data), so that one can run beside a scraping one in dir.
func startPrometheus(ctx context.Context, dir, bin string, o prometheusOptions) (*Prometheus, error) {
	return retryLostPort(func() (*Prometheus, *Process, error) { return startPrometheusOnce(ctx, dir, bin, o) })
}

func startPrometheusOnce(ctx context.Context, dir, bin string, o prometheusOptions) (*Prometheus, *Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, nil, err
	}
	name := "prometheus"
	if o.RemoteWriteReceiver {
		name = "prometheus-receiver"
	}
	cfg := filepath.Join(dir, name+".yml")
	body := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
	if len(o.RuleFiles) > 0 {
		body += "rule_files:\n"
		for _, f := range o.RuleFiles {
			body += fmt.Sprintf("  - %q\n", f)
		}
	}
	if o.ScrapeTarget != "" || o.SelfTarget != "" {
		body += "scrape_configs:\n"
	}
	if o.ScrapeTarget != "" {
		body += fmt.Sprintf("  - job_name: otelcol-streamwatch\n    honor_labels: true\n    static_configs:\n      - targets: [%q]\n", o.ScrapeTarget)
	}
	if o.SelfTarget != "" {
		body += fmt.Sprintf("  - job_name: otelcol-streamwatch-self\n    static_configs:\n      - targets: [%q]\n", o.SelfTarget)
	}
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return nil, nil, err
	}
	addr := Addr(port)
	args := []string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, name+"-data"),
		"--web.listen-address=" + addr,
		"--enable-feature=exemplar-storage",
	}
	if o.RemoteWriteReceiver {
		args = append(args, "--web.enable-remote-write-receiver")
	}
	p, err := Start(ctx, dir, name, bin, args, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := p.WaitHTTP(ctx, "http://"+addr+"/-/ready", 60*time.Second); err != nil {
		p.Stop()
		return nil, p, err
	}
	client, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		p.Stop()
		return nil, p, err
	}
	return &Prometheus{Process: p, Addr: addr, API: promv1.NewAPI(client)}, p, nil
}

// Query evaluates expr now and returns the result as a vector.
func (p *Prometheus) Query(ctx context.Context, expr string) (model.Vector, error) {
	v, _, _, err := p.API.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: result is %s, not a vector", expr, v.Type())
	}
	return vec, nil
}
