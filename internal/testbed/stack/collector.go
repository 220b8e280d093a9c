package stack

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Collector is a running otelcol-streamwatch.
type Collector struct {
	*Process
	// OTLPHTTP, Prometheus and Health are host:port addresses on 127.0.0.1.
	OTLPHTTP, OTLPGRPC, Prometheus, Health, Telemetry string
}

// StartCollector runs bin with the given config files (merged in order)
// on free localhost ports, passing them through the environment variables
// deploy/collector.yaml reads, and waits for its health check. A start
// that lost one of its ports to another process (taken between FreePort
// and the collector's bind) is retried on new ports.
func StartCollector(ctx context.Context, dir, bin string, configs []string, env ...string) (*Collector, error) {
	return retryLostPort(func() (*Collector, *Process, error) { return startCollector(ctx, dir, bin, configs, env) })
}

func startCollector(ctx context.Context, dir, bin string, configs []string, env []string) (*Collector, *Process, error) {
	var ports [5]int
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, nil, err
		}
		ports[i] = p
	}
	c := &Collector{OTLPGRPC: Addr(ports[0]), OTLPHTTP: Addr(ports[1]), Prometheus: Addr(ports[2]), Health: Addr(ports[3]), Telemetry: Addr(ports[4])}
	env = append([]string{
		"STREAMWATCH_OTLP_GRPC=" + c.OTLPGRPC,
		"STREAMWATCH_OTLP_HTTP=" + c.OTLPHTTP,
		"STREAMWATCH_PROMETHEUS=" + c.Prometheus,
		"STREAMWATCH_HEALTH=" + c.Health,
		"STREAMWATCH_TELEMETRY_HOST=127.0.0.1",
		"STREAMWATCH_TELEMETRY_PORT=" + strconv.Itoa(ports[4]),
	}, env...)
	var args []string
	for _, cfg := range configs {
		args = append(args, "--config", cfg)
	}
	p, err := Start(ctx, dir, "otelcol-streamwatch", bin, args, env)
	if err != nil {
		return nil, nil, err
	}
	c.Process = p
	if err := p.WaitHTTP(ctx, "http://"+c.Health+"/", 60*time.Second); err != nil {
		p.Stop()
		return nil, p, fmt.Errorf("collector did not become healthy: %w", err)
	}
	return c, p, nil
}
