//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	gooai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/ollama"
	"github.com/streamwatch/streamwatch/internal/testbed/stack"
	"github.com/streamwatch/streamwatch/semconv"
)

// Timing of the Ollama scenarios. The collector's stall threshold is below
// the shortest runner stop (StallAfter) and far above the tiny model's
// inter-token gaps (a few ms).
const (
	stallThreshold = 500 * time.Millisecond
	stallAfter     = time.Second
	stallTimeout   = 1500 * time.Millisecond
	// stallTolerance bounds the timing checks: the runner may have a
	// token or two in flight when it is stopped, and two runners share
	// two busy cores with the test.
	stallTolerance = 400 * time.Millisecond
)

// ollamaSuite is what every Ollama scenario uses: two servers serving the
// same tiny model, and a tracer whose spans go both to the collector and
// to an in-process recorder.
type ollamaSuite struct {
	a, b   *ollama.Server
	tp     *sdktrace.TracerProvider
	rec    *tracetest.SpanRecorder
	traces *sink
	calls  map[hedgeprobe.Outcome]int // calls made through a Prober
	stalls []time.Duration            // runner stops the primaries' spans measure
}

// TestOllama runs hedgeprobe against two real Ollama servers (built by
// `make ollama`, serving the tiny model of internal/testbed/ollama) and
// the real collector, and stalls a server by stopping its runner process.
func TestOllama(t *testing.T) {
	root := repoRoot(t)
	bin := os.Getenv("STREAMWATCH_OLLAMA")
	if bin == "" {
		bin = filepath.Join(root, "bin", "ollama")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("ollama binary: %v (run make ollama)", err)
	}
	collectorBin, promBin := stackBinaries(t, root)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	s := &ollamaSuite{calls: map[hedgeprobe.Outcome]int{}}

	start := time.Now()
	model := filepath.Join(dir, "tiny.gguf")
	if err := ollama.WriteModelFile(model, ollama.ModelOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ollama set-up: model written in %s", time.Since(start).Round(time.Millisecond))
	s.a = startOllama(ctx, t, ollama.Options{Bin: bin, Dir: dir, Model: model, Name: "ollama-a"})
	s.b = startOllama(ctx, t, ollama.Options{Bin: bin, Dir: dir, Model: model, Name: "ollama-b"})

	s.traces = &sink{}
	col, prom := startCollectorStack(ctx, t, dir, collectorBin, promBin, s.traces)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(col.OTLPHTTP), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	s.rec = tracetest.NewSpanRecorder()
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSpanProcessor(s.rec))
	t.Cleanup(func() { _ = s.tp.Shutdown(context.Background()) })

	// run runs one scenario on servers that answer. The scenarios abandon
	// streams on purpose (a watchdog firing, a loser canceled), which can
	// wedge an Ollama server for good (ollama.Server.Responsive); the
	// next scenario would then hang until the suite's deadline. A wedged
	// server is replaced before the scenario, and the replacement logged.
	run := func(t *testing.T, name string, f func(t *testing.T)) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			s.ensureResponsive(ctx, t, 20*time.Second)
			f(t)
		})
	}
	// Servers that replace wedged ones stop with the suite.
	t.Cleanup(func() { s.a.Stop(); s.b.Stop() })

	run(t, "a server that does not answer is replaced", func(t *testing.T) {
		// A stopped runner answers nothing, as a wedged server does.
		old := s.a
		if _, err := old.Pause(); err != nil {
			t.Fatal(err)
		}
		s.ensureResponsive(ctx, t, 2*time.Second)
		if s.a == old {
			t.Fatal("the stopped server was not replaced")
		}
		if err := s.a.Responsive(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("framing", func(t *testing.T) {
		run(t, "openai-go", func(t *testing.T) { testFraming(ctx, t, s, openaiGo) })
		run(t, "raw SSE", func(t *testing.T) { testFraming(ctx, t, s, rawSSE) })
		run(t, "go-openai", func(t *testing.T) { testFraming(ctx, t, s, goOpenAI) })
	})
	run(t, "prefill continues a delivered prefix byte for byte", func(t *testing.T) {
		testPrefill(ctx, t, s)
	})
	t.Run("stall before commit", func(t *testing.T) {
		buffered := hedgeprobe.Config{Delivery: hedgeprobe.Buffered}
		// The held chunks must cover the tokens in flight when the
		// runner stops: the tiny model writes 2,000–4,000 tokens/s, and
		// up to 40 arrived after the client's third chunk in our runs.
		held := hedgeprobe.Config{HoldChunks: 200}
		run(t, "openai-go/buffered", func(t *testing.T) { testStallBeforeCommit(ctx, t, s, openaiGo, buffered) })
		run(t, "openai-go/hold", func(t *testing.T) { testStallBeforeCommit(ctx, t, s, openaiGo, held) })
		run(t, "raw SSE/buffered", func(t *testing.T) { testStallBeforeCommit(ctx, t, s, rawSSE, buffered) })
		run(t, "raw SSE/hold", func(t *testing.T) { testStallBeforeCommit(ctx, t, s, rawSSE, held) })
	})
	t.Run("stall after commit, watchdog", func(t *testing.T) {
		run(t, "openai-go", func(t *testing.T) { testStallWatchdog(ctx, t, s, openaiGo) })
		run(t, "raw SSE", func(t *testing.T) { testStallWatchdog(ctx, t, s, rawSSE) })
	})
	t.Run("stall after commit, resumed", func(t *testing.T) {
		run(t, "openai-go", func(t *testing.T) { testStallResumed(ctx, t, s, openaiGo) })
		run(t, "raw SSE", func(t *testing.T) { testStallResumed(ctx, t, s, rawSSE) })
	})
	t.Run("collector metrics", func(t *testing.T) {
		testOllamaMetrics(ctx, t, s, prom)
	})
}

// startOllama starts a server, stopped at cleanup, and logs its set-up
// time.
func startOllama(ctx context.Context, t *testing.T, o ollama.Options) *ollama.Server {
	t.Helper()
	srv, err := ollama.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", srv.Name, tail(srv.Log(), 40))
		}
	})
	st := srv.Setup
	t.Logf("ollama set-up: %s listening in %s, model created in %s, loaded in %s",
		srv.Name, st.Listen.Round(time.Millisecond), st.Create.Round(time.Millisecond), st.Load.Round(time.Millisecond))
	return srv
}

