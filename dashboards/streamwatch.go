package dashboards

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/streamwatch/streamwatch/semconv"
)

// UID is the dashboard's stable identifier in Grafana.
const UID = "streamwatch"

// Query is one PromQL expression of a panel.
type Query struct {
	Expr   string
	Legend string
}

// Panel is one graph of the dashboard.
type Panel struct {
	// ID is the panel's Grafana id, fixed for good: links to a panel
	// (viewPanel=ID) and annotations keep pointing at it when panels are
	// added or moved. A new panel takes the next id never used.
	ID          uint32
	Row         string
	Title       string
	Description string
	Unit        string
	Heatmap     bool
	// Step, when set, is the panel's least step, and its queries count
	// each step's own window with $__interval: cells or points that do
	// not overlap, so one event is counted once.
	Step    string
	Queries []Query
}

// Prometheus names of the connector's metrics.
var (
	ttftCall          = semconv.PromName(semconv.MetricTimeToFirstChunk, semconv.UnitSeconds, false)
	perChunk          = semconv.PromName(semconv.MetricTimePerOutputChunk, semconv.UnitSeconds, false)
	callDuration      = semconv.PromName(semconv.MetricOperationDuration, semconv.UnitSeconds, false)
	ttftAttempt       = semconv.PromName(semconv.MetricAttemptTimeToFirstChunk, semconv.UnitSeconds, false)
	generation        = semconv.PromName(semconv.MetricGenerationDuration, semconv.UnitSeconds, false)
	active            = semconv.PromName(semconv.MetricActiveGenerationDuration, semconv.UnitSeconds, false)
	stallDuration     = semconv.PromName(semconv.MetricStallDuration, semconv.UnitSeconds, false)
	callStallDuration = semconv.PromName(semconv.MetricCallStallDuration, semconv.UnitSeconds, false)
	streams           = semconv.PromName(semconv.MetricStreams, semconv.UnitStream, true)
	stalls            = semconv.PromName(semconv.MetricStalls, semconv.UnitStall, true)
	callStalls        = semconv.PromName(semconv.MetricCallStalls, semconv.UnitStall, true)
	hedges            = semconv.PromName(semconv.MetricHedges, semconv.UnitAttempt, true)
	calls             = semconv.PromName(semconv.MetricCalls, semconv.UnitCall, true)
	wasted            = semconv.PromName(semconv.MetricWastedChunks, semconv.UnitChunk, true)
	ejections         = semconv.PromName(semconv.MetricRouteEjections, semconv.UnitEjection, true)
	throttled         = semconv.PromName(semconv.MetricThrottledHedges, semconv.UnitHedge, true)

	model    = semconv.PromLabel(string(semconv.GenAIRequestModel))
	route    = semconv.PromLabel(string(semconv.Route))
	trigger  = semconv.PromLabel(string(semconv.AttemptTrigger))
	aOutcome = semconv.PromLabel(string(semconv.AttemptOutcome))
	outcome  = semconv.PromLabel(string(semconv.Outcome))
	stalled  = semconv.PromLabel(string(semconv.Stalled))
	reason   = semconv.PromLabel(string(semconv.EventEjectionReason))
	throttle = semconv.PromLabel(string(semconv.EventThrottleReason))
)

// sel is the label selector of most panels: the model and route
// variables. Attempt metrics carry the attempt's route, call metrics the
// winner's.
func sel(extra ...string) string {
	return selector(append([]string{model + `=~"$model"`, route + `=~"$route"`}, extra...))
}

// selModel is the selector of panels that divide an attempt metric by a
// call metric: their route labels mean different routes (the hedge's, the
// winner's), so filtering both by $route would divide unrelated counts.
// These panels follow the model variable only.
func selModel(extra ...string) string {
	return selector(append([]string{model + `=~"$model"`}, extra...))
}

// selRoute is the selector of route metrics that carry no model
// (streamwatch.route.ejections: a route is ejected for all its models;
// streamwatch.throttled_hedges: the budget is shared by every model).
func selRoute(extra ...string) string {
	return selector(append([]string{route + `=~"$route"`}, extra...))
}

