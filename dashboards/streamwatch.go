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
	Row         string
	Title       string
	Description string
	Unit        string
	Heatmap     bool
	Queries     []Query
}

// Prometheus names of the connector's metrics.
var (
	ttftCall      = semconv.PromName(semconv.MetricTimeToFirstChunk, semconv.UnitSeconds, false)
	perChunk      = semconv.PromName(semconv.MetricTimePerOutputChunk, semconv.UnitSeconds, false)
	callDuration  = semconv.PromName(semconv.MetricOperationDuration, semconv.UnitSeconds, false)
	ttftAttempt   = semconv.PromName(semconv.MetricAttemptTimeToFirstChunk, semconv.UnitSeconds, false)
	generation    = semconv.PromName(semconv.MetricGenerationDuration, semconv.UnitSeconds, false)
	active        = semconv.PromName(semconv.MetricActiveGenerationDuration, semconv.UnitSeconds, false)
	stallDuration = semconv.PromName(semconv.MetricStallDuration, semconv.UnitSeconds, false)
	streams       = semconv.PromName(semconv.MetricStreams, semconv.UnitCount, true)
	stalls        = semconv.PromName(semconv.MetricStalls, semconv.UnitCount, true)
	hedges        = semconv.PromName(semconv.MetricHedges, semconv.UnitCount, true)
	calls         = semconv.PromName(semconv.MetricCalls, semconv.UnitCount, true)
	wasted        = semconv.PromName(semconv.MetricWastedChunks, semconv.UnitChunk, true)

	model    = semconv.PromLabel(string(semconv.GenAIRequestModel))
	route    = semconv.PromLabel(string(semconv.Route))
	trigger  = semconv.PromLabel(string(semconv.AttemptTrigger))
	aOutcome = semconv.PromLabel(string(semconv.AttemptOutcome))
	outcome  = semconv.PromLabel(string(semconv.Outcome))
	stalled  = semconv.PromLabel(string(semconv.Stalled))
)

// sel is the label selector every panel applies: the model and route
// variables. Call-level metrics carry the winner's route.
func sel(extra ...string) string {
	parts := append([]string{model + `=~"$model"`, route + `=~"$route"`}, extra...)
	return "{" + strings.Join(parts, ", ") + "}"
}

func quantile(q string, metric string, by ...string) string {
	groups := strings.Join(append([]string{"le"}, by...), ", ")
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s_bucket%s[$__rate_interval])))", q, groups, metric, sel())
}

func mean(metric string) string {
	return fmt.Sprintf("sum(rate(%s_sum%s[$__rate_interval])) / sum(rate(%s_count%s[$__rate_interval]))", metric, sel(), metric, sel())
}

