// Package adaptertest is the scaffolding the end-to-end tests of the SDK
// adapters (hedgeprobe/openaigo, hedgeprobe/goopenai,
// hedgeprobe/anthropicgo) share: fakellm on 127.0.0.1 in real time at a
// time scale, an HTTP client for the SDK, a Prober of the adapter, and the
// checks of the scenarios every adapter runs. The SDK's usual loop stays
// in each adapter's test; that loop is what those tests are about.
package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm/fakellmtest"
	"github.com/streamwatch/streamwatch/semconv"
)

// Scale runs fakellm 100× faster: a 300 ms first chunk comes after 3 ms.
const Scale = 0.01

// SilenceFactor lengthens every scripted silence of the built-in profiles
// for these tests: at Scale the "stall" profile's 30 s silence lasts 3 s,
// not 300 ms. These tests run in real time over HTTP, and each ends a
// silence early (a watchdog, a hedge, a resume) and checks which attempt
// did it; the stalled stream's recovery must not come first on a loaded
// machine, where a scheduler pause of a few hundred milliseconds under
// -race is not rare. It costs no time: no test waits a silence out.
const SilenceFactor = 10

// Upstream is fakellm serving the built-in profiles, their silences
// lengthened, for one test.
type Upstream struct {
	server *httptest.Server
}

// Start serves fakellm at Scale, its silences SilenceFactor times as
// long, until the test ends.
func Start(t testing.TB) *Upstream {
	t.Helper()
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cfg.Profiles {
		for i := range p.Silences {
			d := &p.Silences[i].Duration
			d.Fixed, d.Median, d.Max = SilenceFactor*d.Fixed, SilenceFactor*d.Median, SilenceFactor*d.Max
		}
	}
	return &Upstream{server: fakellmtest.StartConfig(t, cfg, Scale)}
}

// URL is the server root, for a profile picked per request with the
// X-Fakellm-Profile header.
func (u *Upstream) URL() string { return u.server.URL }

// ProfileURL is the root URL of one fakellm profile; an OpenAI client
// appends "/v1", an Anthropic client uses it as it is.
func (u *Upstream) ProfileURL(profile string) string {
	return u.server.URL + "/p/" + profile
}

// ClientOptions configures HTTPClient.
type ClientOptions struct {
	// Tap puts an sse.Tap in front of the transport, so that the
	// adapter's TapKeepalives sees the keepalives the SDK drops.
	Tap bool
}

