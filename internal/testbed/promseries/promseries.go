// Package promseries says which Prometheus series the streamwatch connector
// emits and which labels each carries, so that PromQL written for them —
// the dashboard's panels, the alerting rules in deploy/ — is held to names
// and labels that exist. A misspelt metric or label in a query is not an
// error to Prometheus: the panel stays empty and the alert never fires.
package promseries

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamwatch/streamwatch/connector/streamwatchconnector"
	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/semconv"
)

// vocabularies are the values of the labels whose values the wire
// contract enumerates: a matcher on any other value selects nothing, a
// typo as silent as a misspelt name.
var vocabularies = map[string][]string{
	semconv.PromLabel(string(semconv.Outcome)): {semconv.OutcomeOK, semconv.OutcomeTTFTTimeout,
		semconv.OutcomeStallTimeout, semconv.OutcomeError, semconv.OutcomeCanceled},
	semconv.PromLabel(string(semconv.AttemptTrigger)): {semconv.TriggerPrimary, semconv.TriggerTTFT,
		semconv.TriggerStall, semconv.TriggerError, semconv.TriggerResume},
	semconv.PromLabel(string(semconv.AttemptOutcome)): {semconv.AttemptOutcomeWinner,
		semconv.AttemptOutcomeCanceled, semconv.AttemptOutcomeFailed},
	semconv.PromLabel(string(semconv.EventEjectionReason)): {string(hedgeprobe.EjectFailures),
		string(hedgeprobe.EjectRetryAfter)},
	semconv.PromLabel(string(semconv.EventThrottleReason)): {string(hedgeprobe.ThrottleBudget),
		string(hedgeprobe.ThrottlePushback)},
	semconv.PromLabel(string(semconv.Derivation)): {semconv.DerivationComplete, semconv.DerivationPartial,
		semconv.DerivationAnomaly, semconv.DerivationBurst},
	semconv.PromLabel(string(semconv.Stalled)): {"yes", "no"},
}

// Series maps a Prometheus series name (a histogram's _bucket, _sum and
// _count each) to the label names of each of its series.
type Series map[string][]map[string]bool

// wellFormed are the connector's golden inputs whose spans carry every
// attribute hedgeprobe writes: series made from them have the labels a
// real deployment's have. (The other inputs test bad spans on purpose.)
var wellFormed = []string{"hedged_stall_winner", "outcomes", "resumed_call", "route_ejections", "throttled_hedges"}

// Emitted runs the connector with its default configuration over its
// well-formed golden inputs and returns the series it emits, named and
// labelled as the Prometheus exporter names them. Overflow series are left
// out. The labels Prometheus adds itself (job, instance) are not in them.
func Emitted(tb testing.TB) Series {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("promseries: cannot locate its own source")
	}
	testdata := filepath.Join(filepath.Dir(file), "..", "..", "..", "connector", "streamwatchconnector", "testdata")
	f := streamwatchconnector.NewFactory()
	sink := new(consumertest.MetricsSink)
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	for _, name := range wellFormed {
		td, err := golden.ReadTraces(filepath.Join(testdata, name, "input.yaml"))
		if err != nil {
			tb.Fatal(err)
		}
		if err := c.ConsumeTraces(context.Background(), td); err != nil {
			tb.Fatal(err)
		}
	}
	// Shutdown flushes the last interval.
	if err := c.Shutdown(context.Background()); err != nil {
		tb.Fatal(err)
	}
	series := Series{}
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
						tb.Fatalf("%s: unexpected type %v", m.Name(), m.Type())
					}
				}
			}
		}
	}
	if len(series) == 0 {
		tb.Fatal("the connector emitted nothing")
	}
	return series
}

// Add records name with one series carrying labels, for series that do
// not come from the connector (the collector's own telemetry).
func (s Series) Add(name string, labels ...string) {
	set := map[string]bool{}
	for _, l := range labels {
		set[l] = true
	}
	s[name] = append(s[name], set)
}