// Panels lists the dashboard's graphs in layout order.
func Panels() []Panel {
	return []Panel{
		{Row: "Experience", Title: "Time to first chunk (caller)", Unit: "s",
			Description: "What callers waited for their first content chunk, hedges included (gen_ai.client.operation.time_to_first_chunk).",
			Queries: []Query{
				{quantile("0.5", ttftCall), "p50"},
				{quantile("0.95", ttftCall), "p95"},
				{quantile("0.99", ttftCall), "p99"},
			}},
		{Row: "Experience", Title: "Raw versus active generation (mean per stream)", Unit: "s",
			Description: "Raw generation is wall time from first to last content chunk; active generation removes every gap longer than the stall threshold.",
			Queries: []Query{
				{mean(generation), "raw generation"},
				{mean(active), "active generation"},
			}},
		{Row: "Experience", Title: "Stall share of generation time", Unit: "percentunit",
			Description: "Share of raw generation time spent in silences longer than the stall threshold.",
			Queries: []Query{
				{fmt.Sprintf("1 - sum(rate(%s_sum%s[$__rate_interval])) / sum(rate(%s_sum%s[$__rate_interval]))", active, sel(), generation, sel()), "stall share"},
			}},
		{Row: "Stalls", Title: "Stalls per stream and share of streams that stalled", Unit: "short",
			Queries: []Query{
				{fmt.Sprintf("sum(rate(%s%s[$__rate_interval])) / sum(rate(%s%s[$__rate_interval]))", stalls, sel(), streams, sel()), "stalls per stream"},
				{fmt.Sprintf(`sum(rate(%s%s[$__rate_interval])) / sum(rate(%s%s[$__rate_interval]))`, streams, sel(stalled+`="yes"`), streams, sel()), "share of streams stalled"},
			}},
		{Row: "Stalls", Title: "Stall duration", Unit: "s", Heatmap: true,
			Description: "One observation per stall segment, buckets up to 10 minutes.",
			Queries: []Query{
				{fmt.Sprintf("sum by (le) (increase(%s_bucket%s[$__rate_interval]))", stallDuration, sel()), "{{le}}"},
			}},
		{Row: "Stalls", Title: "Inter-chunk latency (winner, pooled gaps)", Unit: "s",
			Description: "gen_ai.client.operation.time_per_output_chunk: one observation per gap between content chunks of the committed attempt.",
			Queries: []Query{
				{quantile("0.5", perChunk), "p50"},
				{quantile("0.99", perChunk), "p99"},
			}},
		{Row: "Hedging", Title: "Hedge rate by trigger (hedges per call)", Unit: "percentunit",
			Queries: []Query{
				{fmt.Sprintf("sum by (%s) (rate(%s%s[$__rate_interval])) / scalar(sum(rate(%s%s[$__rate_interval])))", trigger, hedges, sel(), calls, sel()), "{{" + trigger + "}}"},
			}},
		{Row: "Hedging", Title: "Hedge win rate by trigger", Unit: "percentunit",
			Queries: []Query{
				{fmt.Sprintf(`sum by (%s) (rate(%s%s[$__rate_interval])) / sum by (%s) (rate(%s%s[$__rate_interval]))`, trigger, hedges, sel(aOutcome+`="winner"`), trigger, hedges, sel()), "{{" + trigger + "}}"},
			}},
		{Row: "Hedging", Title: "Watchdog timeouts and failed calls", Unit: "reqps",
			Queries: []Query{
				{fmt.Sprintf(`sum by (%s) (rate(%s%s[$__rate_interval]))`, outcome, calls, sel()), "{{" + outcome + "}}"},
			}},
		{Row: "Hedging", Title: "Wasted chunks (received by losers)", Unit: "short",
			Queries: []Query{
				{fmt.Sprintf("sum(rate(%s%s[$__rate_interval]))", wasted, sel()), "chunks/s"},
			}},
		{Row: "Routes", Title: "Attempt time to first chunk by route (p95)", Unit: "s",
			Queries: []Query{
				{quantile("0.95", ttftAttempt, route), "{{" + route + "}}"},
			}},
		{Row: "Routes", Title: "Stalls by route", Unit: "short",
			Queries: []Query{
				{fmt.Sprintf("sum by (%s) (rate(%s%s[$__rate_interval]))", route, stalls, sel()), "{{" + route + "}}"},
			}},
		{Row: "Routes", Title: "Call duration by outcome (p95)", Unit: "s",
			Queries: []Query{
				{quantile("0.95", callDuration, outcome), "{{" + outcome + "}}"},
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
		WithVariable(labelVariable("model", "Model", ttftAttempt+"_count", model)).
		WithVariable(labelVariable("route", "Route", ttftAttempt+"_count", route))
	row := ""
	for _, p := range Panels() {
		if p.Row != row {
			row = p.Row
			b.WithRow(dashboard.NewRowBuilder(row))
		}
		b.WithPanel(panel(p))
	}
	return b.Build()
}

func labelVariable(name, label, metric, labelName string) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, %s)", metric, labelName)
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
	for _, q := range p.Queries {
		out = append(out, prometheus.NewDataqueryBuilder().Datasource(promDS).Expr(q.Expr).LegendFormat(q.Legend).Format(format).Exemplar(true))
	}
	return out
}

func panel(p Panel) cog.Builder[dashboard.Panel] {
	if p.Heatmap {
		return heatmap.NewPanelBuilder().Title(p.Title).Description(p.Description).Datasource(promDS).
			Height(8).Span(12).Targets(targets(p, prometheus.PromQueryFormatHeatmap))
	}
	return timeseries.NewPanelBuilder().Title(p.Title).Description(p.Description).Datasource(promDS).
		Unit(p.Unit).Min(0).Height(8).Span(8).Targets(targets(p, prometheus.PromQueryFormatTimeSeries))
}

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
