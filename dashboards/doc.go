// Package dashboards builds the streamwatch Grafana dashboard from code.
//
// The dashboard is not hand-edited JSON: Build assembles it with the Grafana
// Foundation SDK from the metric names in package semconv, translated the
// way the collector's Prometheus exporter translates them, so a renamed
// metric breaks a test instead of a panel. streamwatch.json beside this file
// is the generated output that Grafana provisions; a test fails when it is
// stale (regenerate with `go test ./dashboards -update`), and the end-to-end
// suite runs every expression of Exprs against a real Prometheus server.
package dashboards
