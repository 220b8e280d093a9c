// Package openaigo adapts github.com/openai/openai-go/v3 to hedgeprobe.
//
// openai-go's ssestream.Stream is a hedgeprobe.Source as it is; this
// package adds what hedgeprobe needs to know of its chunks (Items: the
// classifier, the token count, the model, the answer text a resume
// continues) and a Route that opens one NewStreaming call per attempt and
// types its errors for hedging (MapError).
//
//	client := openai.NewClient(option.WithMaxRetries(0), // hedgeprobe retries
//		option.WithHTTPClient(&http.Client{Transport: &sse.Lanes{}})) // see below
//	params := openai.ChatCompletionNewParams{
//		Model:    "gpt-4.1-mini",
//		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
//	}
//	p, err := hedgeprobe.New(cfg, openaigo.Items)
//	if err != nil { … }
//	stream := p.Stream(ctx,
//		openaigo.Route("openai", client, params, openaigo.RouteOptions{}),
//		openaigo.Route("vllm", vllmClient, params, openaigo.RouteOptions{Continue: sse.ContinueFinalMessage}))
//	defer stream.Close()
//	for stream.Next() { // the usual openai-go loop
//		chunk := stream.Current()
//		if len(chunk.Choices) > 0 {
//			fmt.Print(chunk.Choices[0].Delta.Content)
//		}
//	}
//	if err := stream.Err(); err != nil { … }
//
// Set the SDK's own retries to 0 (option.WithMaxRetries(0)) under
// hedging: a retry inside the SDK is an unbudgeted, untraced attempt that
// hides the failure hedgeprobe would have hedged.
//
// Give the client an http.Client on sse.Lanes
// (option.WithHTTPClient(&http.Client{Transport: &sse.Lanes{}})): over
// HTTP/2 the SDK's default transport carries every request to a host on
// one connection, so a hedge or resume to the same host as an attempt
// before it would ride that attempt's connection, and stall with it when
// the connection is what froze; Lanes gives each attempt of a call a
// connection of its own. An sse.Tap with no Base sends through lanes
// already (sse.DefaultClient's).
//
// openai-go drops SSE comments. To time keepalives, build the client with
// option.WithHTTPClient(&http.Client{Transport: &sse.Tap{}}) and set
// RouteOptions.TapKeepalives: each comment then comes out as an empty
// chunk, which Classify calls Keepalive. Skip those before
// openai.ChatCompletionAccumulator.AddChunk, which reports false for a
// chunk without the stream's id (the text it accumulates is right either
// way).
//
// What openai-go reads differently from the raw route (sse.OpenAIRoute):
// it ignores an event's type, so an "event: error" whose data is the
// error object itself, not {"error": …}, decodes as an empty chunk (a
// Keepalive) and the stream ends as a transient ConnectionError, or at a
// watchdog if the server keeps it open; and it ends a stream at a chunk
// with an "error": null member, as an error without a message (the chunk
// is not quoted: see sse.NewPayloadError). It ends a line only at "\n":
// a stream whose lines end in a lone "\r" (valid SSE, which the raw route
// reads) is one line to it, and fails as an event past
// sse.DefaultMaxEventSize (fatal) or a stream without its terminal event
// (transient). It decodes every event's data as a chunk, so two framings
// the raw route reads end the stream with a fatal *sse.ProtocolError
// instead (no hedge, no resume): an event with an empty data field
// ("data:" alone, which the SSE rules do not dispatch and the raw route
// takes for a keepalive), and an "event: error" whose data is not JSON
// (the raw route's transient *sse.UpstreamError); use sse.OpenAIRoute for
// a server that sends either. The adapter bounds a whole event, which
// openai-go does not, at the raw route's size (sse.DefaultMaxEventSize).
//
// A stream that falls silent after its first chunks is resumed
// (docs/design.md §2 rule 10) on a route that can continue a partial
// answer: set RouteOptions.Continue to the upstream's way
// (sse.ContinueFinalMessage for vLLM and SGLang, sse.ContinuePrefix for
// DeepSeek, sse.ContinuePrefixEcho for Mistral, whose answer repeats the
// prefix, sse.ContinueTrailingAssistant for llama.cpp and Ollama).
// OpenAI's own API continues nothing: its route stays sse.ContinueNone,
// and a resume of its stream goes to a route that can.
package openaigo
