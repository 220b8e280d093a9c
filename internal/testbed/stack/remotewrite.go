package stack

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// StartPrometheusReceiver runs the prometheus binary on a free localhost
// port with its data in dir, scraping nothing and accepting remote write
// at RemoteWriteURL: the backend N collector replicas push to.
func StartPrometheusReceiver(ctx context.Context, dir, bin string) (*Prometheus, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "prometheus-receiver.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  evaluation_interval: 1s\n"), 0o644); err != nil {
		return nil, err
	}
	addr := Addr(port)
	p, err := Start(ctx, dir, "prometheus-receiver", bin, []string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "prometheus-receiver-data"),
		"--web.listen-address=" + addr,
		"--web.enable-remote-write-receiver",
		"--enable-feature=exemplar-storage",
	}, nil)
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP(ctx, "http://"+addr+"/-/ready", 60*time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	client, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return &Prometheus{Process: p, Addr: addr, API: promv1.NewAPI(client)}, nil
}

// RemoteWriteURL is the remote-write endpoint of a Prometheus started by
// StartPrometheusReceiver.
func (p *Prometheus) RemoteWriteURL() string { return "http://" + p.Addr + "/api/v1/write" }
