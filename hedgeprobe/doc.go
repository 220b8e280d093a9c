// Package hedgeprobe wraps a streaming LLM call: it races a hedge on
// another upstream when the first content chunk is late or when an
// uncommitted stream goes silent, commits to the first attempt that
// delivers, cancels the rest for good, resumes a committed stream that
// falls silent by continuing its text on another route, keeps calls off
// routes that are down, and runs TTFT and stall watchdogs that ignore
// keepalives (docs/design.md §2).
//
// Wrapping a call is a one-line change: a *Stream is itself a Source.
//
//	p, err := hedgeprobe.New(cfg, sse.OpenAIItems)  // once, shared
//	...
//	s := p.Stream(ctx, primary, fallback)           // per call
//	defer s.Close()
//	for s.Next() {
//		chunk := s.Current()
//		...
//	}
//	if err := s.Err(); err != nil {
//		if hedgeprobe.IsTransient(err) { /* retry or fall back */ }
//	}
//
// The rules of the race are one table (triggers.go), each trigger's
// condition beside its action: the TTFT and stall watchdogs, the error,
// TTFT and stall hedges, and resume. README.md has the table, the
// defaults and why, and the API as go doc lists it.
//
// Telemetry: a call span (INTERNAL, "streamwatch.call") with the caller's
// view of the delivery, and one attempt span per attempt (CLIENT, child of
// the call span, "{operation} {model}", or "{operation}" for a route
// without a model) with the docs/design.md §3 attributes and the compact
// timeline streamwatch.chunk.offsets_us, through the TracerProvider of
// WithTracerProvider or the global one. When the call span does not
// record, nothing is recorded and nothing allocated per chunk. No prompt
// or completion text is ever recorded. A failed span's status is its
// error's text: a Source's error should not quote what the upstream
// streamed (the sse routes and the adapters never quote a 2xx body that
// is not a stream: where they read one, it is in sse.ProtocolError.Body).
// An upstream's own error message, which can quote the request or the
// answer, is left out of the status (sse.UpstreamError.StatusText: its
// status, type and code stay) and kept in Stream.Err for the caller; so
// is a recovered panic's value, of which the status names the type (a
// runtime error keeps its message). Where such a text cannot be told apart
// in the error's — a wrapper of the caller's formats it otherwise — the
// status withholds the whole text and names the error's type.
//
// Goroutines: one per attempt reads its Source; the goroutine calling Next
// drives the race (no coordinator goroutine). After a Streaming commit
// with no resume possible, Next reads the winner's Source itself, so a
// committed chunk costs a direct Next plus a classifier call. Listener
// hooks and span events come from one observer, on the goroutine calling
// Next or Close; a panicking hook is ignored. A panic in the classifier,
// a Source method (ErrSourcePanic), an Items extractor
// (ErrExtractorPanic) or Route.Open (ErrOpenPanic) fails the call.
package hedgeprobe
