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
			if !strings.Contains(tg.Expr, `"$model"`) {
				t.Errorf("panel %q ignores the model variable: %s", p.Title, tg.Expr)
			}
			exprs++
		}
	}
	if exprs != len(Exprs()) {
		t.Errorf("%d expressions in JSON, %d from Exprs", exprs, len(Exprs()))
	}
	for _, want := range []string{
		"Time to first chunk (caller)", "Raw versus active generation (mean per stream)", "Stall share of generation time",
		"Stalls per stream and share of streams that stalled", "Stall duration", "Inter-chunk latency (winner, pooled gaps)",
		"Hedge rate by trigger (hedges per call)", "Hedge win rate by trigger", "Watchdog timeouts and failed calls",
		"Wasted chunks (received by losers)", "Attempt time to first chunk by route (p95)", "Stalls by route",
	} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}