// ensureResponsive replaces each server that does not generate a token
// within timeout (a healthy one takes well under a second) with a new one,
// logging the old one's last lines.
func (s *ollamaSuite) ensureResponsive(ctx context.Context, t *testing.T, timeout time.Duration) {
	t.Helper()
	for _, srv := range []**ollama.Server{&s.a, &s.b} {
		err := (*srv).Responsive(ctx, timeout)
		if err == nil {
			continue
		}
		t.Logf("%v; restarting it. Its log:\n%s", err, tail((*srv).Log(), 10))
		next, err := (*srv).Restart(ctx)
		if err != nil {
			t.Fatal(err)
		}
		*srv = next
	}
}

// startCollectorStack starts otelcol-streamwatch (processed traces also to
// traces) and a Prometheus server scraping it, both stopped at cleanup.
func startCollectorStack(ctx context.Context, t *testing.T, dir, collectorBin, promBin string, traces *sink) (*stack.Collector, *stack.Prometheus) {
	t.Helper()
	root := repoRoot(t)
	sinkSrv := httptest.NewServer(traces)
	t.Cleanup(sinkSrv.Close)
	return startScraped(ctx, t, dir, collectorBin, promBin,
		[]string{filepath.Join(root, "deploy", "collector.yaml"), filepath.Join(root, "e2e", "testdata", "sink.yaml")},
		"STREAMWATCH_METRICS_INTERVAL=1s", "STREAMWATCH_E2E_SINK="+strings.TrimPrefix(sinkSrv.URL, "http://"),
		fmt.Sprintf("STREAM__STALL_THRESHOLD_MS=%d", stallThreshold.Milliseconds()))
}

// ---- Adapters: how each client library talks to Ollama. ----

// chatCall is one chat request: a user prompt, optionally an assistant
// message to continue (a prefill), and the number of tokens to generate.
type chatCall struct {
	prompt    string
	prefill   string
	maxTokens int
}

// item is what the framing check reads from one stream item.
type item struct {
	role, content, finish string
	choices               int
	usage                 bool
	completionTokens      int64
}

// adapter is one client library: its route, classifier, token count and
// reading of items. The hedgeprobe-facing parts are route, classify and
// tokens, used only by newProber and the route helpers below.
type adapter[T any] struct {
	classify hedgeprobe.Classifier[T]
	items    hedgeprobe.Items[T]
	// route opens c on srv; continues makes the route resumable, with a
	// trailing assistant message (the Modelfile leaves it open).
	route func(name string, srv *ollama.Server, c chatCall, continues bool) hedgeprobe.Route[T]
	item  func(T) item
}

