package hedgeprobe_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// lines is a toy upstream: one item per word, each after a delay.
type lines struct {
	ctx   context.Context
	words []string
	delay time.Duration
	cur   string
}

func (l *lines) Next() bool {
	if len(l.words) == 0 {
		return false
	}
	select {
	case <-time.After(l.delay):
	case <-l.ctx.Done():
		return false
	}
	l.cur, l.words = l.words[0], l.words[1:]
	return true
}
func (l *lines) Current() string { return l.cur }
func (l *lines) Err() error      { return l.ctx.Err() }
func (l *lines) Close() error    { return nil }

func route(name string, first time.Duration) hedgeprobe.Route[string] {
	return hedgeprobe.Route[string]{
		Name: name, Provider: "example", Model: "m",
		Open: func(ctx context.Context, _ hedgeprobe.Attempt) (hedgeprobe.Source[string], error) {
			return &lines{ctx: ctx, words: strings.Fields("hello from " + name), delay: first}, nil
		},
	}
}

// A primary that is slow to its first chunk is hedged after 20 ms on the
// second route, which answers first and wins; the primary is cancelled.
func Example() {
	classify := func(s string) hedgeprobe.Kind {
		if s == "" {
			return hedgeprobe.Keepalive
		}
		return hedgeprobe.Content
	}
	p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: 20 * time.Millisecond, StallTimeout: time.Second},
		hedgeprobe.Items[string]{Classify: classify})
	if err != nil {
		panic(err)
	}
	// A minute, not a second: the example's output names the winner, and a
	// loaded machine must not let the slow route win. It is cancelled when
	// the hedge wins, so the wait costs nothing.
	s := p.Stream(context.Background(), route("slow", time.Minute), route("fast", time.Millisecond))
	defer s.Close()
	for s.Next() {
		fmt.Println(s.Current())
	}
	if err := s.Err(); err != nil {
		fmt.Println("error:", err, hedgeprobe.IsTransient(err))
	}
	st := s.Stats()
	fmt.Println(st.Outcome, st.WinnerRoute, st.Attempts[0].Outcome, st.Attempts[1].Trigger)
	// Output:
	// hello
	// from
	// fast
	// ok fast canceled ttft
}

// All is the range-over-func form: it starts the call lazily, yields the
// call's error last, and closes the Stream when the loop ends.
func ExampleStream_All() {
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 1},
		hedgeprobe.Items[string]{Classify: func(string) hedgeprobe.Kind { return hedgeprobe.Content }})
	if err != nil {
		panic(err)
	}
	for word, err := range p.Stream(context.Background(), route("only", time.Millisecond)).All() {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println(word)
	}
	// Output:
	// hello
	// from
	// only
}
