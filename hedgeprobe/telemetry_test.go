package hedgeprobe

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/semconv"
)

// recorded returns a Prober whose spans go, with the SDK's default span
// limits, to an in-memory exporter.
func recorded(t testing.TB, cfg Config, opts ...any) (*Prober[chunk], *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return mustNew(t, cfg, append([]any{WithTracerProvider(tp)}, opts...)...), exp
}

func attrOf(attrs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range attrs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func mustAttr(t *testing.T, s tracetest.SpanStub, k attribute.Key) attribute.Value {
	t.Helper()
	v, ok := attrOf(s.Attributes, k)
	if !ok {
		t.Fatalf("span %q has no %s", s.Name, k)
	}
	return v
}

// spansOf splits the exported spans into the call span and the attempt
// spans in attempt order.
func spansOf(t *testing.T, exp *tracetest.InMemoryExporter) (call tracetest.SpanStub, attempts []tracetest.SpanStub) {
	t.Helper()
	var all []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == semconv.CallSpanName {
			call = s
		} else {
			all = append(all, s)
		}
	}
	attempts = make([]tracetest.SpanStub, len(all))
	for _, s := range all {
		attempts[mustAttr(t, s, semconv.AttemptIndex).AsInt64()] = s
	}
	if call.Name == "" {
		t.Fatal("no call span")
	}
	return call, attempts
}

// A 5,000-chunk stream yields all 5,000 arrivals, in order, on the attempt
// span, equal to the scripted arrival times to the microsecond.
func TestTelemetryLongTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5000
		steps := make([]step, n)
		want := make([]int64, n)
		var at time.Duration
		for i := range steps {
			d := time.Duration(1000+137*(i%11)) * time.Microsecond
			if i == 0 {
				d = 1234567 * time.Microsecond
			}
			at += d
			steps[i] = content(d, "x")
			want[i] = at.Microseconds()
		}
		steps = append(steps, step{after: time.Millisecond, kind: Control, tok: 4999})
		u := newUpstream("a", steps)
		p, exp := recorded(t, Config{MaxAttempts: 1, StallTimeout: time.Minute}, withTokens(tokensOf))
		start := time.Now()
		g := drain(p.Stream(t.Context(), u.route()), start)
		if g.err != nil {
			t.Fatal(g.err)
		}
		call, atts := spansOf(t, exp)
		if len(atts) != 1 {
			t.Fatalf("%d attempt spans", len(atts))
		}
		a := atts[0]
		got := mustAttr(t, a, semconv.ChunkOffsetsUs).AsInt64Slice()
		if len(got) != n {
			t.Fatalf("%d offsets, want %d", len(got), n)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("offset %d = %d µs, want %d", i, got[i], want[i])
			}
		}
		if !a.StartTime.Equal(start) || !call.StartTime.Equal(start) {
			t.Fatalf("span start %v / %v, call start %v", a.StartTime, call.StartTime, start)
		}
		if c := mustAttr(t, a, semconv.ChunkCount).AsInt64(); c != n {
			t.Fatalf("chunk.count = %d", c)
		}
		if k := mustAttr(t, a, semconv.GenAIUsageOutputTokens).AsInt64(); k != 4999 {
			t.Fatalf("output tokens = %d", k)
		}
		if a.SpanKind != trace.SpanKindClient || a.Name != "chat model-a" || call.SpanKind != trace.SpanKindInternal {
			t.Fatalf("kinds %v %v, name %q", a.SpanKind, call.SpanKind, a.Name)
		}
		for k, want := range map[attribute.Key]attribute.Value{
			semconv.GenAIOperationName:    attribute.StringValue("chat"),
			semconv.GenAIProviderName:     attribute.StringValue("prov-a"),
			semconv.GenAIRequestModel:     attribute.StringValue("model-a"),
			semconv.GenAIRequestStream:    attribute.BoolValue(true),
			semconv.Route:                 attribute.StringValue("a"),
			semconv.AttemptTrigger:        attribute.StringValue("primary"),
			semconv.AttemptOutcome:        attribute.StringValue("winner"),
			semconv.AttemptLaunchOffsetMs: attribute.Float64Value(0),
		} {
			if got := mustAttr(t, a, k); got != want {
				t.Errorf("%s = %v, want %v", k, got.String(), want.String())
			}
		}
		if got := mustAttr(t, call, semconv.GenAIResponseTimeToFirstChunk).AsFloat64(); got != 1.234567 {
			t.Errorf("call ttfc = %v", got)
		}
		if call.Status.Code != codes.Unset || a.Status.Code != codes.Unset {
			t.Errorf("status %v %v", call.Status, a.Status)
		}
		if a.DroppedAttributes != 0 || call.DroppedAttributes != 0 {
			t.Errorf("dropped attributes %d %d", a.DroppedAttributes, call.DroppedAttributes)
		}
	})
}

