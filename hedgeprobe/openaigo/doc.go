// Package openaigo adapts github.com/openai/openai-go/v3 to hedgeprobe.
//
// openai-go's ssestream.Stream is a hedgeprobe.Source as it is; this
// package adds the classifier (Classify), the token count (Tokens) and a
// Route that opens one NewStreaming call per attempt and types its errors
// for hedging (MapError).
//
//	client := openai.NewClient(option.WithMaxRetries(0)) // hedgeprobe retries
//	params := openai.ChatCompletionNewParams{
//		Model:    openai.ChatModelGPT4oMini,
//		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
//	}
//	p, _ := hedgeprobe.New(cfg, openaigo.Classify, hedgeprobe.WithTokenCount(openaigo.Tokens))
//	stream := p.Stream(ctx,
//		openaigo.Route("openai", client, params, openaigo.RouteOptions{}),
//		openaigo.Route("backup", backupClient, params, openaigo.RouteOptions{}))
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
// openai-go drops SSE comments. To time keepalives, build the client with
// option.WithHTTPClient(&http.Client{Transport: &sse.Tap{}}) and set
// RouteOptions.TapKeepalives: each comment then comes out as an empty
// chunk, which Classify calls Keepalive.
package openaigo