// Ollama's OpenAI-compatible endpoint sets temperature 1 when a request
// has none, whatever the Modelfile says: every request sends temperature
// 0 and the seed itself.
var openaiGo = adapter[openaigo.Chunk]{
	classify: openaigo.Classify,
	items:    openaigo.Items,
	route: func(name string, srv *ollama.Server, c chatCall, continues bool) hedgeprobe.Route[openaigo.Chunk] {
		client := openai.NewClient(
			option.WithBaseURL(srv.BaseURL()+"/"),
			option.WithAPIKey("ollama"),
			option.WithMaxRetries(0),
			option.WithHTTPClient(sse.DefaultClient()),
		)
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(c.prompt)}
		if c.prefill != "" {
			msgs = append(msgs, openai.AssistantMessage(c.prefill))
		}
		params := openai.ChatCompletionNewParams{
			Model:    ollama.ModelName,
			Messages: msgs,
			// Ollama reads max_tokens, not max_completion_tokens.
			MaxTokens:   openai.Int(int64(c.maxTokens)),
			Temperature: openai.Float(0),
			Seed:        openai.Int(ollama.Seed),
		}
		o := openaigo.RouteOptions{Provider: "ollama"}
		if continues {
			o.Continue = sse.ContinueTrailingAssistant
		}
		return openaigo.Route(name, client, params, o)
	},
	item: func(c openaigo.Chunk) item {
		it := item{choices: len(c.Choices), usage: c.JSON.Usage.Valid(), completionTokens: c.Usage.CompletionTokens}
		if len(c.Choices) > 0 {
			ch := c.Choices[0]
			it.role, it.content, it.finish = ch.Delta.Role, ch.Delta.Content, ch.FinishReason
		}
		return it
	},
}

// goOpenAI is go-openai through goopenai.Transport, which filters the
// stream's lines, bounds them and reads its end: its framing is checked
// on Ollama's own stream. go-openai leaves a temperature of 0 out of the
// request (omitempty), so its text is not the seeded reference's, and it
// is not used where the text is compared.
var goOpenAI = adapter[goopenai.Chunk]{
	classify: goopenai.Classify,
	items:    goopenai.Items,
	route: func(name string, srv *ollama.Server, c chatCall, continues bool) hedgeprobe.Route[goopenai.Chunk] {
		cfg := gooai.DefaultConfig("ollama")
		cfg.BaseURL = srv.BaseURL()
		cfg.HTTPClient = &http.Client{Transport: goopenai.Transport(sse.NewTransport(sse.TransportOptions{}), 0)}
		msgs := []gooai.ChatCompletionMessage{{Role: gooai.ChatMessageRoleUser, Content: c.prompt}}
		if c.prefill != "" {
			msgs = append(msgs, gooai.ChatCompletionMessage{Role: gooai.ChatMessageRoleAssistant, Content: c.prefill})
		}
		seed := ollama.Seed
		req := gooai.ChatCompletionRequest{Model: ollama.ModelName, Messages: msgs, MaxTokens: c.maxTokens, Seed: &seed}
		o := goopenai.RouteOptions{Provider: "ollama"}
		if continues {
			o.Continue = sse.ContinueTrailingAssistant
		}
		return goopenai.Route(name, gooai.NewClientWithConfig(cfg), req, o)
	},
	item: func(c goopenai.Chunk) item {
		it := item{choices: len(c.Choices), usage: c.Usage != nil}
		if c.Usage != nil {
			it.completionTokens = int64(c.Usage.CompletionTokens)
		}
		if len(c.Choices) > 0 {
			ch := c.Choices[0]
			it.role, it.content, it.finish = ch.Delta.Role, ch.Delta.Content, string(ch.FinishReason)
		}
		return it
	},
}

var rawSSE = adapter[sse.ChatChunk]{
	classify: sse.ClassifyOpenAI,
	items:    sse.OpenAIItems,
	route: func(name string, srv *ollama.Server, c chatCall, continues bool) hedgeprobe.Route[sse.ChatChunk] {
		req := sseRequest(srv, c)
		if continues {
			req.Continue = sse.ContinueTrailingAssistant
		}
		return sse.OpenAIRoute(name, req)
	},
	item: func(c sse.ChatChunk) item {
		it := item{choices: len(c.Choices), usage: c.Usage != nil}
		if c.Usage != nil {
			it.completionTokens = c.Usage.CompletionTokens
		}
		if len(c.Choices) > 0 {
			ch := c.Choices[0]
			it.role, it.content, it.finish = ch.Delta.Role, ch.Delta.Content, ch.FinishReason
		}
		return it
	},
}

func sseRequest(srv *ollama.Server, c chatCall) sse.OpenAIRequest {
	msgs := []sse.Message{{Role: "user", Content: c.prompt}}
	if c.prefill != "" {
		msgs = append(msgs, sse.Message{Role: "assistant", Content: c.prefill})
	}
	return sse.OpenAIRequest{
		Provider: "ollama",
		BaseURL:  srv.BaseURL(),
		Model:    ollama.ModelName,
		Messages: msgs,
		Params:   map[string]any{"max_tokens": c.maxTokens, "temperature": 0, "seed": ollama.Seed},
	}
}