// A hedged call yields a call span and two attempt spans with the right
// outcomes, triggers, launch offsets, parentage and call-span events.
func TestTelemetryHedgedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{keepalive(500 * time.Millisecond), content(2*time.Second, "late")})
		b := newUpstream("b", texts("b", 3, 250*time.Millisecond, 10*time.Millisecond))
		p, exp := recorded(t, Config{HedgeAfter: time.Second})
		start := time.Now()
		s := p.Stream(t.Context(), a.route(), b.route())
		if g := drain(s, start); g.err != nil {
			t.Fatal(g.err)
		}
		call, atts := spansOf(t, exp)
		if len(atts) != 2 {
			t.Fatalf("%d attempt spans", len(atts))
		}
		for i, at := range atts {
			if at.Parent.SpanID() != call.SpanContext.SpanID() || at.SpanContext.TraceID() != call.SpanContext.TraceID() {
				t.Fatalf("attempt %d is not a child of the call span", i)
			}
		}
		check := func(s tracetest.SpanStub, k attribute.Key, want any) {
			t.Helper()
			if got := mustAttr(t, s, k).AsInterface(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s = %v, want %v", s.Name, k, got, want)
			}
		}
		check(atts[0], semconv.AttemptTrigger, "primary")
		check(atts[0], semconv.AttemptOutcome, "canceled")
		check(atts[0], semconv.AttemptLaunchOffsetMs, 0)
		check(atts[0], semconv.ChunkCount, 0)
		check(atts[0], semconv.ChunkOffsetsUs, []int64{})
		check(atts[0], semconv.KeepaliveOffsetsUs, []int64{500000})
		check(atts[1], semconv.AttemptTrigger, "ttft")
		check(atts[1], semconv.AttemptOutcome, "winner")
		check(atts[1], semconv.AttemptLaunchOffsetMs, 1000)
		check(atts[1], semconv.ChunkOffsetsUs, []int64{250000, 260000, 270000})
		// Each attempt's own wait for its first chunk; the caller's is on
		// the call span. An attempt without one has none.
		check(atts[1], semconv.GenAIResponseTimeToFirstChunk, 0.25)
		if v, ok := attrOf(atts[0].Attributes, semconv.GenAIResponseTimeToFirstChunk); ok {
			t.Errorf("the attempt without content has %s = %v", semconv.GenAIResponseTimeToFirstChunk, v.String())
		}
		check(atts[0], semconv.GenAIProviderName, "prov-a")
		check(atts[1], semconv.GenAIRequestModel, "model-b")
		if atts[0].Name != "chat model-a" || atts[1].Name != "chat model-b" {
			t.Errorf("attempt spans named %q, %q", atts[0].Name, atts[1].Name)
		}
		check(call, semconv.Attempts, 2)
		check(call, semconv.WinnerIndex, 1)
		check(call, semconv.WinnerRoute, "b")
		check(call, semconv.GenAIProviderName, "prov-b") // the winner's
		check(call, semconv.Outcome, "ok")
		check(call, semconv.Truncated, false)
		check(call, semconv.HedgesThrottled, 0)
		check(call, semconv.Delivery, "streaming")
		check(call, semconv.GenAIRequestModel, "model-a")
		check(call, semconv.GenAIResponseTimeToFirstChunk, 1.25)
		if atts[0].Status.Code != codes.Unset {
			t.Errorf("a loser has status %v", atts[0].Status)
		}
		// The loser's span ends at commit, the winner's at the end.
		if d := atts[0].EndTime.Sub(start); d != 1250*time.Millisecond {
			t.Errorf("loser ends at %v", d)
		}
		if !atts[1].StartTime.Equal(start.Add(time.Second)) || atts[1].EndTime.Sub(start) != 1270*time.Millisecond {
			t.Errorf("winner %v – %v", atts[1].StartTime.Sub(start), atts[1].EndTime.Sub(start))
		}
		var evs []string
		for _, e := range call.Events {
			evs = append(evs, fmt.Sprintf("%s@%v", e.Name, e.Time.Sub(start)))
		}
		if fmt.Sprint(evs) != "[streamwatch.hedge@1s streamwatch.commit@1.25s streamwatch.attempt.canceled@1.25s]" {
			t.Errorf("call events = %v", evs)
		}
		h := call.Events[0].Attributes
		if v, _ := attrOf(h, semconv.EventDelayMs); v.AsFloat64() != 1000 {
			t.Errorf("hedge event attributes %v", h)
		}
		if v, _ := attrOf(h, semconv.EventTrigger); v.AsString() != "ttft" {
			t.Errorf("hedge event attributes %v", h)
		}
	})
}

