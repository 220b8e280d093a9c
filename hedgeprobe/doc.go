// Package hedgeprobe wraps a streaming LLM call: it races a hedge on
// another upstream when the first content chunk is late or when an
// uncommitted stream goes silent, commits to the first attempt that
// delivers, cancels the rest for good, and runs TTFT and stall watchdogs
// that ignore keepalives (docs/design.md §2).
//
// Wrapping a call is a one-line change: a *Stream is itself a Source.
//
//	p, err := hedgeprobe.New(cfg, classify)         // once, shared
//	...
//	s := p.Stream(ctx, primary, fallback)            // per call
//	defer s.Close()
//	for s.Next() {
//		chunk := s.Current()
//		...
//	}
//	if err := s.Err(); err != nil {
//		if hedgeprobe.IsTransient(err) { /* retry or fall back */ }
//	}
//
// # API (stable)
//
//	func New[T any](cfg Config, classify Classifier[T], opts ...Option) (*Prober[T], error)
//	func (p *Prober[T]) Stream(ctx context.Context, routes ...Route[T]) *Stream[T]
//	func (p *Prober[T]) HedgeDelay(route, model string) time.Duration
//	func (p *Prober[T]) Config() Config
//	func (s *Stream[T]) Next() bool
//	func (s *Stream[T]) Current() T
//	func (s *Stream[T]) Err() error
//	func (s *Stream[T]) Close() error
//	func (s *Stream[T]) Stats() Stats
//	func (s *Stream[T]) All() iter.Seq2[T, error]
//	func ConfigFromEnv() (Config, error)
//	func (c *Config) ApplyEnv() error
//	func (c *Config) Validate() error
//	func IsTransient(err error) bool
//	Options: OnHedge, OnThrottle, OnCommit, OnAttemptDone, OnWatchdog,
//	WithTokenCount, WithResponseModel, WithTracerProvider, WithOperationName,
//	WithChunkEvents, WithKeepaliveOffsets.
//	Errors: *TimeoutError, ErrTimeout, ErrTTFTTimeout, ErrStallTimeout,
//	ErrNoRoutes, ErrInvalidRoute, ErrInvalidConfig, ErrClassifierPanic,
//	ErrOpenPanic, ErrNilSource, ErrSourcePanic, ErrExtractorPanic.
//
// # Semantics
//
//	trigger (before commit)                  action
//	no content from a live attempt by delay   hedge to the next route (TTFT)
//	newest attempt silent StallAfter          hedge (stall); Buffered, HoldChunks > 1
//	transient error (reset, 429, 5xx)         hedge at once (error); Retry-After pushes the route back
//	fatal error (400, 401, 403, 404)          the call ends with it
//	no content by TTFTTimeout                 the call ends with a TTFT *TimeoutError
//	content then StallTimeout of silence      that attempt fails (transient: hedge)
//	first delivery (Streaming) / end (Buffered) commit; losers cancelled and closed
//
//	after commit                             action
//	no content for StallTimeout in Next       stall *TimeoutError, Truncated, never a hedge
//	caller cancel or Close                    every attempt ends, no goroutine left
//
// Hedge delay: HedgeAfter, or the HedgeQuantile of recent attempt TTFTs of
// the route × model (a DDSketch over a sliding HedgeWindow) clamped to
// [HedgeMinDelay, HedgeMaxDelay]; HedgeMaxDelay while fewer than
// HedgeWarmup samples exist. An attempt cancelled before its first content
// chunk, after at least the hedge delay, is recorded at max(elapsed,
// delay); one cancelled sooner is not recorded (see delayBook).
//
// Budget: each call adds HedgeBudget tokens to a bucket of HedgeBurst
// (full at start); every hedge, whatever its trigger, takes one. A refused
// hedge is counted in Stats.HedgesThrottled, reported to OnThrottle and an
// event on the call span.
//
// Telemetry: a call span (INTERNAL, "streamwatch.call") and one attempt
// span per attempt (CLIENT, "{operation} {model}", child of the call span)
// with the docs/design.md §3 attributes and the compact timeline
// streamwatch.chunk.offsets_us, through the TracerProvider of
// WithTracerProvider or the global one. When the call span does not record
// (sampled out, no SDK), nothing is recorded and nothing allocated per
// chunk. No prompt or completion text is ever recorded.
//
// Goroutines: one per attempt reads its Source until commit; the
// goroutine calling Next drives the race (no coordinator goroutine), and
// after a Streaming commit reads the winner's Source itself, so a
// committed chunk costs a direct Next plus a classifier call. Listener
// hooks run on the goroutine calling Next or Close; a panicking hook is
// ignored. A panic in the classifier, a Source method (ErrSourcePanic),
// a TokenCount or response-model function (ErrExtractorPanic) fails the
// call; Route.Open's panic fails it too (ErrOpenPanic).
package hedgeprobe