// ---- hedgeprobe-facing helpers (the Route/Open and New APIs are in flux). ----

// newProber returns a Prober of a's items with cfg, a generous hedge
// budget (the scenarios are about hedges, not their rate), and s's tracer.
func newProber[T any](t *testing.T, s *ollamaSuite, a adapter[T], cfg hedgeprobe.Config, opts ...hedgeprobe.Option) *hedgeprobe.Prober[T] {
	t.Helper()
	cfg.HedgeBudget, cfg.HedgeBurst = 1, 10
	opts = append(opts, hedgeprobe.WithTracerProvider(s.tp))
	p, err := hedgeprobe.New(cfg, a.items, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// openDirect opens one attempt of r outside any Prober.
func openDirect[T any](ctx context.Context, r hedgeprobe.Route[T]) (hedgeprobe.Source[T], error) {
	return r.Open(ctx, hedgeprobe.Attempt{})
}

// pause is a stop of a runner: when it was stopped and continued,
// written on the attempt's goroutine and the hedge's, read by the test.
type pause struct {
	mu                     sync.Mutex
	stoppedAt, continuedAt time.Time
	err                    error
	resume                 func()
}

func (p *pause) get() (stoppedAt, continuedAt time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stoppedAt, p.continuedAt, p.err
}

// cont continues the runner if it is stopped; it is idempotent.
func (p *pause) cont() {
	p.mu.Lock()
	resume := p.resume
	if resume != nil && p.continuedAt.IsZero() {
		p.continuedAt = time.Now()
	}
	p.mu.Unlock()
	if resume != nil {
		resume()
	}
}

// pauseAfter wraps r so that its first attempt, on receiving its k-th
// content chunk, stops srv's runner (SIGSTOP) until the pause's cont, or
// the test's cleanup, continues it. The stop happens inside the attempt's
// Next, so it is exactly k chunks in as the client sees it.
func pauseAfter[T any](t *testing.T, r hedgeprobe.Route[T], classify hedgeprobe.Classifier[T], srv *ollama.Server, k int) (hedgeprobe.Route[T], *pause) {
	p := &pause{}
	var once sync.Once
	open := r.Open
	r.Open = func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[T], error) {
		src, err := open(ctx, a)
		if err != nil {
			return src, err
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return src, nil
		}
		return &watchedSource[T]{Source: src, classify: classify, k: k, at: func() {
			resume, err := srv.Pause()
			p.mu.Lock()
			p.stoppedAt, p.err, p.resume = time.Now(), err, resume
			p.mu.Unlock()
			if err == nil {
				t.Cleanup(resume)
			}
		}}, nil
	}
	return r, p
}

// onFirstContent wraps r so that f runs when an attempt of it receives
// its first content chunk.
func onFirstContent[T any](r hedgeprobe.Route[T], classify hedgeprobe.Classifier[T], f func()) hedgeprobe.Route[T] {
	open := r.Open
	r.Open = func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[T], error) {
		src, err := open(ctx, a)
		if err != nil {
			return src, err
		}
		return &watchedSource[T]{Source: src, classify: classify, k: 1, at: f}, nil
	}
	return r
}

// watchedSource runs at when its k-th content chunk arrives.
type watchedSource[T any] struct {
	hedgeprobe.Source[T]
	classify hedgeprobe.Classifier[T]
	n, k     int
	at       func()
}

func (w *watchedSource[T]) Next() bool {
	ok := w.Source.Next()
	if ok && w.classify(w.Current()) == hedgeprobe.Content {
		if w.n++; w.n == w.k {
			w.at()
		}
	}
	return ok
}

// called is what a call returned: the caller's text, the stream's stats
// and error, and the trace id of its spans.
type called struct {
	text    string
	stats   hedgeprobe.Stats
	traceID trace.TraceID
	err     error
}

// call runs one call of p over routes under a parent span, with the
// caller's usual loop.
func call[T any](ctx context.Context, s *ollamaSuite, p *hedgeprobe.Prober[T], a adapter[T], routes ...hedgeprobe.Route[T]) called {
	ctx, span := s.tp.Tracer("e2e").Start(ctx, "ollama scenario")
	defer span.End()
	stream := p.Stream(ctx, routes...)
	var text strings.Builder
	for stream.Next() {
		text.WriteString(a.item(stream.Current()).content)
	}
	_ = stream.Close()
	st := stream.Stats()
	s.calls[st.Outcome]++
	return called{text: text.String(), stats: st, traceID: span.SpanContext().TraceID(), err: stream.Err()}
}

