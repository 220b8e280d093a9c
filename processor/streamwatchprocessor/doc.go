// Package streamwatchprocessor is an OpenTelemetry Collector traces
// processor, component type "streamwatch", that derives the stall breakdown
// of docs/design.md §4 from the chunk timeline on each LLM attempt span: TTFT,
// end-to-end and raw generation time, the attributed silence segments, stall
// time and count, active generation time, ITL, TPOT and active tokens per
// second. The raw wall time stays untouched beside the derived figures.
//
// Its public surface is NewFactory and Config. The reading of timelines and
// the writing of figures live in internal/timeline and internal/annotate;
// the math is github.com/streamwatch/streamwatch/internal/breakdown, shared
// with the streamwatch connector.
package streamwatchprocessor // import "github.com/streamwatch/streamwatch/processor/streamwatchprocessor"
