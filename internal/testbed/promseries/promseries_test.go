package promseries

import (
	"slices"
	"strings"
	"testing"
)

func TestProblems(t *testing.T) {
	s := Series{}
	s.Add("calls_total", "model", "route", "outcome")
	s.Add("calls_total", "model", "outcome") // a call that nothing won
	s.Add("ejections_total", "route", "reason")
	for _, tc := range []struct {
		expr   string
		always []string
		want   []string // substrings, one per problem, in order
	}{
		{expr: `sum by (model) (rate(calls_total{outcome="ok"}[5m]))`},
		{expr: `sum by (job, route) (increase(ejections_total[15m]))`, always: []string{"job", "instance"}},
		{expr: `rate(call_total{outcome="ok"}[5m])`, want: []string{"no series call_total"}},
		{expr: `rate(ejection_total[5m])`, want: []string{"no series ejection_total"}},
		{expr: `sum by (route) (ejection_total)`, want: []string{"no series ejection_total", "groups by route"}},
		{expr: `sum by (route) (ejection_total unless ejections_total offset 5m)`, want: []string{"no series ejection_total", "groups by route"}},
		{expr: `sum by (route) (ejections_total unless ejections_total offset 5m)`},
		{expr: `(sum by (route) (ejections_total) > 0)`},
		{expr: `rate(calls_total{outcom="ok"}[5m])`, want: []string{"calls_total has no label outcom"}},
		{expr: `rate(calls_total{route=~"$route"}[5m])`, want: []string{"1 of 2 series of calls_total have no label route"}},
		{expr: `rate(calls_total{route="a"}[5m])`},
		{expr: `sum by (reason) (rate(calls_total[5m]))`, want: []string{"groups by reason"}},
		{expr: `sum by (job) (rate(calls_total[5m]))`, want: []string{"groups by job"}},
		{expr: `rate(calls_total{streamwatch_outcome="ok"}[5m])`, want: []string{"calls_total has no label streamwatch_outcome"}},
	} {
		wantProblems(t, s, tc.expr, tc.always, tc.want)
	}
}

// Values are checked for the labels the wire contract enumerates, in
// every kind of matcher and each literal of an alternation; others, and
// variables, are not.
func TestProblemsValues(t *testing.T) {
	s := Series{}
	s.Add("calls_total", "streamwatch_outcome", "streamwatch_route", "error_type")
	s.Add("ejections_total", "streamwatch_route_ejection_reason")
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{expr: `rate(calls_total{streamwatch_outcome=~"error|ttft_timeout", error_type="anything"}[5m])`},
		{expr: `rate(calls_total{streamwatch_outcome!="", streamwatch_route="x"}[5m])`},
		{expr: `rate(calls_total{streamwatch_route="x", otel_metric_overflow=""}[5m])`},
		{expr: `rate(calls_total{otel_metric_overflow="true"}[5m])`, want: []string{"calls_total has no label otel_metric_overflow"}},
		{expr: `rate(calls_total{streamwatch_outcome=~"$outcome"}[5m])`},
		{expr: `rate(calls_total{streamwatch_outcome=~"error|ttft_timout"}[5m])`, want: []string{`never "ttft_timout"`}},
		{expr: `rate(calls_total{streamwatch_outcome!="okay"}[5m])`, want: []string{`never "okay"`}},
		{expr: `increase(ejections_total{streamwatch_route_ejection_reason="retry-after"}[5m])`, want: []string{`never "retry-after"`}},
	} {
		wantProblems(t, s, tc.expr, nil, tc.want)
	}
}

// wantProblems checks that s.Problems(expr, always...) returns one problem
// per want, each containing it, in order.
func wantProblems(t *testing.T, s Series, expr string, always, want []string) {
	t.Helper()
	got := s.Problems(expr, always...)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = strings.Contains(got[i], want[i])
	}
	if !ok {
		t.Errorf("Problems(%s) = %q, want %q", expr, got, want)
	}
}

func TestGroupings(t *testing.T) {
	got := Groupings(`histogram_quantile(0.95, sum by (job, model, le) (rate(x_bucket[5m]))) and sum by (job,model) (rate(x_count[5m])) > 0`)
	if want := []string{"job,model", "job,model"}; !slices.Equal(got, want) {
		t.Errorf("Groupings = %q, want %q", got, want)
	}
	if got := Groupings(`rate(x[5m])`); got != nil {
		t.Errorf("Groupings of no by = %q", got)
	}
}

func TestEmittedHasEveryConnectorFamily(t *testing.T) {
	s := Emitted(t)
	for _, name := range []string{"streamwatch_calls_total", "streamwatch_route_ejections_total", "gen_ai_client_operation_duration_seconds_sum", "streamwatch_hedges_total"} {
		if len(s[name]) == 0 {
			t.Errorf("no %s among %d names", name, len(s))
		}
	}
	if !slices.ContainsFunc(s["streamwatch_route_ejections_total"], func(l map[string]bool) bool { return l["streamwatch_route_ejection_reason"] }) {
		t.Error("ejections carry no reason label")
	}
}