// A route without a provider or a model writes neither, and its attempt
// span is named by the operation alone, as the GenAI conventions name a
// span whose model is not known ("chat", not "chat " with a space, and no
// empty-string value that would be a series of its own).
func TestTelemetryRouteWithoutModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newUpstream("a", texts("a", 2, 100*time.Millisecond, 10*time.Millisecond))
		up.model = ""
		r := up.route()
		r.Provider = ""
		p, exp := recorded(t, Config{}, WithOperationName("text_completion"))
		if g := drain(p.Stream(t.Context(), r), time.Now()); g.err != nil {
			t.Fatal(g.err)
		}
		call, atts := spansOf(t, exp)
		if len(atts) != 1 || atts[0].Name != "text_completion" {
			t.Fatalf("attempt spans %d, named %q", len(atts), atts[0].Name)
		}
		for _, s := range []tracetest.SpanStub{call, atts[0]} {
			for _, k := range []attribute.Key{semconv.GenAIRequestModel, semconv.GenAIProviderName} {
				if v, ok := attrOf(s.Attributes, k); ok {
					t.Errorf("span %q has %s = %q", s.Name, k, v.String())
				}
			}
			if v := mustAttr(t, s, semconv.GenAIOperationName); v.AsString() != "text_completion" {
				t.Errorf("span %q has %s = %q", s.Name, semconv.GenAIOperationName, v.String())
			}
		}
		mustAttr(t, atts[0], semconv.Route)
	})
}

// A route's server address and port go on its attempt spans only (the
// call span has no one upstream); a port without an address is not
// written, nor an address that is not set.
func TestTelemetryServer(t *testing.T) {
	for _, c := range []struct {
		name     string
		address  string
		port     int
		wantPort bool
	}{
		{"address and port", "api.example.com", 8443, true},
		{"address alone", "api.example.com", 0, false},
		{"port alone", "", 8443, false},
		{"neither", "", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newUpstream("a", texts("a", 2, 100*time.Millisecond, 10*time.Millisecond))
				r := up.route()
				r.ServerAddress, r.ServerPort = c.address, c.port
				p, exp := recorded(t, Config{})
				if g := drain(p.Stream(t.Context(), r), time.Now()); g.err != nil {
					t.Fatal(g.err)
				}
				call, atts := spansOf(t, exp)
				for _, k := range []attribute.Key{semconv.ServerAddress, semconv.ServerPort} {
					if v, ok := attrOf(call.Attributes, k); ok {
						t.Errorf("call span has %s = %s", k, v.String())
					}
				}
				addr, ok := attrOf(atts[0].Attributes, semconv.ServerAddress)
				if ok != (c.address != "") || addr.AsString() != c.address {
					t.Errorf("server.address = %q (present %v), want %q", addr.AsString(), ok, c.address)
				}
				port, ok := attrOf(atts[0].Attributes, semconv.ServerPort)
				if ok != c.wantPort || (ok && port.AsInt64() != int64(c.port)) {
					t.Errorf("server.port = %s (present %v), want %d (present %v)", port.String(), ok, c.port, c.wantPort)
				}
			})
		})
	}
}

