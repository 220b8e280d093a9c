// Package workload is the scripted traffic of `make demo` and the
// end-to-end suite: calls through hedgeprobe, over the raw-SSE OpenAI route,
// against fakellm profiles whose timing is known, so every figure the
// collector reports can be checked against the script.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Model is the model every call asks for.
const Model = "gpt-fake"

// ProfileHeader selects a fakellm timing profile per request.
const ProfileHeader = "X-Fakellm-Profile"

// Scenario is a group of identical calls.
type Scenario struct {
	// Name says what the scenario shows.
	Name string
	// Routes are fakellm profile names, primary first; each becomes a route
	// named "fakellm-<profile>".
	Routes []string
	// Config is the hedgeprobe policy of the scenario's Prober.
	Config hedgeprobe.Config
	// Calls is how many calls run, all at once.
	Calls int
	// Continue makes every route resumable, continuing a partial answer
	// the way fakellm's default profiles do (a trailing assistant message).
	Continue bool
}

// budget lets every scenario hedge: the demo is about showing hedges, not
// about the production default of 0.3 hedges per call.
func budget(c hedgeprobe.Config) hedgeprobe.Config {
	c.HedgeBudget, c.HedgeBurst = 1, 50
	return c
}

// Scenarios is the demo workload. Profile timings are in
// fakellm's built-in profiles: "steady" streams 40 chunks 25 ms apart
// after ~300 ms; "stall" falls silent for 30 s (with keepalives) after
// chunk 5, and its continuation streams the rest of the script;
// "slow-first" waits 8 s for its first chunk; "server-error"
// answers 503.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "steady stream, no hedge", Routes: []string{"steady", "steady"}, Calls: 6,
			Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second})},
		{Name: "stall after commit (measured, not hedged)", Routes: []string{"stall", "steady"}, Calls: 3,
			Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second})},
		{Name: "stall after commit, resumed on the other route", Routes: []string{"stall", "steady"}, Calls: 3,
			Continue: true, Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second, ResumeAfter: 2 * time.Second})},
		{Name: "stall before commit, Streaming + HoldChunks", Routes: []string{"stall", "steady"}, Calls: 3,
			Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second, StallAfter: 2 * time.Second, HoldChunks: 10})},
		{Name: "stall before commit, Buffered", Routes: []string{"stall", "steady"}, Calls: 3,
			Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second, StallAfter: 2 * time.Second, Delivery: hedgeprobe.Buffered})},
		{Name: "late first chunk (TTFT hedge)", Routes: []string{"slow-first", "steady"}, Calls: 3,
			Config: budget(hedgeprobe.Config{HedgeAfter: time.Second})},
		// One token and next to no refill: the first of the two calls to
		// want a hedge takes the token, the other's is refused and it
		// waits out the slow first chunk (a throttled hedge, counted).
		{Name: "late first chunk, hedge budget spent", Routes: []string{"slow-first", "steady"}, Calls: 2,
			Config: hedgeprobe.Config{HedgeAfter: time.Second, HedgeBudget: 0.01, HedgeBurst: 1}},
		{Name: "route down (503, Retry-After): hedged, ejected", Routes: []string{"server-error", "steady"}, Calls: 4,
			Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second})},
		{Name: "same outage, another Prober: hedged, ejected", Routes: []string{"server-error", "steady"}, Calls: 2,
			Config: budget(hedgeprobe.Config{HedgeAfter: 5 * time.Second})},
		{Name: "stall watchdog (no hedge possible)", Routes: []string{"stall"}, Calls: 2,
			Config: budget(hedgeprobe.Config{StallTimeout: 10 * time.Second, MaxAttempts: 1})},
	}
}

// Options configure Run.
type Options struct {
	// BaseURL is fakellm's API root, such as "http://127.0.0.1:8089/v1".
	BaseURL string
	// TracerProvider receives the probe's spans.
	TracerProvider trace.TracerProvider
	// Scenarios to run; default Scenarios().
	Scenarios []Scenario
}

// Result is what the probe itself saw of one scenario.
type Result struct {
	Scenario string
	Calls    int
	// Outcomes counts calls per streamwatch.outcome.
	Outcomes map[hedgeprobe.Outcome]int
	// Hedges counts launched hedges per trigger; HedgeWins those that won.
	Hedges, HedgeWins map[hedgeprobe.Trigger]int
	// Truncated counts calls that failed after delivering content.
	Truncated int
	// ChunksDelivered sums content chunks the callers received.
	ChunksDelivered int64
	// TTFTs holds, per call that delivered content, the time the caller
	// waited for its first content chunk (Stats.TimeToFirstChunk): exact
	// figures, where the collector's histogram only has buckets.
	TTFTs []time.Duration
	// Streams counts attempts that received at least one content chunk:
	// what the connector's streamwatch.streams counts.
	Streams int
	// WastedChunks sums the content chunks attempts received and the
	// callers never got (ContentChunks − ChunksDelivered): the wasted
	// chunks of the dashboard and the demo.
	WastedChunks int64
	// Errors holds one example error text per outcome other than ok.
	Errors map[hedgeprobe.Outcome]string
	// Ejections counts the route ejections the scenario's Prober reported
	// (OnEject).
	Ejections int
	// Throttled sums the calls' Stats.HedgesThrottled: every time the
	// budget or pushback refused a hedge or resume, a refusal repeated
	// while the call waited counted again. ThrottledCalls counts the calls
	// with at least one.
	Throttled, ThrottledCalls int
}