// Calls that nothing won (a TTFT timeout, an error or a cancellation before
// the first chunk) carry no route, so a route filter would hide them the
// moment a route is picked: panels that count calls by outcome follow the
// model variable only.
const noRouteNote = " Follows the model variable only: a call that nothing won has no route."

func selector(parts []string) string { return "{" + strings.Join(parts, ", ") + "}" }

func rate(metric, sel string) string {
	return fmt.Sprintf("rate(%s%s[$__rate_interval])", metric, sel)
}

func quantile(q string, metric string, by ...string) string {
	return quantileOf(q, metric, sel(), by...)
}

func quantileOf(q string, metric, sel string, by ...string) string {
	groups := strings.Join(append([]string{"le"}, by...), ", ")
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s) (%s))", q, groups, rate(metric+"_bucket", sel))
}

// perStream is a generation histogram's sum over the streams that have a
// raw generation: active generation has no observation for a one-chunk
// stream, whose raw generation is 0, so dividing each by its own count
// would average two populations (and active could read above raw).
func perStream(metric string) string {
	return fmt.Sprintf("sum(%s) / %s", rate(metric+"_sum", sel()), nonZero(fmt.Sprintf("sum(%s)", rate(generation+"_count", sel()))))
}

// nonZero keeps a denominator's samples above zero: after traffic stops,
// or in a window where a gateway replica flushed call spans and another
// not yet their attempts, a ratio would plot NaN or +Inf; it plots
// nothing instead.
func nonZero(den string) string { return "(" + den + " > 0)" }

// perCall divides the rate of an attempt- or call-level metric by the
// rate of calls, both under the model variable only.
func perCall(metric string) string {
	return fmt.Sprintf("sum(%s) / %s", rate(metric, selModel()), nonZero(fmt.Sprintf("sum(%s)", rate(calls, selModel()))))
}

