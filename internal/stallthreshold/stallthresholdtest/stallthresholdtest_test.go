package stallthresholdtest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/internal/stallthreshold"
)

type nested struct {
	Max int `mapstructure:"max"`
}

type covered struct {
	StallThreshold time.Duration `mapstructure:"stall_threshold"`
	Interval       time.Duration `mapstructure:"interval"`
	Limit          *int          `mapstructure:"limit"`
	Ratio          float64       `mapstructure:"ratio"` // a fraction is fine
	Names          []string      `mapstructure:"names"`
	Exemplars      nested        `mapstructure:"exemplars"`
	Inline         struct {
		Depth uint `mapstructure:"depth"`
	} `mapstructure:",squash"`
	_ struct{}
}

// CoversFields names every integer and duration field, through pointers,
// nested and squashed structs; it reports a field missing from the checks,
// a key checked for no field, and an integer it cannot name.
func TestFieldProblems(t *testing.T) {
	full := stallthreshold.RawChecks{Durations: []string{"interval"}, Counts: []string{"limit", "exemplars::max", "depth"}}
	if p := fieldProblems(&covered{}, full); len(p) != 0 {
		t.Fatalf("covered config: %q", p)
	}
	missing := stallthreshold.RawChecks{Durations: []string{"interval"}, Counts: []string{"limit", "depth", "gone"}}
	if p := fieldProblems(&covered{}, missing); len(p) != 1 || !strings.Contains(p[0], "exemplars::max") {
		t.Fatalf("missing and stale keys: %q", p)
	}
	type uncheckable struct {
		Sizes   []int                    `mapstructure:"sizes"`
		ByName  map[string]time.Duration `mapstructure:"by_name"`
		Any     any                      `mapstructure:"any"`
		Labels  map[string]string        `mapstructure:"labels"`
		Seconds [2]float64               `mapstructure:"seconds"`
	}
	var got []string
	for _, p := range fieldProblems(&uncheckable{}, stallthreshold.RawChecks{}) {
		got = append(got, strings.Fields(p)[1])
	}
	if want := []string{"sizes", "by_name", "any"}; !slices.Equal(got, want) {
		t.Fatalf("uncheckable fields %q, want %q", got, want)
	}
}
