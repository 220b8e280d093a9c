package sse_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

func ExampleNewReader() {
	rd := sse.NewReader(strings.NewReader("\xEF\xBB\xBF: keepalive\r\n\r\nevent: ping\ndata: {}\n\ndata: a\ndata: b\n\nid: 7\n\n"))
	for rd.Next() {
		ev := rd.Event()
		if ev.Comment {
			fmt.Printf("comment %q\n", ev.Data)
			continue
		}
		fmt.Printf("%s %q\n", ev.Type, ev.Data)
	}
	fmt.Println("err:", rd.Err())
	// Output:
	// comment "keepalive"
	// ping "{}"
	// message "a\nb"
	// err: <nil>
}

// ExampleOpenAIRoute hedges a stalling upstream with a steady one; fakellm
// (10× faster: the stall lasts 3 s, the hedge wins in a tenth of that)
// stands in for both.
func ExampleOpenAIRoute() {
	cfg, _ := fakellm.LoadFile("../../testdata/fakellm/profiles.yaml")
	srv, _ := fakellm.New(fakellm.Options{Config: cfg, Scale: 0.1})
	hs := &http.Server{Handler: srv}
	ln, base := listen()
	go hs.Serve(ln)
	defer hs.Close()
	tr := sse.NewTransport(sse.TransportOptions{})
	defer tr.CloseIdleConnections()

	route := func(profile string) hedgeprobe.Route[sse.ChatChunk] {
		return sse.OpenAIRoute(profile, sse.OpenAIRequest{
			BaseURL:  base + "/v1",
			APIKey:   "key",
			Model:    "fake-model",
			Messages: []sse.Message{{Role: "user", Content: "Hello"}},
			Header:   http.Header{"X-Fakellm-Profile": {profile}},
			Client:   &http.Client{Transport: tr},
		})
	}
	p, _ := hedgeprobe.New(hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, MaxAttempts: 2}, sse.OpenAIItems)

	stream := p.Stream(context.Background(), route("stall"), route("steady"))
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		fmt.Println(err)
		return
	}
	st := stream.Stats()
	fmt.Println("winner:", st.WinnerRoute, "content chunks:", st.ChunksDelivered)
	fmt.Println(strings.Join(strings.Fields(text.String())[:3], " "))
	// Output:
	// winner: steady content chunks: 40
	// lorem ipsum dolor
}