// Panels lists the dashboard's graphs in layout order.
func Panels() []Panel {
	return []Panel{
		{Row: "Experience", ID: 2, Title: "Calls by outcome", Unit: "reqps",
			Description: "Calls per second by streamwatch.outcome (ok, ttft_timeout, stall_timeout, error, canceled)." + noRouteNote,
			Queries: []Query{
				{fmt.Sprintf("sum by (%s) (%s)", outcome, rate(calls, selModel())), "{{" + outcome + "}}"},
			}},
		{Row: "Experience", ID: 3, Title: "Time to first chunk (caller)", Unit: "s",
			Description: "What callers waited for their first content chunk, hedges included (gen_ai.client.operation.time_to_first_chunk). Quantiles are interpolated inside the GenAI buckets.",
			Queries: []Query{
				{quantile("0.5", ttftCall), "p50"},
				{quantile("0.95", ttftCall), "p95"},
				{quantile("0.99", ttftCall), "p99"},
			}},
		{Row: "Experience", ID: 4, Title: "Raw versus active generation (mean per stream)", Unit: "s",
			Description: "Raw generation is wall time from first to last content chunk; active generation removes every gap longer than the stall threshold. Both are averaged over the same streams (a one-chunk stream counts 0 in each).",
			Queries: []Query{
				{perStream(generation), "raw generation"},
				{perStream(active), "active generation"},
			}},
		{Row: "Experience", ID: 5, Title: "Stall share of generation time", Unit: "percentunit",
			Description: "Share of raw generation time spent in silences longer than the stall threshold.",
			Queries: []Query{
				{fmt.Sprintf("1 - sum(%s) / %s", rate(active+"_sum", sel()), nonZero(fmt.Sprintf("sum(%s)", rate(generation+"_sum", sel())))), "stall share"},
			}},
		{Row: "Stalls", ID: 7, Title: "Stalls per stream", Unit: "short",
			Description: "Stall segments per stream (an attempt with at least one content chunk). A run of consecutive long gaps is one segment. An attempt cut while silent — a loser a stall hedge replaced, a stream the watchdog ended — has no segment: a silence after the last chunk is not a gap.",
			Queries: []Query{
				{fmt.Sprintf("sum(%s) / %s", rate(stalls, sel()), nonZero(fmt.Sprintf("sum(%s)", rate(streams, sel())))), "stalls per stream"},
			}},
		{Row: "Stalls", ID: 8, Title: "Share of streams that stalled", Unit: "percentunit",
			Description: "Streams with at least one stall segment, over all streams.",
			Queries: []Query{
				// "or vector(0)": before the first stall there is no
				// stalled="yes" series, and the share is 0, not no data.
				{fmt.Sprintf("(sum(%s) or vector(0)) / %s", rate(streams, sel(stalled+`="yes"`)), nonZero(fmt.Sprintf("sum(%s)", rate(streams, sel())))), "share of streams stalled"},
			}},
		{Row: "Stalls", ID: 9, Title: "Stall duration", Unit: "s", Heatmap: true, Step: countStep,
			Description: "Upstream stall segments per time cell (one minute, or the graph's step when longer), by duration, buckets up to 10 minutes. Exemplars link a bucket to the trace of a stalled call.",
			Queries: []Query{
				// One cell per step, each counting its own window: over
				// $__rate_interval, longer than the step, the windows
				// overlap and one stall fills several cells.
				{fmt.Sprintf("sum by (le) (increase(%s_bucket%s[$__interval]))", stallDuration, sel()), "{{le}}"},
			}},
		{Row: "Stalls", ID: 10, Title: "Stall time per call: upstreams versus callers", Unit: "s",
			Description: "Upstream: the silence of every attempt (streamwatch.stall.duration). Callers: the silence callers actually waited through (streamwatch.call.stall.duration, from the caller's view). Upstream segments are silences that ended with a chunk; a silence cut short because a hedge or resume won ends with its attempt and is no segment, so the callers' figure counts the silence they waited before a rescue, and resumed calls raise it. Follows the model variable only.",
			Queries: []Query{
				{perCall(stallDuration + "_sum"), "upstream stall"},
				{perCall(callStallDuration + "_sum"), "stall callers saw"},
			}},
		{Row: "Stalls", ID: 11, Title: "Stall segments per call: upstreams versus callers", Unit: "short",
			Description: "Upstream stall segments (streamwatch.stalls) and the stall segments callers saw (streamwatch.call.stalls), per call. Follows the model variable only.",
			Queries: []Query{
				{perCall(stalls), "upstream"},
				{perCall(callStalls), "callers saw"},
			}},
		{Row: "Stalls", ID: 12, Title: "Inter-chunk latency (pooled gaps callers got)", Unit: "s",
			Description: "gen_ai.client.operation.time_per_output_chunk: one observation per gap between the content chunks an attempt gave the caller — the winner's, a committed stream's that a watchdog, an error or the caller cut short, a stalled stream's that a resume took over from. A loser's gaps are not in it, nor the silence across a rescue (that is the callers' stall).",
			Queries: []Query{
				{quantile("0.5", perChunk), "p50"},
				{quantile("0.99", perChunk), "p99"},
			}},
		{Row: "Hedging", ID: 14, Title: "Hedge rate by trigger (hedges per call)", Unit: "short",
			Description: "Hedges launched per call, by trigger: ttft (late first chunk), stall (silent before commit), error (transient failure), resume (silent after commit, continued elsewhere). Follows the model variable only: a hedge's route is where it went, a call's route where it was won; 'Hedges sent to each route' splits hedges by route. The model is the hedge's for hedges and the call's for calls: a hedge sent to another model counts under that model.",
			Queries: []Query{
				// on() group_left, not scalar(): the scalar of an empty
				// vector is NaN, which would plot where nothing should.
				{fmt.Sprintf("sum by (%s) (%s) / on() group_left() %s", trigger, rate(hedges, selModel()), nonZero(fmt.Sprintf("sum(%s)", rate(calls, selModel())))), "{{" + trigger + "}}"},
			}},
		{Row: "Hedging", ID: 15, Title: "Hedge win rate by trigger", Unit: "percentunit",
			Description: "Share of hedges that won their call, by trigger.",
			Queries: []Query{
				// "or 0 * …": a trigger whose hedges never won has no
				// winner series; its share is 0, not a missing line.
				{fmt.Sprintf(`(sum by (%s) (%s) or 0 * sum by (%s) (%s)) / (sum by (%s) (%s) > 0)`,
					trigger, rate(hedges, sel(aOutcome+`="winner"`)), trigger, rate(hedges, sel()), trigger, rate(hedges, sel())), "{{" + trigger + "}}"},
			}},
		{Row: "Hedging", ID: 16, Title: "Watchdog timeouts and failed calls", Unit: "reqps",
			Description: "Calls per second that did not end ok, by outcome: ttft_timeout and stall_timeout are the watchdogs, error a fatal or last transient error, canceled the caller's own cancellation." + noRouteNote,
			Queries: []Query{
				{fmt.Sprintf(`sum by (%s) (%s)`, outcome, rate(calls, selModel(outcome+`!="`+semconv.OutcomeOK+`"`))), "{{" + outcome + "}}"},
			}},
		{Row: "Hedging", ID: 24, Title: "Rescues refused by trigger and reason", Unit: "cps",
			Description: "Hedges and resumes that were due and not launched, per second (streamwatch.throttled_hedges: one per rescue refused, not per repeat of its refusal), by trigger and reason: budget (the hedge budget was spent) or pushback (every route the rescue could go to asked callers to stay away or was ejected). Non-zero budget refusals while calls stall or fail mean the budget, not the routes, let them through. Follows the route variable only (the route the rescue would have gone to; for a budget refusal only where the rotation pointed, as the budget is shared by every route and model of a Prober).",
			Queries: []Query{
				{fmt.Sprintf("sum by (%s, %s) (%s)", trigger, throttle, rate(throttled, selRoute())), "{{" + trigger + "}} {{" + throttle + "}}"},
			}},
		{Row: "Hedging", ID: 17, Title: "Wasted chunks (received, never delivered)", Unit: "cps",
			Description: "Content chunks per second that attempts received and callers never got (streamwatch.wasted_chunks: chunk count minus chunks delivered, per attempt): the chunks of losers, and a winner's chunks the caller never read (it closed the stream early). A stalled attempt a resume took over from delivered its chunks and wastes none.",
			Queries: []Query{
				{fmt.Sprintf("sum(%s)", rate(wasted, sel())), "chunks/s"},
			}},
		{Row: "Routes", ID: 19, Title: "Attempt time to first chunk by route (p95)", Unit: "s",
			Queries: []Query{
				{quantile("0.95", ttftAttempt, route), "{{" + route + "}}"},
			}},
		{Row: "Routes", ID: 20, Title: "Hedges sent to each route", Unit: "cps",
			Description: "Hedges launched per second, by the route they went to and their trigger.",
			Queries: []Query{
				{fmt.Sprintf("sum by (%s, %s) (%s)", route, trigger, rate(hedges, sel())), "{{" + route + "}} {{" + trigger + "}}"},
			}},
		{Row: "Routes", ID: 21, Title: "Stall segments by route (streams that outlived the silence)", Unit: "cps",
			Description: "Stall segments per second on each route's attempts. Only silences followed by another chunk count: a route whose every stall was cut short by a hedge or a watchdog reads 0 here — look at stall hedges and stall timeouts for those.",
			Queries: []Query{
				{fmt.Sprintf("sum by (%s) (%s)", route, rate(stalls, sel())), "{{" + route + "}}"},
			}},
		{Row: "Routes", ID: 22, Title: "Route ejections by reason", Unit: "short", Step: countStep,
			Description: "Route ejections in each step of the graph (one minute, or the graph's step when longer; streamwatch.route.ejections), by route and reason: failures (transient failures in a row) or retry_after (the upstream's pushback); a count, as they come a few an hour, not a rate. Follows the route variable only: a route is ejected for every model.",
			Queries: []Query{
				{fmt.Sprintf("sum by (%s, %s) (increase(%s%s[$__interval]))", route, reason, ejections, selRoute()), "{{" + route + "}} {{" + reason + "}}"},
			}},
		{Row: "Routes", ID: 23, Title: "Call duration by outcome (p95)", Unit: "s",
			Description: "How long calls took, start to end, by outcome (gen_ai.client.operation.duration)." + noRouteNote,
			Queries: []Query{
				{quantileOf("0.95", callDuration, selModel(), outcome), "{{" + outcome + "}}"},
			}},
	}
}

