package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite streamwatch.json from Build")

// The checked-in JSON is what Grafana provisions; it must be exactly what
// the code builds.
func TestJSONUpToDate(t *testing.T) {
	got, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("streamwatch.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("streamwatch.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("dashboards/streamwatch.json is stale: run go test ./dashboards -update")
	}
}

// Every panel the issue asks for is there, every panel has a query, and
// the JSON names each expression exactly once per target.
func TestPanels(t *testing.T) {
	raw, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != UID {
		t.Errorf("uid = %q", d.UID)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if strings.Join(vars, ",") != "model,route" {
		t.Errorf("variables = %v, want model,route", vars)
	}
	exprs := 0
	titles := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		titles[p.Title] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			// Which variables a query may follow is
			// TestQueriesMatchEmittedLabels' business; it follows one.
			if !strings.Contains(tg.Expr, `"$model"`) && !strings.Contains(tg.Expr, `"$route"`) {
				t.Errorf("panel %q ignores both variables: %s", p.Title, tg.Expr)
			}
			exprs++
		}
	}
	if exprs != len(Exprs()) {
		t.Errorf("%d expressions in JSON, %d from Exprs", exprs, len(Exprs()))
	}
	for _, want := range []string{
		"Calls by outcome", "Time to first chunk (caller)", "Raw versus active generation (mean per stream)", "Stall share of generation time",
		"Stalls per stream", "Share of streams that stalled", "Stall duration", "Inter-chunk latency (pooled gaps callers got)",
		"Stall time per call: upstreams versus callers", "Stall segments per call: upstreams versus callers",
		"Hedge rate by trigger (hedges per call)", "Hedge win rate by trigger", "Watchdog timeouts and failed calls",
		"Wasted chunks (received, never delivered)", "Attempt time to first chunk by route (p95)", "Hedges sent to each route",
		"Stall segments by route (streams that outlived the silence)", "Route ejections by reason",
	} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// panelByTitle returns the panel of Panels with the given title.
func panelByTitle(t *testing.T, title string) Panel {
	t.Helper()
	for _, p := range Panels() {
		if p.Title == title {
			return p
		}
	}
	t.Fatalf("no panel %q", title)
	return Panel{}
}