// HTTPClient is the HTTP client an SDK client of the tests is built on:
// an sse.NewTransport, optionally behind an sse.Tap, whose idle
// connections are closed when the test ends.
func HTTPClient(t testing.TB, o ClientOptions) *http.Client {
	tr := sse.NewTransport(sse.TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if o.Tap {
		rt = &sse.Tap{Base: tr}
	}
	return &http.Client{Transport: rt}
}

// Adapter is what the tests need of an SDK adapter to build a Prober.
type Adapter[T any] struct {
	// Items is the adapter's hedgeprobe.Items (openaigo.Items, …).
	Items hedgeprobe.Items[T]
}

// NewProber returns a Prober of cfg with the adapter's Items; a config
// error fails the test.
func (a Adapter[T]) NewProber(t testing.TB, cfg hedgeprobe.Config) *hedgeprobe.Prober[T] {
	t.Helper()
	p, err := hedgeprobe.New(cfg, a.Items)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// StallToSteadyConfig is the configuration of the stall → steady hedge
// scenario: the "stall" profile's primary goes silent after chunk 5;
// holding 10 chunks before commit, the stall trigger (30 ms of silence)
// hedges to the "steady" route long before the TTFT trigger could.
var StallToSteadyConfig = hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second, MaxAttempts: 2}

// StallToSteady is what a stall → steady call produced.
type StallToSteady struct {
	// Stats are the stream's Stats after the loop.
	Stats hedgeprobe.Stats
	// Text is the content the caller's loop read.
	Text string
}

// Check fails the test unless the steady route won with all its 40
// chunks, launched by the stall trigger while the primary was silent, the
// primary was cancelled, and text came through. It asserts no wall-clock
// duration: on a loaded machine that would be a flaky timed test, and the
// trigger and outcome already prove the hedge cut the silence short.
func (r StallToSteady) Check(t testing.TB) {
	t.Helper()
	st := r.Stats
	if st.WinnerRoute != "steady" || st.ChunksDelivered != 40 || len(st.Attempts) != 2 || r.Text == "" {
		t.Fatalf("stats %+v, text %q", st, r.Text)
	}
	if a := st.Attempts; a[1].Trigger != hedgeprobe.TriggerStall || a[0].Outcome != hedgeprobe.AttemptCanceled {
		t.Fatalf("attempts %+v", a)
	}
}

// TapKeepalivesConfig is the configuration of the tapped-keepalives
// scenario: one attempt on the "stall" profile, whose 3 s silence after
// chunk 5 carries a keepalive every 10 ms, and a 500 ms stall timeout.
var TapKeepalivesConfig = hedgeprobe.Config{MaxAttempts: 1, StallTimeout: 500 * time.Millisecond}

// TapKeepalives is what a tapped-keepalives call produced.
type TapKeepalives struct {
	// Err is the stream's error.
	Err error
	// Keepalives counts the items the adapter classified Keepalive.
	Keepalives int
}

// Check fails the test unless the call ended with a stall timeout after 5
// chunks — the keepalives did not reset the watchdog — and several
// keepalives came through the tap.
func (r TapKeepalives) Check(t testing.TB) {
	t.Helper()
	var te *hedgeprobe.TimeoutError
	if !errors.As(r.Err, &te) || te.Kind != hedgeprobe.TimeoutStall || te.ChunksDelivered != 5 {
		t.Fatalf("err %v", r.Err)
	}
	if r.Keepalives < 3 {
		t.Fatalf("%d keepalives through the tap", r.Keepalives)
	}
}

// CheckTapKeepalives runs the tapped-keepalives scenario on route, which
// must open the "stall" profile with the adapter's TapKeepalives on: it
// streams with TapKeepalivesConfig, counts the items the adapter
// classifies Keepalive, and checks TapKeepalives.
func (a Adapter[T]) CheckTapKeepalives(t testing.TB, route hedgeprobe.Route[T]) {
	t.Helper()
	stream := a.NewProber(t, TapKeepalivesConfig).Stream(t.Context(), route)
	defer stream.Close()
	keepalives := 0
	for stream.Next() {
		if a.Items.Classify(stream.Current()) == hedgeprobe.Keepalive {
			keepalives++
		}
	}
	TapKeepalives{Err: stream.Err(), Keepalives: keepalives}.Check(t)
}

// ErrorCase is a fakellm profile whose call fails, and the check of the
// error it fails with.
type ErrorCase struct {
	// Profile is the fakellm profile.
	Profile string
	// Check fails the test unless err is the error Profile must give.
	Check func(t testing.TB, err error)
}

// CommonErrorCases are the failures every adapter types alike: a 400 is
// not transient, a body cut after chunk 3 is a transient
// *sse.ConnectionError of a connected stream, and a body that ends cleanly
// without the terminal event is io.ErrUnexpectedEOF, never success.
var CommonErrorCases = []ErrorCase{
	{Profile: "bad-request", Check: func(t testing.TB, err error) {
		if err == nil || hedgeprobe.IsTransient(err) {
			t.Fatalf("400 nil or transient: %v", err)
		}
	}},
	{Profile: "disconnect", Check: func(t testing.TB, err error) {
		var ce *sse.ConnectionError
		if !errors.As(err, &ce) || !ce.Connected || !hedgeprobe.IsTransient(err) {
			t.Fatalf("err %v", err)
		}
	}},
	{Profile: "disconnect-clean", Check: func(t testing.TB, err error) {
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err %v: a clean end without the terminal event passed as success", err)
		}
	}},
}

// ClassifyCase is an item as JSON and the Kind the adapter must give it.
type ClassifyCase struct {
	// Name names the subtest.
	Name string
	// JSON is the item as the upstream sends it; empty for the zero item
	// (what TapKeepalives yields).
	JSON string
	// Want is the item's Kind.
	Want hedgeprobe.Kind
}