// A stall timeout yields status Error, outcome stall_timeout and
// truncated=true, and a watchdog event.
func TestTelemetryStallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := newUpstream("a", append(texts("a", 2, time.Second, time.Second), hang()))
		p, exp := recorded(t, Config{MaxAttempts: 1, StallTimeout: 5 * time.Second})
		start := time.Now()
		if g := drain(p.Stream(t.Context(), u.route()), start); !errors.Is(g.err, ErrStallTimeout) {
			t.Fatalf("err = %v", g.err)
		}
		call, atts := spansOf(t, exp)
		if call.Status.Code != codes.Error || atts[0].Status.Code != codes.Error {
			t.Fatalf("status %v %v", call.Status, atts[0].Status)
		}
		if o := mustAttr(t, call, semconv.Outcome).AsString(); o != "stall_timeout" {
			t.Fatalf("outcome %q", o)
		}
		if !mustAttr(t, call, semconv.Truncated).AsBool() {
			t.Fatal("not truncated")
		}
		if e := mustAttr(t, call, semconv.ErrorType).AsString(); e != "stall_timeout" {
			t.Fatalf("error.type %q", e)
		}
		if o := mustAttr(t, atts[0], semconv.AttemptOutcome).AsString(); o != "failed" {
			t.Fatalf("attempt outcome %q", o)
		}
		if e := mustAttr(t, atts[0], semconv.ErrorType).AsString(); e != "stall_timeout" {
			t.Fatalf("attempt error.type %q", e)
		}
		if len(call.Events) != 2 || call.Events[0].Name != semconv.EventCommit || call.Events[1].Name != semconv.EventWatchdog || call.Events[1].Time.Sub(start) != 7*time.Second {
			t.Fatalf("events %+v", call.Events)
		}
		if v, _ := attrOf(call.Events[1].Attributes, semconv.EventWatchdogKind); v.AsString() != "stall" {
			t.Fatalf("watchdog kind %v", v)
		}
		if d := call.EndTime.Sub(start); d != 7*time.Second {
			t.Fatalf("call span ends at %v", d)
		}
	})
}

// Throttled hedges, caller cancel and the per-chunk event form.
func TestTelemetryThrottleCancelEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{keepalive(100 * time.Millisecond), keepalive(100 * time.Millisecond), keepalive(100 * time.Millisecond), content(2*time.Second, "x"), content(time.Second, "y")})
		p, exp := recorded(t, Config{HedgeAfter: time.Second, HedgeBurst: 1}, WithChunkEvents(true), WithKeepaliveOffsets(2),
			WithOperationName("text_completion"), withModel(func(c chunk) (string, bool) { return "served-" + c.Route, c.Kind == Content }))
		p.budget.tokens = 0 // the call's own refill (0.3) buys no hedge
		start := time.Now()
		s := p.Stream(t.Context(), a.route())
		if !s.Next() {
			t.Fatal(s.Err())
		}
		s.Close()
		call, atts := spansOf(t, exp)
		if o := mustAttr(t, call, semconv.Outcome).AsString(); o != "canceled" || call.Status.Code != codes.Error {
			t.Fatalf("outcome %q status %v", o, call.Status)
		}
		if n := mustAttr(t, call, semconv.HedgesThrottled).AsInt64(); n != 1 {
			t.Fatalf("throttled %d", n)
		}
		var names []string
		for _, e := range call.Events {
			names = append(names, e.Name)
		}
		if fmt.Sprint(names) != "[streamwatch.hedge.throttled streamwatch.commit]" {
			t.Fatalf("events %v", names)
		}
		at := atts[0]
		if at.Name != "text_completion model-a" || mustAttr(t, at, semconv.GenAIResponseModel).AsString() != "served-a" {
			t.Fatalf("name %q", at.Name)
		}
		if ka := mustAttr(t, at, semconv.KeepaliveOffsetsUs).AsInt64Slice(); fmt.Sprint(ka) != "[100000 200000]" {
			t.Fatalf("keepalives %v", ka)
		}
		if d := mustAttr(t, at, semconv.KeepalivesDropped).AsInt64(); d != 1 {
			t.Fatalf("dropped %d", d)
		}
		var evs []string
		for _, e := range at.Events {
			evs = append(evs, fmt.Sprintf("%s@%v", e.Name, e.Time.Sub(start)))
		}
		if fmt.Sprint(evs) != "[streamwatch.keepalive@100ms streamwatch.keepalive@200ms streamwatch.keepalive@300ms streamwatch.chunk@2.3s]" {
			t.Fatalf("attempt events %v", evs)
		}
		if o := mustAttr(t, at, semconv.AttemptOutcome).AsString(); o != "canceled" || at.Status.Code != codes.Unset {
			t.Fatalf("attempt %q %v", o, at.Status)
		}
	})
}

