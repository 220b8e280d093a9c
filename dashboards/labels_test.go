package dashboards

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector"
	"github.com/streamwatch/streamwatch/semconv"
)

// wellFormed are the connector's golden inputs whose spans carry every
// attribute hedgeprobe writes: series made from them have the labels a
// real deployment's have. (The other inputs test bad spans on purpose.)
var wellFormed = []string{"hedged_stall_winner", "outcomes", "resumed_call", "route_ejections"}

// emitted runs the connector over the well-formed inputs and returns, per
// Prometheus series name, the label names of each series, as the
// Prometheus exporter names them. Overflow series are left out.
func emitted(t *testing.T) map[string][]map[string]bool {
	t.Helper()
	f := streamwatchconnector.NewFactory()
	sink := new(consumertest.MetricsSink)
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	for _, name := range wellFormed {
		td, err := golden.ReadTraces(filepath.Join("..", "connector", "streamwatchconnector", "testdata", name, "input.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
	}
	// Shutdown flushes the last interval.
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	series := map[string][]map[string]bool{}
	add := func(name string, attrs pcommon.Map, extra ...string) {
		if _, overflow := attrs.Get(semconv.MetricOverflow); overflow {
			return
		}
		labels := map[string]bool{}
		for k := range attrs.All() {
			labels[semconv.PromLabel(k)] = true
		}
		for _, l := range extra {
			labels[l] = true
		}
		series[name] = append(series[name], labels)
	}
	for _, md := range sink.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					switch m.Type() {
					case pmetric.MetricTypeHistogram:
						base := semconv.PromName(m.Name(), m.Unit(), false)
						for _, dp := range m.Histogram().DataPoints().All() {
							add(base+"_bucket", dp.Attributes(), "le")
							add(base+"_sum", dp.Attributes())
							add(base+"_count", dp.Attributes())
						}
					case pmetric.MetricTypeSum:
						for _, dp := range m.Sum().DataPoints().All() {
							add(semconv.PromName(m.Name(), m.Unit(), true), dp.Attributes())
						}
					default:
						t.Fatalf("%s: unexpected type %v", m.Name(), m.Type())
					}
				}
			}
		}
	}
	if len(series) == 0 {
		t.Fatal("the connector emitted nothing")
	}
	return series
}

var (
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"([^"]*)"`)
	groupRE    = regexp.MustCompile(`by \(([^)]*)\)`)
)

// Every query selects series the connector emits, filters and groups on
// labels they carry, and filters on a variable only through a label that
// every series of its metric carries: a matcher label=~"$var" on a series
// without that label matches only while the variable is All (".*" matches
// the empty value), so picking a value would hide those series — route
// ejections have no model, and calls that nothing won have no route.
func TestQueriesMatchEmittedLabels(t *testing.T) {
	series := emitted(t)
	for _, p := range Panels() {
		for _, q := range p.Queries {
			var selected []string
			for _, sel := range selectorRE.FindAllStringSubmatch(q.Expr, -1) {
				name, sets := sel[1], series[sel[1]]
				if len(sets) == 0 {
					t.Errorf("panel %q: the connector emits no %s", p.Title, name)
					continue
				}
				selected = append(selected, name)
				for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
					label, variable := m[1], strings.HasPrefix(m[3], "$")
					missing := 0
					for _, labels := range sets {
						if !labels[label] {
							missing++
						}
					}
					switch {
					case missing == len(sets):
						t.Errorf("panel %q: %s has no label %s", p.Title, name, label)
					case missing > 0 && variable:
						t.Errorf("panel %q: %d of %d series of %s have no label %s, so picking a value of %s hides them",
							p.Title, missing, len(sets), name, label, m[3])
					}
				}
			}
			for _, g := range groupRE.FindAllStringSubmatch(q.Expr, -1) {
				for _, label := range strings.Split(g[1], ", ") {
					if !anyHas(series, selected, label) {
						t.Errorf("panel %q: groups by %s, which none of %v carries", p.Title, label, selected)
					}
				}
			}
		}
	}
}

// The variables offer the values of a label every series they read has.
func TestVariableSeriesCarryTheirLabels(t *testing.T) {
	series := emitted(t)
	names := regexp.MustCompile(`__name__=~"([^"]+)"`).FindStringSubmatch(VariableSeries)
	if names == nil {
		t.Fatalf("VariableSeries %s names no metrics", VariableSeries)
	}
	for _, name := range strings.Split(names[1], "|") {
		for _, label := range []string{model, route} {
			if !anyHas(series, []string{name}, label) {
				t.Errorf("variable series %s has no label %s", name, label)
			}
		}
	}
}

func anyHas(series map[string][]map[string]bool, names []string, label string) bool {
	for _, n := range names {
		for _, labels := range series[n] {
			if labels[label] {
				return true
			}
		}
	}
	return false
}
