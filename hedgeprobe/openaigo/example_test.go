package openaigo_test

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Example is the package documentation's example, compiled so that it
// stays true: OpenAI, and a vLLM server that can continue its stream.
func Example() {
	ctx := context.Background()
	var cfg hedgeprobe.Config
	client := openai.NewClient(option.WithMaxRetries(0)) // hedgeprobe retries
	vllmClient := openai.NewClient(option.WithBaseURL("http://vllm:8000/v1"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
	}
	p, err := hedgeprobe.New(cfg, openaigo.Items)
	if err != nil {
		fmt.Println(err)
		return
	}
	stream := p.Stream(ctx,
		openaigo.Route("openai", client, params, openaigo.RouteOptions{}),
		openaigo.Route("vllm", vllmClient, params, openaigo.RouteOptions{Continue: sse.ContinueFinalMessage}))
	defer stream.Close()
	for stream.Next() { // the usual openai-go loop
		chunk := stream.Current()
		if len(chunk.Choices) > 0 {
			fmt.Print(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		fmt.Println(err)
	}
}
