// Package anthropicgo adapts github.com/anthropics/anthropic-sdk-go/v2 to
// hedgeprobe.
//
// The SDK's ssestream.Stream is a hedgeprobe.Source as it is; this package
// adds what hedgeprobe needs to know of its event union (Items: the
// classifier, the token count, the model, the answer text a resume
// continues) and a Route that opens one NewStreaming call per attempt and
// types its errors for hedging (MapError).
//
//	client := anthropic.NewClient(option.WithMaxRetries(0), // hedgeprobe retries
//		option.WithHTTPClient(&http.Client{Transport: &sse.Lanes{}})) // see below
//	params := anthropic.MessageNewParams{
//		Model:     "claude-sonnet-5-5",
//		MaxTokens: 1024,
//		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))},
//	}
//	p, err := hedgeprobe.New(cfg, anthropicgo.Items)
//	if err != nil { … }
//	stream := p.Stream(ctx,
//		anthropicgo.Route("anthropic", client, params, anthropicgo.RouteOptions{Prefill: true}),
//		anthropicgo.Route("backup", backup, params, anthropicgo.RouteOptions{Prefill: true}))
//	defer stream.Close()
//	for stream.Next() { // the usual anthropic-sdk-go loop
//		event := stream.Current()
//		if event.Type == "content_block_delta" {
//			fmt.Print(event.Delta.Text)
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
// The SDK drops "event: ping". To time pings, build the client with
// option.WithHTTPClient(&http.Client{Transport: &sse.Tap{}}) and set
// RouteOptions.TapKeepalives: each ping then comes out as an event with an
// empty Type, which Classify calls Keepalive.
//
// The SDK reads an event by its "event:" line and skips one without it: a
// compatible server that sends its events as "data:" lines alone (valid
// SSE, which sse.AnthropicRoute reads by the data's "type") ends every
// attempt as a stream without its terminal event, a transient
// *sse.ConnectionError, and is hedged each time; use sse.AnthropicRoute
// for such a server.
//
// A stream that falls silent after its first chunks is resumed (docs/design.md
// §2 rule 10) on a route whose model accepts a prefill (RouteOptions.Prefill):
// the delivered text goes as a trailing assistant message, or extends the
// caller's own, without its trailing whitespace (Anthropic refuses it; cut
// are all of Unicode's white space, NBSP and U+3000 included, U+001C–U+001F
// and U+FEFF,
// as the clients that strip a prefill for it do), and the caller reads that
// whitespace once. A model that refuses prefill answers
// 400; the resume then goes to the next route that can, and that route is not
// asked again for a while.
package anthropicgo