// No prompt or completion text reaches a span.
func TestTelemetryNoText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const secret = "SECRET-COMPLETION"
		a := newUpstream("a", []step{content(2*time.Second, secret), control(0, secret), fail(time.Millisecond, errors.New("upstream failed"))})
		b := newUpstream("b", []step{content(100*time.Millisecond, secret), keepalive(0)})
		p, exp := recorded(t, Config{HedgeAfter: time.Second}, WithChunkEvents(true))
		drain(p.Stream(t.Context(), a.route(), b.route()), time.Now())
		for _, s := range exp.GetSpans() {
			all := fmt.Sprint(s.Name, s.Attributes, s.Events, s.Status)
			if strings.Contains(all, secret) {
				t.Fatalf("span %q holds completion text: %s", s.Name, all)
			}
		}
	})
}

// When the call span is not recording, nothing is recorded and nothing
// allocated per chunk; hedging and the watchdog still work.
func TestTelemetryNotRecording(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(t.Context())
	p := mustNew(t, Config{MaxAttempts: 1, StallTimeout: time.Minute}, WithTracerProvider(tp), WithChunkEvents(true))
	s := p.Stream(t.Context(), endlessRoute())
	defer s.Close()
	if !s.Next() {
		t.Fatal(s.Err())
	}
	if s.rec != nil || s.race.winner.rec != nil {
		t.Fatal("recorder on a non-recording call")
	}
	if n := testing.AllocsPerRun(10000, func() { s.Next() }); n != 0 {
		t.Fatalf("%v allocations per chunk", n)
	}
	s.Close()
	if len(exp.GetSpans()) != 0 {
		t.Fatal("spans exported")
	}
	synctest.Test(t, func(t *testing.T) {
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", texts("b", 1, time.Millisecond, 0))
		p := mustNew(t, Config{HedgeAfter: time.Second}, WithTracerProvider(tp))
		st := p.Stream(t.Context(), a.route(), b.route())
		drain(st, time.Now())
		if st.Stats().Winner != 1 {
			t.Fatal("hedging off without a recording span")
		}
	})
}

// With a recording span the committed hot path allocates only the
// timeline's amortized growth: no allocation on most chunks.
func TestTelemetryRecordingAllocs(t *testing.T) {
	p, _ := recorded(t, Config{MaxAttempts: 1, StallTimeout: time.Minute})
	s := p.Stream(t.Context(), endlessRoute())
	defer s.Close()
	s.Next()
	if n := testing.AllocsPerRun(4096, func() { s.Next() }); n > 0.01 {
		t.Fatalf("%v allocations per chunk", n)
	}
}

// Regression: Items.OutputTokens was asked about Control items only, so a
// server that puts usage on its content chunks (the last one, or every one
// as vLLM's continuous usage stats do) left the attempt span without
// gen_ai.usage.output_tokens, and the collector without TPOT. Now every
// Content and Control item is asked, the last count winning, on both
// paths an item takes: through the race (Buffered: all of it) and straight
// to the caller after commit (Streaming).
func TestRegressionTokensOnContentChunks(t *testing.T) {
	for _, d := range []Delivery{Streaming, Buffered} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := newUpstream("a", []step{
					{after: 10 * time.Millisecond, kind: Content, text: "a", tok: 3},
					{after: 10 * time.Millisecond, kind: Content, text: "b", tok: 2},
				})
				p, exp := recorded(t, Config{Delivery: d, MaxAttempts: 1}, withTokens(tokensOf))
				if g := drain(p.Stream(t.Context(), u.route()), time.Now()); g.err != nil {
					t.Fatal(g.err)
				}
				_, atts := spansOf(t, exp)
				if k := mustAttr(t, atts[0], semconv.GenAIUsageOutputTokens).AsInt64(); k != 2 {
					t.Fatalf("output tokens = %d, want the last count, 2", k)
				}
			})
		})
	}
}