var (
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	bareRE     = regexp.MustCompile(`(by |without )?\(([a-zA-Z_:][a-zA-Z0-9_:]*)[\[)\s]`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"([^"]*)"`)
	groupRE    = regexp.MustCompile(`by \(([^)]*)\)`)
)

// Groupings returns the label lists of expr's "by (…)" clauses, each
// joined by commas without spaces and without le, which
// histogram_quantile consumes: the terms of a rule whose lists differ
// cannot match.
func Groupings(expr string) []string {
	var lists []string
	for _, m := range groupRE.FindAllStringSubmatch(expr, -1) {
		labels := strings.Split(strings.ReplaceAll(m[1], " ", ""), ",")
		lists = append(lists, strings.Join(slices.DeleteFunc(labels, func(l string) bool { return l == "le" }), ","))
	}
	return lists
}

// overflowLabel is the label of the connector's overflow series, which
// Emitted leaves out: the matcher otel_metric_overflow="" keeps them out
// of a query, and is no missing label.
var overflowLabel = semconv.PromLabel(semconv.MetricOverflow)

// keywords are PromQL's words that can follow a parenthesis as a series
// name would.
var keywords = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true, "stddev": true,
	"stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
	"and": true, "or": true, "unless": true, "on": true, "ignoring": true, "offset": true, "bool": true,
}

// Problems returns what is wrong with expr's selectors against s: a series
// name s does not have, a label matched or grouped by that none of the
// selected series carries, a value the label never takes (for the labels
// whose values the wire contract enumerates, a matcher's literal value or
// each literal of an alternation "a|b"), and a label matched against a
// dashboard variable ("$name") that some of its series lack —
// label=~"$var" on a series without that label matches only while the
// variable is All (".*" matches the empty value), so picking a value
// would hide those series.
// Labels in always (those Prometheus adds: job, instance) are taken as
// present on every series.
//
// It reads selectors written name{…} and bare ones right after a
// parenthesis — func(name[range]), sum(name), (name unless …) — as the
// project's queries are written; it is not a PromQL parser.
func (s Series) Problems(expr string, always ...string) []string {
	var problems []string
	var selected []string
	has := func(labels map[string]bool, l string) bool {
		return labels[l] || slices.Contains(always, l)
	}
	check := func(name string) []map[string]bool {
		sets := s[name]
		if len(sets) == 0 {
			problems = append(problems, fmt.Sprintf("no series %s", name))
			return nil
		}
		selected = append(selected, name)
		return sets
	}
	for _, sel := range selectorRE.FindAllStringSubmatch(expr, -1) {
		name := sel[1]
		sets := check(name)
		if sets == nil {
			continue
		}
		for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
			label, variable := m[1], strings.HasPrefix(m[3], "$")
			if label == overflowLabel && m[2] == "=" && m[3] == "" {
				continue
			}
			missing := 0
			for _, labels := range sets {
				if !has(labels, label) {
					missing++
				}
			}
			if words, ok := vocabularies[label]; ok && !variable {
				for _, v := range strings.Split(m[3], "|") {
					if v != "" && !slices.Contains(words, v) {
						problems = append(problems, fmt.Sprintf("%s: %s is never %q (it is one of %v)", name, label, v, words))
					}
				}
			}
			switch {
			case missing == len(sets):
				problems = append(problems, fmt.Sprintf("%s has no label %s", name, label))
			case missing > 0 && variable:
				problems = append(problems, fmt.Sprintf("%d of %d series of %s have no label %s, so picking a value of %s hides them",
					missing, len(sets), name, label, m[3]))
			}
		}
	}
	for _, b := range bareRE.FindAllStringSubmatch(expr, -1) {
		if b[1] == "" && !keywords[b[2]] {
			check(b[2])
		}
	}
	for _, g := range groupRE.FindAllStringSubmatch(expr, -1) {
		for _, label := range strings.Split(g[1], ",") {
			label = strings.TrimSpace(label)
			found := false
			for _, n := range selected {
				for _, labels := range s[n] {
					found = found || has(labels, label)
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("groups by %s, which none of %v carries", label, selected))
			}
		}
	}
	return problems
}
