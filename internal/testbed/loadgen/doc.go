// Package loadgen sends hedgeprobe-shaped spans to otelcol-streamwatch over
// OTLP/gRPC, for `make loadtest` and the replica end-to-end test.
//
// A Shape describes the traffic: per call one call span and one or two
// attempt spans, with the compact chunk and keepalive timelines hedgeprobe
// writes (every name from semconv; TestShapeIsHedgeprobes keeps the keys
// those of a real call), a share of hedged calls, of calls whose
// winner falls silent once, and of failed calls. Shape.Requests builds
// export requests once, marshalled, each with the Counts it holds, so a
// test knows exactly what a collector was sent; Send replays them, closed
// loop or at a fixed rate, and counts only what the collector
// acknowledged. Building is deterministic for a seed.
//
// Send is bounded in time and count and refuses any target that is not a
// loopback address: a load test here never leaves the machine.
//
// The canonical use:
//
//	reqs, _ := loadgen.DefaultShape().Requests(64, 1, time.Now())
//	res, err := loadgen.Send(ctx, loadgen.Options{
//		Targets: []string{col.OTLPGRPC}, Requests: reqs, Senders: 4, Duration: 10 * time.Second,
//	})
//	fmt.Println(res.Sent.Chunks, res.Elapsed)
package loadgen
