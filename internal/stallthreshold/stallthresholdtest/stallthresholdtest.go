// Package stallthresholdtest decodes a component config the way the
// shipped collector config does, from the environment, so both components
// can test that a bad STREAM__STALL_THRESHOLD_MS is reported by name, and
// holds each component's stallthreshold.RawChecks to its config's fields.
package stallthresholdtest

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/internal/stallthreshold"
)

// ShippedLine is the line of deploy/collector.yaml that sets the threshold
// of both components.
const ShippedLine = stallthreshold.Key + ": ${env:" + stallthreshold.EnvVar + ":-2000}ms"

// Unmarshal sets STREAM__STALL_THRESHOLD_MS to value (unset when value is
// nil) for the test, resolves ShippedLine with the collector's env and yaml
// providers and unmarshals the result into cfg, returning the error a
// collector would report.
func Unmarshal(t *testing.T, cfg any, value *string) error {
	t.Helper()
	if value != nil {
		t.Setenv(stallthreshold.EnvVar, *value)
	} else {
		// t.Setenv restores the variable after the test; unset it within.
		t.Setenv(stallthreshold.EnvVar, "")
		if err := os.Unsetenv(stallthreshold.EnvVar); err != nil {
			t.Fatal(err)
		}
	}
	r, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"yaml:" + ShippedLine},
		ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), yamlprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := r.Resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return conf.Unmarshal(cfg)
}

// Accepts decodes doc, any YAML, into cfg the way a collector decodes a
// component's configuration — Unmarshal, then Validate — and reports
// whether it passed: what the components' FuzzConfig targets run. A doc
// that is not a YAML map is not accepted.
func Accepts(doc string, cfg confmap.Validator) bool {
	var raw map[string]any
	if yaml.Unmarshal([]byte(doc), &raw) != nil {
		return false
	}
	return confmap.NewFromStringMap(raw).Unmarshal(cfg) == nil && confmap.Validate(cfg) == nil
}

// CoversFields fails t unless checks names exactly the count and duration
// fields of cfg, a pointer to a component's config (Key aside, which
// Unmarshal always checks): a field added later without its raw check
// would be decoded unchecked — a fraction cut to a whole number, a bare
// number taken as nanoseconds — and a key listed for no field checks
// nothing. Fields are named by their mapstructure keys, nested ones with
// confmap.KeyDelimiter; pointers are followed. A number or duration that
// RawChecks cannot name — inside a slice, array or map, behind an
// interface, or in an unexported field (configoptional.Optional's) — fails
// t as unsupported rather than passing unchecked.
func CoversFields(t testing.TB, cfg any, checks stallthreshold.RawChecks) {
	t.Helper()
	for _, p := range fieldProblems(cfg, checks) {
		t.Error(p)
	}
}

// fieldProblems is what CoversFields reports.
func fieldProblems(cfg any, checks stallthreshold.RawChecks) []string {
	var problems []string
	var counts, durations []string
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for f := range rt.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if name == "-" {
				continue
			}
			key := prefix + name
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft == reflect.TypeFor[stallthreshold.EnvError]():
				// No configuration: what the default config kept of the
				// environment, which nothing decodes into.
			case !f.IsExported() || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array ||
				ft.Kind() == reflect.Map || ft.Kind() == reflect.Interface:
				if holdsNumber(f.Type, map[reflect.Type]bool{}) {
					problems = append(problems, fmt.Sprintf("field %s (%s) holds a number RawChecks cannot name: check it another way", key, f.Type))
				}
			case ft == reflect.TypeFor[time.Duration]():
				if key != stallthreshold.Key {
					durations = append(durations, key)
				}
			case isInteger(ft):
				counts = append(counts, key)
			case ft.Kind() == reflect.Struct:
				if strings.Contains(opts, "squash") {
					walk(ft, prefix)
				} else {
					walk(ft, key+confmap.KeyDelimiter)
				}
			}
		}
	}
	walk(reflect.TypeOf(cfg).Elem(), "")
	if !slices.Equal(sorted(counts), sorted(checks.Counts)) {
		problems = append(problems, fmt.Sprintf("the config's counts are %q, the raw checks' %q", counts, checks.Counts))
	}
	if !slices.Equal(sorted(durations), sorted(checks.Durations)) {
		problems = append(problems, fmt.Sprintf("the config's durations are %q, the raw checks' %q", durations, checks.Durations))
	}
	return problems
}

// isInteger reports whether rt is an integer type: what the decoder cuts
// a fraction into, and a time.Duration is one.
func isInteger(rt reflect.Type) bool { return rt.Kind() >= reflect.Int && rt.Kind() <= reflect.Uint64 }

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// holdsNumber reports whether a value of type rt can hold an integer (a
// duration is one), or may, behind an interface.
func holdsNumber(rt reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[rt] {
		return false
	}
	seen[rt] = true
	switch rt.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsNumber(rt.Elem(), seen)
	case reflect.Map:
		return holdsNumber(rt.Key(), seen) || holdsNumber(rt.Elem(), seen)
	case reflect.Struct:
		for f := range rt.Fields() {
			if holdsNumber(f.Type, seen) {
				return true
			}
		}
		return false
	default:
		return isInteger(rt)
	}
}