// Exprs returns every PromQL expression of the dashboard.
func Exprs() []string {
	var out []string
	for _, p := range Panels() {
		for _, q := range p.Queries {
			out = append(out, q.Expr)
		}
	}
	return out
}

var promDS = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("prometheus")}

// Build assembles the dashboard. It uses the classic (v1) dashboard schema
// on purpose: file provisioning in Grafana 10 and 11 reads it, while the v2
// schema the SDK now prefers needs Grafana 12's dynamic dashboards.
//
//lint:ignore SA1019 the v1 schema is the one every supported Grafana provisions
func Build() (dashboard.Dashboard, error) {
	//lint:ignore SA1019 as above
	b := dashboard.NewDashboardBuilder("streamwatch: LLM streams").
		Uid(UID).
		Description("Time to first chunk, raw versus active generation, stalls, hedging and watchdogs, from otelcol-streamwatch.").
		Tags([]string{"streamwatch", "llm", "opentelemetry"}).
		Refresh("10s").
		Time("now-30m", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(labelVariable("model", "Model", model)).
		WithVariable(labelVariable("route", "Route", route))
	row := ""
	for _, p := range Panels() {
		if p.Row != row {
			row = p.Row
			b.WithRow(dashboard.NewRowBuilder(row).Id(rowIDs[row]))
		}
		b.WithPanel(panel(p, p.ID))
	}
	return b.Build()
}

// rowIDs are the rows' Grafana ids, fixed as the panels' are.
var rowIDs = map[string]uint32{"Experience": 1, "Stalls": 6, "Hedging": 13, "Routes": 18}

// VariableSeries is the series selector the model and route variables take
// their values from: metrics that carry every route an attempt went to —
// also a route that never produced a chunk (a route that only answers 503
// has failed attempts: wasted chunks +0, hedges), which the attempt TTFT
// histogram alone would miss — and every model of a call.
var VariableSeries = fmt.Sprintf(`{__name__=~"%s"}`, strings.Join([]string{ttftAttempt + "_count", wasted, hedges, calls}, "|"))

func labelVariable(name, label, labelName string) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, %s)", VariableSeries, labelName)
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(promDS).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		IncludeAll(true).
		AllValue(".*").
		Multi(true)
}