// ---- Scenarios. ----

// reference streams c from srv without hedgeprobe and returns its text.
func reference(ctx context.Context, t *testing.T, srv *ollama.Server, c chatCall) string {
	t.Helper()
	items, err := readAll(ctx, rawSSE, rawSSE.route("reference", srv, c, false))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.content)
	}
	return b.String()
}

type timedItem struct {
	item
	kind hedgeprobe.Kind
	at   time.Time
}

func readAll[T any](ctx context.Context, a adapter[T], r hedgeprobe.Route[T]) ([]timedItem, error) {
	src, err := openDirect(ctx, r)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var items []timedItem
	for src.Next() {
		v := src.Current()
		items = append(items, timedItem{item: a.item(v), kind: a.classify(v), at: time.Now()})
	}
	return items, src.Err()
}

// testFraming: every item of Ollama's stream is classified right, and the
// token count reaches the attempt span beside the chunk count.
func testFraming[T any](ctx context.Context, t *testing.T, s *ollamaSuite, a adapter[T]) {
	c := chatCall{prompt: "Tell me about rivers.", maxTokens: 200}
	items, err := readAll(ctx, a, a.route("ollama-a", s.a, c, false))
	if err != nil {
		t.Fatal(err)
	}
	var content, control int
	var usage int64 = -1
	var text strings.Builder
	var first, last time.Time
	for i, it := range items {
		want := hedgeprobe.Control
		switch {
		case it.content != "":
			want = hedgeprobe.Content
		case it.choices == 0 && !it.usage:
			want = hedgeprobe.Keepalive
		}
		if it.kind != want {
			t.Errorf("item %d %+v classified %v, want %v", i, it.item, it.kind, want)
		}
		switch it.kind {
		case hedgeprobe.Content:
			content++
			text.WriteString(it.content)
			if first.IsZero() {
				first = it.at
			}
			last = it.at
		case hedgeprobe.Control:
			control++
		}
		if it.choices > 0 && it.role != "assistant" {
			t.Errorf("item %d: role %q; Ollama sends the role on every chunk", i, it.role)
		}
		if it.usage {
			usage = it.completionTokens
		}
	}
	// Ollama's shape: content chunks, one finish chunk with empty content,
	// one usage chunk with no choices.
	n := len(items)
	if n < 3 || items[n-2].finish != "length" || items[n-2].content != "" || !items[n-1].usage || items[n-1].choices != 0 {
		t.Errorf("stream does not end with a finish chunk then a usage chunk: last items %+v", items[max(0, n-3):])
	}
	if control != 2 {
		t.Errorf("%d control items, want 2 (finish, usage)", control)
	}
	// The tiny model emits one word per token and Ollama streams every
	// token as its own chunk: chunk count = completion_tokens = max_tokens.
	if int64(content) != usage || content != c.maxTokens {
		t.Errorf("%d content chunks, usage.completion_tokens %d, max_tokens %d: want all equal", content, usage, c.maxTokens)
	}
	if !ollama.IsWords(text.String()) {
		t.Errorf("text is not made of the model's words: %.200q", text.String())
	}
	t.Logf("%d items: %d content, %d control; completion_tokens %d; %.0f tokens/s; %.80q…",
		n, content, control, usage, float64(content-1)/last.Sub(first).Seconds(), text.String())

	p := newProber(t, s, a, hedgeprobe.Config{MaxAttempts: 1})
	r := call(ctx, s, p, a, a.route("ollama-a", s.a, c, false))
	err, st, traceID := r.err, r.stats, r.traceID
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksDelivered != int64(content) {
		t.Errorf("the probe delivered %d content chunks, the direct read saw %d", st.ChunksDelivered, content)
	}
	att := attemptSpans(t, s.rec.Ended(), traceID)
	if len(att) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(att))
	}
	got := attrs(att[0].Attributes())
	if got[string(semconv.GenAIUsageOutputTokens)] != int64(c.maxTokens) || got[string(semconv.ChunkCount)] != int64(c.maxTokens) {
		t.Errorf("attempt span: output_tokens %v, chunk.count %v, want both %d",
			got[string(semconv.GenAIUsageOutputTokens)], got[string(semconv.ChunkCount)], c.maxTokens)
	}
}

