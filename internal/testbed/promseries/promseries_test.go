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
		{expr: `rate(calls_total{outcom="ok"}[5m])`, want: []string{"calls_total has no label outcom"}},
		{expr: `rate(calls_total{route=~"$route"}[5m])`, want: []string{"1 of 2 series of calls_total have no label route"}},
		{expr: `rate(calls_total{route="a"}[5m])`},
		{expr: `sum by (reason) (rate(calls_total[5m]))`, want: []string{"groups by reason"}},
		{expr: `sum by (job) (rate(calls_total[5m]))`, want: []string{"groups by job"}},
	} {
		got := s.Problems(tc.expr, tc.always...)
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], tc.want[i])
		}
		if !ok {
			t.Errorf("Problems(%s) = %q, want %q", tc.expr, got, tc.want)
		}
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
