package stack

import "context"

// StartPrometheusReceiver runs the prometheus binary on a free localhost
// port with its data in dir, scraping nothing and accepting remote write
// at RemoteWriteURL: the backend N collector replicas push to.
func StartPrometheusReceiver(ctx context.Context, dir, bin string) (*Prometheus, error) {
	return startPrometheus(ctx, dir, bin, prometheusOptions{RemoteWriteReceiver: true})
}

// RemoteWriteURL is the remote-write endpoint of a Prometheus started by
// StartPrometheusReceiver.
func (p *Prometheus) RemoteWriteURL() string { return "http://" + p.Addr + "/api/v1/write" }