// ChatClassifyCases are the OpenAI-compatible chunks every OpenAI adapter
// classifies alike (the rule of internal/classify); an adapter adds the
// cases of the fields only its SDK reads.
var ChatClassifyCases = []ClassifyCase{
	{Name: "tapped keepalive (zero chunk)", JSON: ``, Want: hedgeprobe.Keepalive},
	{Name: "role only", JSON: `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, Want: hedgeprobe.Control},
	{Name: "finish only", JSON: `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, Want: hedgeprobe.Control},
	{Name: "usage only", JSON: `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}}`, Want: hedgeprobe.Control},
	{Name: "empty delta", JSON: `{"choices":[{"index":0,"delta":{}}]}`, Want: hedgeprobe.Keepalive},
	{Name: "content", JSON: `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, Want: hedgeprobe.Content},
	{Name: "content in second choice", JSON: `{"choices":[{"index":0,"delta":{"role":"assistant"}},{"index":1,"delta":{"content":"x"}}]}`, Want: hedgeprobe.Content},
	{Name: "reasoning_content", JSON: `{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`, Want: hedgeprobe.Content},
	{Name: "refusal", JSON: `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, Want: hedgeprobe.Content},
	{Name: "tool call name", JSON: `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f"}}]}}]}`, Want: hedgeprobe.Content},
	{Name: "tool call arguments", JSON: `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`, Want: hedgeprobe.Content},
	{Name: "tool call id only", JSON: `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{}}]}}]}`, Want: hedgeprobe.Control},
	{Name: "function call name", JSON: `{"choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}`, Want: hedgeprobe.Content},
	{Name: "function call arguments", JSON: `{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{}"}}}]}`, Want: hedgeprobe.Content},
}

// CheckClassify runs a subtest per case: it decodes the case's JSON into
// the adapter's item type with encoding/json, as the SDKs do, and checks
// the adapter's Classify.
func (a Adapter[T]) CheckClassify(t *testing.T, cases []ClassifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var v T
			if tc.JSON != "" {
				if err := json.Unmarshal([]byte(tc.JSON), &v); err != nil {
					t.Fatal(err)
				}
			}
			if got := a.Items.Classify(v); got != tc.Want {
				t.Fatalf("Classify = %s, want %s", got, tc.Want)
			}
		})
	}
}

// RateLimitCase is the case of the "ratelimit" profile: a transient 429
// *sse.UpstreamError with the Retry-After the SDK passed on (0 for an SDK
// that drops response headers), which unwraps to the SDK's error type E.
func RateLimitCase[E error](retryAfter time.Duration) ErrorCase {
	return ErrorCase{Profile: "ratelimit", Check: func(t testing.TB, err error) {
		var ue *sse.UpstreamError
		var sdkErr E
		if !errors.As(err, &ue) || ue.StatusCode != 429 || ue.RetryAfter() != retryAfter || !ue.Transient() || !errors.As(err, &sdkErr) {
			t.Fatalf("err %v", err)
		}
	}}
}

// MidStreamErrorCase is the case of the "error-mid" profile: a transient
// *sse.UpstreamError from an error payload inside the stream, of the
// payload's type typ.
func MidStreamErrorCase(typ string) ErrorCase {
	return ErrorCase{Profile: "error-mid", Check: func(t testing.TB, err error) {
		var ue *sse.UpstreamError
		if !errors.As(err, &ue) || !ue.MidStream || ue.Type != typ || !ue.Transient() {
			t.Fatalf("err %v", err)
		}
	}}
}

// CheckResponseOnSpan runs one call on route (fakellm's "steady" profile)
// through the SDK and checks the attempt span describes the response as
// fakellm sent it: its id (which starts with idPrefix), 10 input tokens,
// the output tokens and the one finish reason.
func (a Adapter[T]) CheckResponseOnSpan(t testing.TB, route hedgeprobe.Route[T], idPrefix, finish string) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)) // spans exported as they end
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, err := hedgeprobe.New(hedgeprobe.Config{MaxAttempts: 1}, a.Items, hedgeprobe.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stream(t.Context(), route)
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	var attempt *tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		if sp.SpanKind == trace.SpanKindClient {
			attempt = &sp
		}
	}
	if attempt == nil {
		t.Fatal("no attempt span")
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range attempt.Attributes {
		got[kv.Key] = kv.Value
	}
	if id := got[semconv.GenAIResponseID].AsString(); !strings.HasPrefix(id, idPrefix) {
		t.Errorf("%s = %q, want a %q id", semconv.GenAIResponseID, id, idPrefix)
	}
	if n, ok := got[semconv.GenAIUsageInputTokens]; !ok || n.AsInt64() != 10 {
		t.Errorf("%s = %v, want 10", semconv.GenAIUsageInputTokens, n.String())
	}
	if _, ok := got[semconv.GenAIUsageOutputTokens]; !ok {
		t.Errorf("no %s", semconv.GenAIUsageOutputTokens)
	}
	if rs := got[semconv.GenAIResponseFinishReasons].AsStringSlice(); len(rs) != 1 || rs[0] != finish {
		t.Errorf("%s = %q, want [%s]", semconv.GenAIResponseFinishReasons, rs, finish)
	}
}