// A panic in Items.OutputTokens on a content item fails the call before
// the item counts: the caller never gets it, so it is not delivered.
func TestTokenPanicOnContentIsNotDelivered(t *testing.T) {
	for _, d := range []Delivery{Streaming, Buffered} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := newUpstream("a", []step{
					content(10*time.Millisecond, "a"),
					{after: 10 * time.Millisecond, kind: Content, text: "b", tok: 7},
				})
				panicky := func(c chunk) (int64, bool) {
					if c.Tokens == 7 {
						panic("bad usage")
					}
					return 0, false
				}
				p := mustNew(t, Config{Delivery: d, MaxAttempts: 1}, withTokens(panicky))
				s := p.Stream(t.Context(), u.route())
				g := drain(s, time.Now())
				if !errors.Is(g.err, ErrExtractorPanic) {
					t.Fatalf("err %v, want ErrExtractorPanic", g.err)
				}
				st := s.Stats()
				if len(st.Attempts) != 1 || st.Attempts[0].ChunksDelivered > 1 || joined(g) == "ab" {
					t.Fatalf("caller read %q; attempt %+v", joined(g), st.Attempts)
				}
			})
		})
	}
}

// withResponse reads test chunks as an upstream's response description:
// a control "id:X" carries the response id, "in:N" the input tokens,
// "finish:C:R" choice C's finish reason (content may carry one too,
// "text|finish:C:R"). None of them is asked about a keepalive: each
// panics on one.
func withResponse() itemsOpt {
	field := func(c chunk, prefix string) (string, bool) {
		if c.Kind == Keepalive {
			panic("asked about a keepalive")
		}
		_, v, ok := strings.Cut(c.Text, prefix)
		return v, ok
	}
	return func(i *Items[chunk]) {
		i.ResponseID = func(c chunk) (string, bool) {
			if c.Kind == Keepalive {
				return "", false // asked, as ResponseModel is, until known
			}
			return field(c, "id:")
		}
		i.InputTokens = func(c chunk) (int64, bool) {
			v, ok := field(c, "in:")
			n, err := strconv.ParseInt(v, 10, 64)
			return n, ok && err == nil
		}
		i.FinishReasons = func(c chunk, finished func(int, string)) {
			if v, ok := field(c, "finish:"); ok {
				choice, reason, _ := strings.Cut(v, ":")
				n, _ := strconv.Atoi(choice)
				finished(n, reason)
			}
		}
	}
}

// The attempt span carries what the upstream says of its response:
// gen_ai.response.id (the first reported), gen_ai.usage.input_tokens
// (the last), gen_ai.response.finish_reasons (one per choice that ended,
// in choice order, the last reason of each; choices 0–127; made UTF-8);
// none of it on an attempt that reported none. On both paths an item
// takes: the race's (Buffered: every item) and the committed stream's
// (Streaming: the items after commit).
func TestTelemetryResponseDescription(t *testing.T) {
	for _, d := range []Delivery{Streaming, Buffered} {
		t.Run(d.String(), func(t *testing.T) { responseDescription(t, d) })
	}
}

func responseDescription(t *testing.T, d Delivery) {
	synctest.Test(t, func(t *testing.T) {
		steps := []step{control(100*time.Millisecond, "id:resp-1"), keepalive(10 * time.Millisecond),
			content(10*time.Millisecond, "a"), control(0, "id:resp-2"), control(0, "in:40"),
			content(10*time.Millisecond, "b|finish:2:length"), keepalive(10 * time.Millisecond)}
		for range 200 { // an upstream that repeats its reason
			steps = append(steps, control(0, "finish:0:stop\xff"))
		}
		steps = append(steps, control(0, "in:42"), control(0, "finish:128:beyond"), control(0, "finish:-1:before"),
			control(0, "finish:2:content_filter"))
		a := newUpstream("a", []step{hang()})
		b := newUpstream("b", steps)
		p, exp := recorded(t, Config{HedgeAfter: time.Second, Delivery: d}, withResponse())
		if g := drain(p.Stream(t.Context(), a.route(), b.route()), time.Now()); g.err != nil {
			t.Fatal(g.err)
		}
		_, atts := spansOf(t, exp)
		if len(atts) != 2 {
			t.Fatalf("%d attempt spans", len(atts))
		}
		for _, k := range []attribute.Key{semconv.GenAIResponseID, semconv.GenAIUsageInputTokens, semconv.GenAIResponseFinishReasons} {
			if v, ok := attrOf(atts[0].Attributes, k); ok {
				t.Errorf("the silent attempt has %s = %s", k, v.String())
			}
		}
		w := atts[1]
		if v := mustAttr(t, w, semconv.GenAIResponseID).AsString(); v != "resp-1" {
			t.Errorf("response id %q", v)
		}
		if v := mustAttr(t, w, semconv.GenAIUsageInputTokens).AsInt64(); v != 42 {
			t.Errorf("input tokens %d", v)
		}
		// Choice 1 never ended; 2's last reason wins; 128 and -1 are
		// no choice OpenAI can have.
		if rs := mustAttr(t, w, semconv.GenAIResponseFinishReasons).AsStringSlice(); !slices.Equal(rs, []string{"stop\uFFFD", "content_filter"}) {
			t.Errorf("finish reasons %q", rs)
		}
	})
}

