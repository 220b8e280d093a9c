// Package e2e holds the end-to-end suite (build tag e2e, run by `make e2e`):
// the real otelcol-streamwatch built by ocb, a real Prometheus server
// scraping it, fakellm and the demo workload through hedgeprobe, all on
// 127.0.0.1 and stopped at the end, also on failure.
package e2e