func targets(p Panel, format prometheus.PromQueryFormat) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	exemplars := false
	for _, q := range p.Queries {
		// Exemplars only where there are any — on histogram buckets — and
		// once a panel: the same exemplars asked for by each quantile's
		// query are drawn once per query.
		ex := strings.Contains(q.Expr, "_bucket") && !exemplars
		exemplars = exemplars || ex
		out = append(out, prometheus.NewDataqueryBuilder().Datasource(promDS).Expr(q.Expr).LegendFormat(q.Legend).Format(format).Exemplar(ex))
	}
	return out
}

// panel builds p with the given id: stable ids keep a viewPanel link
// pointing at its panel.
func panel(p Panel, id uint32) cog.Builder[dashboard.Panel] {
	if p.Heatmap {
		// The data is already bucketed (calculate off); the unit belongs on
		// the y axis, where the buckets are, not on the cells, which count.
		return heatmap.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(promDS).
			Calculate(false).YAxis(heatmap.NewYAxisConfigBuilder().Unit(p.Unit)).Unit("short").
			Interval(p.Step).
			Height(8).Span(8).Targets(targets(p, prometheus.PromQueryFormatHeatmap))
	}
	// A legend and a tooltip with every line: most panels draw several
	// (quantiles, outcomes, routes), which nothing tells apart without.
	b := timeseries.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(promDS).
		Unit(p.Unit).Min(0).Height(8).Span(8).Targets(targets(p, prometheus.PromQueryFormatTimeSeries)).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	if p.Step != "" {
		b.Interval(p.Step)
	}
	return b
}

// countStep is the least step of the panels that count events per step,
// and so their window: several scrapes in each (deploy/prometheus.yml
// scrapes every 5 s; a 15 s scrape still gives four), or increase has too
// little to see.
const countStep = "1m"

// JSON renders the dashboard as Grafana provisions it.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
