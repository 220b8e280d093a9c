package dashboards

import (
	"regexp"
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/internal/testbed/promseries"
)

// Every query selects series the connector emits, filters and groups on
// labels they carry, and filters on a variable only through a label that
// every series of its metric carries: route ejections have no model, and
// calls that nothing won have no route.
func TestQueriesMatchEmittedLabels(t *testing.T) {
	series := promseries.Emitted(t)
	for _, p := range Panels() {
		for _, q := range p.Queries {
			for _, problem := range series.Problems(q.Expr) {
				t.Errorf("panel %q: %s", p.Title, problem)
			}
		}
	}
}

// The variables offer the values of a label every series they read has.
func TestVariableSeriesCarryTheirLabels(t *testing.T) {
	series := promseries.Emitted(t)
	names := regexp.MustCompile(`__name__=~"([^"]+)"`).FindStringSubmatch(VariableSeries)
	if names == nil {
		t.Fatalf("VariableSeries %s names no metrics", VariableSeries)
	}
	for _, name := range strings.Split(names[1], "|") {
		for _, label := range []string{model, route} {
			if !anyHas(series, name, label) {
				t.Errorf("variable series %s has no label %s", name, label)
			}
		}
	}
}

func anyHas(series promseries.Series, name, label string) bool {
	for _, labels := range series[name] {
		if labels[label] {
			return true
		}
	}
	return false
}