// Run runs every scenario concurrently and returns one Result each, in
// scenario order. It fails only when the workload could not be set up; a
// call that fails is a figure, not an error.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.BaseURL == "" {
		return nil, errors.New("workload: BaseURL is required")
	}
	scenarios := o.Scenarios
	if scenarios == nil {
		scenarios = Scenarios()
	}
	// Lanes, as an application should use: no two attempts of a call
	// share a connection. To fakellm's http:// URL, as here, every
	// request takes its first transport, as over one.
	client := &http.Client{Transport: &sse.Lanes{}}
	results := make([]Result, len(scenarios))
	ejections := make([]atomic.Int64, len(scenarios))
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		ej := &ejections[i]
		p, err := hedgeprobe.New(sc.Config, sse.OpenAIItems,
			hedgeprobe.WithTracerProvider(o.TracerProvider),
			hedgeprobe.OnEject(func(hedgeprobe.RouteEvent) { ej.Add(1) }))
		if err != nil {
			return nil, fmt.Errorf("workload: scenario %q: %w", sc.Name, err)
		}
		routes := make([]hedgeprobe.Route[sse.ChatChunk], len(sc.Routes))
		cont := sse.ContinueNone
		if sc.Continue {
			cont = sse.ContinueTrailingAssistant
		}
		for j, profile := range sc.Routes {
			routes[j] = sse.OpenAIRoute("fakellm-"+profile, sse.OpenAIRequest{
				BaseURL:  o.BaseURL,
				Model:    Model,
				Messages: []sse.Message{{Role: "user", Content: "Tell me about hedged requests."}},
				Header:   http.Header{ProfileHeader: {profile}},
				Client:   client,
				Continue: cont,
			})
		}
		results[i] = Result{Scenario: sc.Name, Calls: sc.Calls,
			Outcomes: map[hedgeprobe.Outcome]int{}, Hedges: map[hedgeprobe.Trigger]int{},
			HedgeWins: map[hedgeprobe.Trigger]int{}, Errors: map[hedgeprobe.Outcome]string{}}
		var mu sync.Mutex
		for range sc.Calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := call(ctx, p, routes)
				mu.Lock()
				defer mu.Unlock()
				record(&results[i], st, err)
			}()
		}
	}
	wg.Wait()
	for i := range results {
		results[i].Ejections = int(ejections[i].Load())
	}
	return results, ctx.Err()
}

// call is the caller's ordinary loop: the Stream is a Source.
func call(ctx context.Context, p *hedgeprobe.Prober[sse.ChatChunk], routes []hedgeprobe.Route[sse.ChatChunk]) (hedgeprobe.Stats, error) {
	s := p.Stream(ctx, routes...)
	defer s.Close()
	for s.Next() {
		_ = s.Current()
	}
	// Next has reported false, so Err and Stats are final.
	return s.Stats(), s.Err()
}

func record(r *Result, st hedgeprobe.Stats, err error) {
	r.Outcomes[st.Outcome]++
	r.ChunksDelivered += st.ChunksDelivered
	if st.ChunksDelivered > 0 {
		r.TTFTs = append(r.TTFTs, st.TimeToFirstChunk)
	}
	for _, a := range st.Attempts {
		if a.ContentChunks > 0 {
			r.Streams++
		}
		r.WastedChunks += a.ContentChunks - a.ChunksDelivered
		if a.Index == 0 {
			continue
		}
		r.Hedges[a.Trigger]++
		if a.Index == st.Winner {
			r.HedgeWins[a.Trigger]++
		}
	}
	// As the call span's streamwatch.truncated: any failure after content
	// was delivered, a timeout or not.
	if st.Outcome != hedgeprobe.OutcomeOK && st.ChunksDelivered > 0 {
		r.Truncated++
	}
	if st.HedgesThrottled > 0 {
		r.Throttled += st.HedgesThrottled
		r.ThrottledCalls++
	}
	if err != nil && r.Errors[st.Outcome] == "" {
		r.Errors[st.Outcome] = err.Error()
	}
}

// Totals sums results.
func Totals(rs []Result) Result {
	t := Result{Scenario: "total", Outcomes: map[hedgeprobe.Outcome]int{}, Hedges: map[hedgeprobe.Trigger]int{},
		HedgeWins: map[hedgeprobe.Trigger]int{}, Errors: map[hedgeprobe.Outcome]string{}}
	for _, r := range rs {
		t.Calls += r.Calls
		t.Truncated += r.Truncated
		t.ChunksDelivered += r.ChunksDelivered
		t.TTFTs = append(t.TTFTs, r.TTFTs...)
		t.Streams += r.Streams
		t.WastedChunks += r.WastedChunks
		t.Ejections += r.Ejections
		t.Throttled += r.Throttled
		t.ThrottledCalls += r.ThrottledCalls
		for k, v := range r.Outcomes {
			t.Outcomes[k] += v
		}
		for k, v := range r.Hedges {
			t.Hedges[k] += v
		}
		for k, v := range r.HedgeWins {
			t.HedgeWins[k] += v
		}
	}
	return t
}

// TTFTQuantile is the exact q-quantile of r.TTFTs by nearest rank: the
// smallest TTFT that at least q of the calls did not exceed. It is 0 when
// no call delivered content.
func (r Result) TTFTQuantile(q float64) time.Duration {
	if len(r.TTFTs) == 0 {
		return 0
	}
	s := slices.Clone(r.TTFTs)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