// A panic in any of them fails the call with ErrExtractorPanic, naming
// the function.
func TestResponseDescriptionPanics(t *testing.T) {
	for _, c := range []struct {
		name, asking string
		set          func(*Items[chunk])
	}{
		{"id", "response id", func(i *Items[chunk]) { i.ResponseID = func(chunk) (string, bool) { panic("x") } }},
		{"input", "input tokens", func(i *Items[chunk]) { i.InputTokens = func(chunk) (int64, bool) { panic("x") } }},
		{"finish", "finish reasons", func(i *Items[chunk]) { i.FinishReasons = func(chunk, func(int, string)) { panic("x") } }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newUpstream("a", texts("a", 2, time.Second, time.Second))
				p, _ := recorded(t, Config{MaxAttempts: 1}, itemsOpt(c.set))
				g := drain(p.Stream(t.Context(), a.route()), time.Now())
				if !errors.Is(g.err, ErrExtractorPanic) || !strings.Contains(g.err.Error(), c.asking+": x") {
					t.Fatalf("err %v", g.err)
				}
			})
		})
	}
}

// A panic in an Items function fails the call before its item reaches the
// span's timeline: the timeline and streamwatch.chunk.count agree, on the
// race's path (Buffered) and the committed stream's (Streaming). (The
// item was put on the timeline first, so it held one offset more than the
// count.)
func TestItemsPanicKeepsTimelineAndCount(t *testing.T) {
	panicOnB := func(c chunk) {
		if c.Text == "b" {
			panic("x")
		}
	}
	for _, c := range []struct {
		name string
		set  func(*Items[chunk])
	}{
		{"finish reasons", func(i *Items[chunk]) { i.FinishReasons = func(c chunk, _ func(int, string)) { panicOnB(c) } }},
		{"output tokens", func(i *Items[chunk]) { i.OutputTokens = func(c chunk) (int64, bool) { panicOnB(c); return 0, false } }},
	} {
		for _, d := range []Delivery{Streaming, Buffered} {
			t.Run(c.name+"/"+d.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					u := newUpstream("a", []step{content(10*time.Millisecond, "a"), content(10*time.Millisecond, "b")})
					p, exp := recorded(t, Config{Delivery: d, MaxAttempts: 1}, itemsOpt(c.set))
					if g := drain(p.Stream(t.Context(), u.route()), time.Now()); !errors.Is(g.err, ErrExtractorPanic) {
						t.Fatalf("err %v", g.err)
					}
					_, atts := spansOf(t, exp)
					n := mustAttr(t, atts[0], semconv.ChunkCount).AsInt64()
					if offs := mustAttr(t, atts[0], semconv.ChunkOffsetsUs).AsInt64Slice(); n != 1 || len(offs) != 1 {
						t.Errorf("chunk.count %d, offsets %v", n, offs)
					}
				})
			})
		}
	}
}

// TestStatusTextCapped: an error's text goes into the spans' statuses cut
// at 4 KiB, between characters, and valid UTF-8: an upstream's error
// payload can carry a message as long as an event.
func TestStatusTextCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		long := errors.New(strings.Repeat("é", 4<<10) + "\xff")
		a := newUpstream("a", []step{fail(time.Second, long)})
		p, exp := recorded(t, Config{MaxAttempts: 1})
		s := p.Stream(t.Context(), a.route())
		for s.Next() {
		}
		s.Close()
		call, atts := spansOf(t, exp)
		for _, sp := range append(atts, call) {
			d := sp.Status.Description
			if !utf8.ValidString(d) || len(d) > maxStatusText+len("…") || !strings.HasPrefix(d, "éé") || !strings.HasSuffix(d, "é…") {
				t.Fatalf("%s: status %d bytes, %q…", sp.Name, len(d), d[:min(len(d), 20)])
			}
		}
	})
}
