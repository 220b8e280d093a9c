package anthropicgo_test

import (
	"context"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
)

// Example is the package documentation's example, compiled so that it
// stays true: two routes whose model accepts a prefill, so a stream that
// falls silent is continued on the other.
func Example() {
	ctx := context.Background()
	var cfg hedgeprobe.Config
	client := anthropic.NewClient(option.WithMaxRetries(0)) // hedgeprobe retries
	backup := anthropic.NewClient(option.WithBaseURL("http://backup:8080"), option.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-5-5",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))},
	}
	p, err := hedgeprobe.New(cfg, anthropicgo.Items)
	if err != nil {
		fmt.Println(err)
		return
	}
	stream := p.Stream(ctx,
		anthropicgo.Route("anthropic", client, params, anthropicgo.RouteOptions{Prefill: true}),
		anthropicgo.Route("backup", backup, params, anthropicgo.RouteOptions{Prefill: true}))
	defer stream.Close()
	for stream.Next() { // the usual anthropic-sdk-go loop
		event := stream.Current()
		if event.Type == "content_block_delta" {
			fmt.Print(event.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		fmt.Println(err)
	}
}