// testPrefill: what resume will rely on, shown on Ollama alone. A
// reference run on one server; its first k chunks sent to the other
// server as a trailing assistant message; prefix + continuation equals the
// reference byte for byte.
func testPrefill(ctx context.Context, t *testing.T, s *ollamaSuite) {
	const n, k = 120, 37
	c := chatCall{prompt: "Continue this.", maxTokens: n}
	items, err := readAll(ctx, rawSSE, rawSSE.route("ollama-a", s.a, c, false))
	if err != nil {
		t.Fatal(err)
	}
	var ref, prefix strings.Builder
	chunks := 0
	for _, it := range items {
		if it.content == "" {
			continue
		}
		if chunks < k {
			prefix.WriteString(it.content)
		}
		chunks++
		ref.WriteString(it.content)
	}
	cont := reference(ctx, t, s.b, chatCall{prompt: c.prompt, prefill: prefix.String(), maxTokens: n - k})
	if got := prefix.String() + cont; got != ref.String() {
		t.Errorf("prefix + continuation differs from the reference run\nprefix:       %q\ncontinuation: %q\nreference:    %q", prefix.String(), cont, ref.String())
	}
}

// testStallBeforeCommit: the primary's runner stops mid-stream before its
// attempt commits; the stall trigger hedges to the other server, which
// wins; the caller reads exactly the winner's text.
//
// The two routes ask different prompts, so their texts differ and the
// caller's text shows which one won (with temperature 0 the same prompt
// gives the same text on both servers).
func testStallBeforeCommit[T any](ctx context.Context, t *testing.T, s *ollamaSuite, a adapter[T], cfg hedgeprobe.Config) {
	buffered := cfg.Delivery == hedgeprobe.Buffered
	// The primary asks for far more tokens than it will get to stream,
	// so its runner is stopped mid-generation (unstopped, the tiny model
	// writes a few hundred tokens before the client has read three), and
	// so that, continued, it cannot overtake the hedge.
	ca := chatCall{prompt: "Tell me about the sea.", maxTokens: 3000}
	cb := chatCall{prompt: "Tell me about the hills.", maxTokens: 1000}
	refB := reference(ctx, t, s.b, cb)
	if refA := reference(ctx, t, s.a, chatCall{prompt: ca.prompt, maxTokens: 50}); strings.HasPrefix(refB, refA) {
		t.Fatal("the two prompts give the same text; the check below could not tell the winner")
	}

	cfg.StallAfter = stallAfter
	cfg.HedgeAfter = time.Minute // no TTFT hedge
	var hedgedAt time.Time
	p := newProber(t, s, a, cfg, hedgeprobe.OnHedge(func(hedgeprobe.HedgeEvent) { hedgedAt = time.Now() }))
	primary, paused := pauseAfter(t, a.route("ollama-a", s.a, ca, false), a.classify, s.a, 3)
	hedge := a.route("ollama-b", s.b, cb, false)
	if buffered {
		// Buffered commits the first attempt to complete. The primary's
		// span shows its stall only if it streams again before the hedge
		// completes: continue it at the hedge's first chunk.
		hedge = onFirstContent(hedge, a.classify, paused.cont)
	}
	r := call(ctx, s, p, a, primary, hedge)
	text, err, st, traceID := r.text, r.err, r.stats, r.traceID
	paused.cont()
	stoppedAt, continuedAt, perr := paused.get()
	if err != nil || perr != nil {
		t.Fatalf("call: %v; pause: %v", err, perr)
	}
	if st.Winner != 1 || len(st.Attempts) != 2 || st.Attempts[1].Trigger != hedgeprobe.TriggerStall || st.Attempts[0].Outcome != hedgeprobe.AttemptCanceled {
		t.Fatalf("stats %+v: want a stall hedge to ollama-b that wins, the primary canceled", st)
	}
	if text != refB {
		t.Errorf("caller's text is not the winner's:\n got %.120q\nwant %.120q", text, refB)
	}
	if wait := hedgedAt.Sub(stoppedAt); wait < stallAfter || wait > stallAfter+stallTolerance {
		t.Errorf("hedge launched %s after the runner stopped, want StallAfter %s (+%s)", wait, stallAfter, stallTolerance)
	}

	// The collector's view of the primary. With Buffered it streamed
	// again after the pause, so its span holds one stall of the pause's
	// length and no keepalive (Ollama sends none). With HoldChunks the
	// hedge committed while it was still stopped, so its chunks end at the
	// pause and there is no gap to measure.
	sp := processedAttempt(ctx, t, s, traceID, "ollama-a")
	stalls := stallEvents(sp)
	t.Logf("primary: stopped after chunk 3 for %s, received %d chunks, stall segments %+v", continuedAt.Sub(stoppedAt), st.Attempts[0].ContentChunks, stalls)
	if !buffered {
		if len(stalls) != 0 {
			t.Errorf("%d stall segments on a primary canceled inside its pause, want 0", len(stalls))
		}
		return
	}
	pauseLen := continuedAt.Sub(stoppedAt)
	s.stalls = append(s.stalls, pauseLen)
	if len(stalls) != 1 {
		t.Fatalf("%d stall segments on the primary, want 1 (runner stopped for %s)", len(stalls), pauseLen)
	}
	d := time.Duration(stalls[0].durationMs * float64(time.Millisecond))
	if math.Abs(float64(d-pauseLen)) > float64(stallTolerance) {
		t.Errorf("stall of %s, the runner was stopped for %s (±%s)", d, pauseLen, stallTolerance)
	}
	if stalls[0].keepalives != 0 || stalls[0].afterChunk < 2 {
		t.Errorf("stall after chunk %d with %d keepalives; want after chunk ≥ 2 (stopped at the 3rd), 0 keepalives", stalls[0].afterChunk, stalls[0].keepalives)
	}
}