// Each panel answers the question its title asks (the review of issue 13):
// failed calls leave ok out, wasted chunks are the cancelled losers',
// ratios of attempt metrics to call metrics do not filter two different
// routes by $route, shares are percentages, and the heatmap has a unit.
func TestPanelsAnswerTheirTitles(t *testing.T) {
	if e := panelByTitle(t, "Watchdog timeouts and failed calls").Queries[0].Expr; !strings.Contains(e, outcome+`!="ok"`) {
		t.Errorf("failed calls include ok: %s", e)
	}
	if e := panelByTitle(t, "Wasted chunks (received, never delivered)").Queries[0].Expr; strings.Contains(e, aOutcome) {
		t.Errorf("wasted chunks filtered by outcome (the metric itself counts what was never delivered): %s", e)
	}
	for _, p := range Panels() {
		for _, q := range p.Queries {
			if strings.Contains(q.Expr, calls) && (strings.Contains(q.Expr, hedges) || strings.Contains(q.Expr, stallDuration) || strings.Contains(q.Expr, stalls+"{")) &&
				strings.Contains(q.Expr, "$route") {
				t.Errorf("panel %q divides attempt and call metrics under $route: %s", p.Title, q.Expr)
			}
		}
		if strings.Contains(strings.ToLower(p.Title), "share") && p.Unit != "percentunit" {
			t.Errorf("panel %q is a share on unit %q", p.Title, p.Unit)
		}
		// A panel of counts per second says so in its unit, so a rate of
		// 0.02 ejections a second does not read as a count.
		if strings.Contains(p.Description, "per second") && p.Unit != "cps" && p.Unit != "reqps" {
			t.Errorf("panel %q shows a rate on unit %q", p.Title, p.Unit)
		}
		for _, q := range p.Queries {
			if p.Heatmap && !strings.Contains(q.Expr, "[$__interval]") {
				t.Errorf("heatmap %q: %s: a window longer than the step counts an observation in several cells", p.Title, q.Expr)
			}
		}
	}
	raw, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type     string `json:"type"`
			Title    string `json:"title"`
			Interval string `json:"interval"`
			Options  struct {
				YAxis struct {
					Unit string `json:"unit"`
				} `json:"yAxis"`
				Calculate *bool `json:"calculate"`
			} `json:"options"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	heatmaps := 0
	for _, p := range d.Panels {
		if p.Type != "heatmap" {
			continue
		}
		heatmaps++
		if p.Options.YAxis.Unit != "s" || p.Options.Calculate == nil || *p.Options.Calculate {
			t.Errorf("heatmap y axis unit %q, calculate %v; want s and false", p.Options.YAxis.Unit, p.Options.Calculate)
		}
		if p.Interval != countStep {
			t.Errorf("heatmap min interval %q, want %s", p.Interval, countStep)
		}
	}
	if heatmaps != 1 {
		t.Errorf("%d heatmaps, want 1", heatmaps)
	}
	// A query over each step's own window ($__interval) needs the panel's
	// least step, or a short graph step makes windows of a scrape or two;
	// one over $__rate_interval must not count per step.
	for _, p := range Panels() {
		for _, q := range p.Queries {
			if perStep := strings.Contains(q.Expr, "[$__interval]"); perStep != (p.Step != "") {
				t.Errorf("panel %q: step %q with query %s", p.Title, p.Step, q.Expr)
			}
		}
	}
	for _, p := range d.Panels {
		if p.Title == "Route ejections by reason" && p.Interval != countStep {
			t.Errorf("%q: min interval %q, want %s", p.Title, p.Interval, countStep)
		}
	}
	// A route that only ever fails has no attempt TTFT; the route
	// variable must still offer it.
	for _, v := range d.Templating.List {
		for _, m := range []string{ttftAttempt, wasted, hedges} {
			if !strings.Contains(v.Definition, m) {
				t.Errorf("variable %s (%s) does not read %s", v.Name, v.Definition, m)
			}
		}
	}
}

// Grafana's grid is 24 columns wide. The builder starts a new line only
// after a panel has overflowed, so a panel too wide for what is left of
// its line ends past the edge, and Grafana moves it (and the panels after
// it) when it loads the dashboard.
func TestPanelsFitTheGrid(t *testing.T) {
	raw, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			GridPos struct {
				X, W int
			} `json:"gridPos"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if end := p.GridPos.X + p.GridPos.W; end > 24 {
			t.Errorf("panel %q: x=%d w=%d ends at column %d of 24", p.Title, p.GridPos.X, p.GridPos.W, end)
		}
	}
}

// Panel and row ids are fixed, so a link to a panel outlives a new panel:
// each is set, none is used twice, every row has one, and the panels of
// the first release of the layout keep theirs.
func TestPanelIDsAreStable(t *testing.T) {
	seen := map[uint32]string{}
	use := func(id uint32, what string) {
		if id == 0 {
			t.Errorf("%s has no id", what)
		} else if other, ok := seen[id]; ok {
			t.Errorf("id %d is both %s and %s", id, other, what)
		}
		seen[id] = what
	}
	for name, id := range rowIDs {
		use(id, "row "+name)
	}
	for _, p := range Panels() {
		if _, ok := rowIDs[p.Row]; !ok {
			t.Errorf("panel %q: row %q has no id", p.Title, p.Row)
		}
		use(p.ID, "panel "+p.Title)
	}
	for id, title := range map[uint32]string{2: "Calls by outcome", 9: "Stall duration",
		17: "Wasted chunks (received, never delivered)", 22: "Route ejections by reason", 23: "Call duration by outcome (p95)"} {
		if seen[id] != "panel "+title {
			t.Errorf("id %d is %q, was panel %q", id, seen[id], title)
		}
	}
}
