// Package sse reads server-sent events over net/http for hedgeprobe: a
// WHATWG event-stream Reader that timestamps each event on arrival, the
// item types and classifiers of OpenAI-compatible chat completions
// (ChatChunk, ClassifyOpenAI, OpenAITokens) and Anthropic Messages
// (AnthropicEvent, ClassifyAnthropic, AnthropicTokens), route helpers that
// open one HTTP stream per attempt (OpenAIRoute, AnthropicRoute), typed
// upstream errors that carry transience and Retry-After, a transport for
// long streams (TCP keepalive, TCP_USER_TIMEOUT), and a Tap that times the
// keepalives SDK decoders hide.
//
// The SDK adapters (hedgeprobe/openaigo, hedgeprobe/goopenai,
// hedgeprobe/anthropicgo) build on the same pieces, and so can a route of
// your own over another SDK: its errors typed as *UpstreamError
// (NewHTTPError, NewPayloadError) or *ConnectionError, and its dropped
// keepalives timed through a Tap in the SDK client's transport and
// KeepaliveRoute (or Keepalives, for an item type whose zero value is not a
// keepalive), the read of its error bodies bounded as the raw routes bound
// theirs (BoundErrorBody from the SDK's middleware, or BoundErrorBodies in
// its transport), and a header that carries a key kept off other hosts on
// a redirect (HeadersStayOnHost). The classification rules and the typing
// of a stream's end that the adapters share are internal to hedgeprobe.
//
// The canonical loop, with hedgeprobe wrapping the raw route:
//
//	route := sse.OpenAIRoute("primary", sse.OpenAIRequest{
//		BaseURL:  "https://api.openai.com/v1",
//		APIKey:   os.Getenv("OPENAI_API_KEY"),
//		Model:    "gpt-4o-mini",
//		Messages: []sse.Message{{Role: "user", Content: "Hello"}},
//	})
//	stream := prober.Stream(ctx, route, fallback)
//	defer stream.Close()
//	for stream.Next() {
//		for _, c := range stream.Current().Choices {
//			fmt.Print(c.Delta.Content)
//		}
//	}
//	if err := stream.Err(); err != nil {
//		// *sse.UpstreamError, *sse.ConnectionError, a hedgeprobe timeout…
//	}
//
// A stream ends cleanly only at its terminal event: "data: [DONE]" for
// OpenAI, message_stop for Anthropic. A body that ends before it is a
// *ConnectionError wrapping io.ErrUnexpectedEOF — a truncated answer is
// never reported as success. (The SDK adapters do not see [DONE], which
// the SDKs swallow: for them a stream is complete at the last choice's
// finish_reason, or at message_stop, and a body the server closes after
// it ends cleanly; a read that fails after it (a connection reset) is
// still a *ConnectionError, as the SDK reports it. The SDK still reads
// what comes after it, such as a usage chunk, and a silence there is a
// stall like any other.)
package sse
