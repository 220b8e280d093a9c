package goopenai_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Example is the package documentation's example, compiled so that it
// stays true: OpenAI, and a llama.cpp server that can continue its stream.
func Example() {
	ctx := context.Background()
	var cfg hedgeprobe.Config
	client := openai.NewClient("key")
	llamaConfig := openai.DefaultConfig("")
	llamaConfig.BaseURL = "http://llama:8080/v1"
	llamaClient := openai.NewClientWithConfig(llamaConfig)
	req := openai.ChatCompletionRequest{
		Model:    openai.GPT4oMini,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Hello"}},
	}
	p, err := hedgeprobe.New(cfg, goopenai.Items)
	if err != nil {
		fmt.Println(err)
		return
	}
	stream := goopenai.NewReceiver(p.Stream(ctx,
		goopenai.Route("openai", client, req, goopenai.RouteOptions{}),
		goopenai.Route("llama", llamaClient, req, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})))
	defer stream.Close()
	for { // the usual go-openai loop
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if len(resp.Choices) > 0 { // the usage chunk has none
			fmt.Print(resp.Choices[0].Delta.Content)
		}
	}
}
