// Package streamwatchconnector is the streamwatch traces → metrics connector,
// component type "streamwatch" (docs/design.md §5).
//
// It reads the call and attempt spans of hedgeprobe after the streamwatch
// processor has derived them, and keeps cumulative histograms (seconds,
// explicit GenAI and stall buckets, exemplars) and counters that it sends
// downstream every interval, ready for the Prometheus exporter. See
// README.md for the configuration and the metric table.
package streamwatchconnector // import "github.com/streamwatch/streamwatch/connector/streamwatchconnector"