// testStallWatchdog: the committed stream's runner stops after its first
// chunks and stays stopped; without resume, the stall watchdog ends the
// call at StallTimeout with a typed, truncated error, and what was
// delivered stays delivered.
func testStallWatchdog[T any](ctx context.Context, t *testing.T, s *ollamaSuite, a adapter[T]) {
	c := chatCall{prompt: "Tell me about the stars.", maxTokens: 1000}
	ref := reference(ctx, t, s.a, c)
	p := newProber(t, s, a, hedgeprobe.Config{MaxAttempts: 1, StallTimeout: stallTimeout})
	primary, paused := pauseAfter(t, a.route("ollama-a", s.a, c, false), a.classify, s.a, 5)
	r := call(ctx, s, p, a, primary)
	text, err, st := r.text, r.err, r.stats
	defer paused.cont()
	ended := time.Now()
	stoppedAt, _, perr := paused.get()
	if perr != nil {
		t.Fatal(perr)
	}
	var te *hedgeprobe.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, hedgeprobe.ErrStallTimeout) || !te.Truncated || te.ChunksDelivered < 5 || !hedgeprobe.IsTransient(err) {
		t.Fatalf("err = %v (%T), want a transient, truncated stall TimeoutError after ≥ 5 chunks", err, err)
	}
	if st.Outcome != hedgeprobe.OutcomeStallTimeout {
		t.Errorf("outcome %s", st.Outcome)
	}
	if wait := ended.Sub(stoppedAt); wait < stallTimeout || wait > stallTimeout+stallTolerance {
		t.Errorf("the watchdog fired %s after the runner stopped, want StallTimeout %s (+%s)", wait, stallTimeout, stallTolerance)
	}
	if text == "" || !strings.HasPrefix(ref, text) {
		t.Errorf("delivered text %.80q is not a prefix of the uninterrupted run %.80q", text, ref)
	}
}

// testStallResumed: as testStallWatchdog, but the Prober resumes the
// stalled stream on the other server, which continues the delivered text
// (a trailing assistant message the Modelfile leaves open); with
// temperature 0 and the same seed on both, the caller's whole text is an
// uninterrupted reference run byte for byte. The continuation asks for
// max_tokens less the chunks delivered (sse.ContinuationLimit), and this
// model sends one token a chunk and never stops by itself, so the whole
// answer is exactly the reference run of max_tokens: not a token more.
func testStallResumed[T any](ctx context.Context, t *testing.T, s *ollamaSuite, a adapter[T]) {
	c := chatCall{prompt: "Tell me about the moon.", maxTokens: 1000}
	ref := reference(ctx, t, s.b, c)
	cfg := hedgeprobe.Config{
		HedgeAfter:   time.Minute,
		StallTimeout: 10 * time.Second, // the watchdog must not win
		MaxAttempts:  2,
		ResumeAfter:  stallAfter,
	}
	p := newProber(t, s, a, cfg)
	primary, paused := pauseAfter(t, a.route("ollama-a", s.a, c, true), a.classify, s.a, 20)
	defer paused.cont()
	r := call(ctx, s, p, a, primary, a.route("ollama-b", s.b, c, true))
	text, err, st, traceID := r.text, r.err, r.stats, r.traceID
	if _, _, perr := paused.get(); err != nil || perr != nil {
		t.Fatalf("call: %v; pause: %v", err, perr)
	}
	if text != ref {
		k := 0
		for k < len(text) && k < len(ref) && text[k] == ref[k] {
			k++
		}
		t.Errorf("caller's text (%d bytes, %d words) is not the uninterrupted run of max_tokens %d (%d bytes, %d words): they differ at byte %d\n got …%q\nwant …%q",
			len(text), len(strings.Fields(text)), c.maxTokens, len(ref), len(strings.Fields(ref)), k, text[max(k-80, 0):min(k+80, len(text))], ref[max(k-80, 0):min(k+80, len(ref))])
	}
	if st.Winner != 1 || len(st.Attempts) != 2 || st.Attempts[1].Trigger != hedgeprobe.TriggerResume ||
		st.Attempts[0].Outcome != hedgeprobe.AttemptCanceled {
		t.Errorf("stats %+v: want a resume attempt on ollama-b that wins, the stalled primary canceled", st)
	}
	sp := processedAttempt(ctx, t, s, traceID, "ollama-b")
	// Every chunk the committed primary received was delivered: the 20
	// before the stop and the ones in flight.
	if v, ok := sp.Attributes().Get(string(semconv.ResumeDeliveredChunks)); !ok || v.Int() != st.Attempts[0].ContentChunks || v.Int() < 20 {
		t.Errorf("%s = %v, want the primary's %d chunks (≥ 20)", semconv.ResumeDeliveredChunks, v.AsRaw(), st.Attempts[0].ContentChunks)
	}
}

