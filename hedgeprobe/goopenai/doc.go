// Package goopenai adapts github.com/sashabaranov/go-openai to hedgeprobe.
//
// go-openai streams with Recv and io.EOF; Source turns a
// *openai.ChatCompletionStream into a hedgeprobe.Source, Route opens one
// per attempt, Items tells hedgeprobe about its chunks (the classifier,
// the token count, the model, the answer text a resume continues), and
// Receiver turns the
// hedged stream back into the Recv shape, so the caller's loop does not
// change:
//
//	config := openai.DefaultConfig(key)
//	config.HTTPClient = &http.Client{Transport: goopenai.Transport(nil, 0)} // see below
//	client := openai.NewClientWithConfig(config)
//	req := openai.ChatCompletionRequest{
//		Model:    openai.GPT4oMini,
//		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Hello"}},
//	}
//	p, err := hedgeprobe.New(cfg, goopenai.Items)
//	if err != nil { … }
//	stream := goopenai.NewReceiver(p.Stream(ctx,
//		goopenai.Route("openai", client, req, goopenai.RouteOptions{}),
//		goopenai.Route("llama", llamaClient, req, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})))
//	defer stream.Close()
//	for { // the usual go-openai loop
//		resp, err := stream.Recv()
//		if errors.Is(err, io.EOF) {
//			break
//		}
//		if err != nil { … }
//		if len(resp.Choices) > 0 { // the usage chunk has none
//			fmt.Print(resp.Choices[0].Delta.Content)
//		}
//	}
//
// go-openai has no retries of its own to turn off. Its errors carry no
// response headers, so Retry-After does not reach hedgeprobe's pushback.
// It has no middleware, so what openaigo and anthropicgo do in theirs is
// done in its HTTPClient's transport: build it on Transport, which bounds
// an error response's body (go-openai reads it whole: a 429 whose body
// stalls then fails its attempt within a second rather than at its hedge
// delay) and a line of a stream (go-openai reads a line whole, however
// long), hands go-openai a stream's "data:" lines alone (the others it
// keeps for the whole stream, see below), and reads a stream's end after
// its [DONE], so an HTTP/1.1 connection serves the next attempt; the
// client's other calls (speech, files, transcriptions) get their bodies
// as sent. Under it go sse.Lanes, so that no two attempts of a call share
// an HTTP/2 connection (a hedge on a frozen connection gets nothing
// either), and an sse.Tap, to time keepalives, which with no Base sends
// through lanes already. With an Azure config
// go-openai sends the key as api-key, which Go's client, unlike
// Authorization, keeps on a redirect to another host; build the HTTPClient
// with sse.HeadersStayOnHost too:
//
//	clientConfig := openai.DefaultAzureConfig(key, endpoint) // or openai.DefaultConfig(key)
//	clientConfig.HTTPClient = sse.HeadersStayOnHost(&http.Client{
//		Transport: goopenai.Transport(&sse.Lanes{}, 0),
//	}, "Api-Key")
//	client := openai.NewClientWithConfig(clientConfig)
//
// Without Transport, go-openai keeps every non-"data:" line since the
// stream began (an upstream sending long comments grows the attempt's
// memory without bound) and glues them before an error payload, which it
// then cannot decode; it reads a chunk that begins {"error": (an "error":
// null first) as such a payload too. The adapter reports that as a
// transient mid-stream *sse.UpstreamError without the payload's type or
// message (which go-openai does not hand over), so the call is hedged or
// resumed; such a chunk's content is lost. It also counts every
// non-"data:" line (keepalive comments and the blank lines after them)
// against ClientConfig.EmptyMessagesLimit (default 300) within one Recv:
// raise it for upstreams that send keepalives through long silences.
// Through Transport none of this happens: go-openai sees neither the
// comments nor their blank lines.
//
// What go-openai's types do not hold, the adapter cannot see: a delta's
// "reasoning" (Ollama's, OpenRouter's; DeepSeek's "reasoning_content" is
// read) and "annotations" classify as Keepalive, so a long reasoning phase
// looks like silence to the hedge and the watchdogs, and a stream silent
// inside such reasoning after its text is resumed, where the other routes
// leave it to the watchdog — use openaigo or sse.OpenAIRoute for such
// upstreams. A 200 JSON body instead of a stream
// is go-openai's to read: an error object in it ends as an
// *sse.UpstreamError (a payload in a 200 response, as on the raw route),
// anything else as an *sse.ConnectionError (go-openai does not hand over
// the body, which the raw route would quote in a ProtocolError); another
// non-stream Content-Type is an *sse.ProtocolError, as on the raw route.
// go-openai reads such a JSON body as it reads a stream, without a bound:
// one that stalls holds its attempt until the hedge delay or a watchdog
// (the raw route gives it a second). go-openai reads each "data:" line
// alone, as a whole payload: an event whose JSON is split over several
// "data:" lines (valid SSE) and an "event: error" whose data is not JSON
// fail as a fatal *sse.ProtocolError, and an empty "data:" line (which
// the SSE rules do not dispatch, and the raw route takes for a keepalive)
// as a transient mid-stream *sse.UpstreamError; sse.OpenAIRoute reads all
// three as the SSE rules say.
//
// A stream that falls silent after its first chunks is resumed
// (docs/design.md §2 rule 10) on a route that can continue a partial
// answer. go-openai sends only the fields it knows, so a goopenai route
// continues only with sse.ContinueTrailingAssistant (llama.cpp's server,
// Ollama); the switches of vLLM, SGLang, DeepSeek and Mistral need
// openaigo or sse.OpenAIRoute (RouteOptions.Continue).
package goopenai
