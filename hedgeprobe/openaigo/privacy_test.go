package openaigo_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
)

// The cases below say how an upstream's words reached the span statuses
// before they carried UpstreamError.StatusText; each asserts that the words
// now reach no span.

// Privacy (outside review, case 1 through openaigo): openai-go finds no
// error message in a 422 whose body is FastAPI's {"detail": …}; mapError
// reads the body again (streamend.Undecoded → sse.NewResponseError), whose
// start, with the echoed prompt, becomes the error text on both span
// statuses.
func TestPromptEchoedInErrorBodyNotInSpans(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		in, _ := json.Marshal(req.Messages[0].Content)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"detail":[{"type":"string_too_long","loc":["body","messages",0,"content"],"input":%s}]}`, in)
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 1}, openaigo.Items, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("SECRET-PROMPT my diagnosis is")}}
	s := p.Stream(t.Context(), openaigo.Route("r", client, params, openaigo.RouteOptions{}))
	for s.Next() {
	}
	if s.Err() == nil {
		t.Fatal("want the 422's error")
	}
	_ = s.Close()
	spans := exp.GetSpans()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, sp := range spans {
		texts := []string{sp.Name, sp.Status.Description}
		for _, kv := range sp.Attributes {
			texts = append(texts, kv.Value.Emit())
		}
		for _, ev := range sp.Events {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.Emit())
			}
		}
		for _, x := range texts {
			if strings.Contains(x, "SECRET-PROMPT") {
				t.Errorf("span %q records the prompt: %q", sp.Name, x)
			}
		}
	}
}