// testOllamaMetrics: the collector received the spans of every call above,
// and its metrics show the stalls and the hedges.
func testOllamaMetrics(ctx context.Context, t *testing.T, s *ollamaSuite, prom *stack.Prometheus) {
	if err := s.tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range s.calls {
		total += n
	}
	calls := semconv.PromName(semconv.MetricCalls, semconv.UnitCall, true)
	waitFor(ctx, t, prom, "sum("+calls+")", float64(total))
	settle(ctx, t, prom, time.Second)
	for outcome, n := range s.calls {
		if got := scalar(ctx, t, prom, `sum(`+calls+`{streamwatch_outcome="`+string(outcome)+`"})`); got != float64(n) {
			t.Errorf("calls{outcome=%s} = %v, the probe saw %d", outcome, got, n)
		}
	}
	hedges := semconv.PromName(semconv.MetricHedges, semconv.UnitAttempt, true)
	if got := scalarOr0(ctx, t, prom, `sum(`+hedges+`{streamwatch_attempt_trigger="stall", streamwatch_attempt_outcome="winner"})`); got != 4 {
		t.Errorf("stall hedges won = %v, want 4 (one per stall-before-commit case)", got)
	}
	stall := semconv.PromName(semconv.MetricStallDuration, semconv.UnitSeconds, false)
	sel := `{streamwatch_route="ollama-a", streamwatch_attempt_outcome="canceled"}`
	if n := scalar(ctx, t, prom, "sum("+stall+"_count"+sel+")"); n != 2 {
		t.Errorf("stall segments on canceled primaries = %v, want 2 (the Buffered cases)", n)
	}
	var want time.Duration
	for _, d := range s.stalls {
		want += d
	}
	if len(s.stalls) > 0 {
		want /= time.Duration(len(s.stalls))
	}
	mean := scalar(ctx, t, prom, "sum("+stall+"_sum"+sel+") / sum("+stall+"_count"+sel+")")
	if math.Abs(mean-want.Seconds()) > stallTolerance.Seconds() {
		t.Errorf("mean stall = %.3f s, the runners were stopped for %s on average", mean, want)
	}
}

// ---- Span helpers. ----

func attemptSpans(t *testing.T, spans []sdktrace.ReadOnlySpan, traceID trace.TraceID) []sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.SpanContext().TraceID() != traceID {
			continue
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == semconv.AttemptIndex {
				out = append(out, sp)
				break
			}
		}
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// processedAttempt waits for the collector to export the attempt span of
// route in trace traceID, with the processor's figures on it.
func processedAttempt(ctx context.Context, t *testing.T, s *ollamaSuite, traceID trace.TraceID, route string) ptrace.Span {
	t.Helper()
	if err := s.tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, sp := range s.traces.all() {
			if trace.TraceID(sp.TraceID()) == traceID && str(sp.Attributes(), semconv.Route) == route {
				if _, derived := sp.Attributes().Get(string(semconv.Derivation)); derived {
					return sp
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no processed %s attempt span of trace %s after 30 s", route, traceID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type stallEvent struct {
	durationMs             float64
	afterChunk, keepalives int64
}

func stallEvents(sp ptrace.Span) []stallEvent {
	var out []stallEvent
	for i := range sp.Events().Len() {
		ev := sp.Events().At(i)
		if ev.Name() != semconv.EventStall {
			continue
		}
		a := ev.Attributes()
		d, _ := a.Get(string(semconv.StallDurationMs))
		after, _ := a.Get(string(semconv.StallAfterChunk))
		ka, _ := a.Get(string(semconv.StallKeepalives))
		out = append(out, stallEvent{durationMs: d.Double(), afterChunk: after.Int(), keepalives: ka.Int()})
	}
	return out
}
