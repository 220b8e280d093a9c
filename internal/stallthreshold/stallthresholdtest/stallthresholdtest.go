// Package stallthresholdtest decodes a component config the way the
// shipped collector config does, from the environment, so both components
// can test that a bad STREAM__STALL_THRESHOLD_MS is reported by name, and
// holds each component's stallthreshold.RawChecks to its config's fields.
package stallthresholdtest

import (
	"context"
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
// confmap.KeyDelimiter.
func CoversFields(t testing.TB, cfg any, checks stallthreshold.RawChecks) {
	t.Helper()
	var counts, durations []string
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for f := range rt.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			key := prefix + name
			switch {
			case f.Type == reflect.TypeFor[time.Duration]():
				if key != stallthreshold.Key {
					durations = append(durations, key)
				}
			case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Uint64:
				counts = append(counts, key)
			case f.Type.Kind() == reflect.Struct:
				if strings.Contains(opts, "squash") {
					walk(f.Type, prefix)
				} else {
					walk(f.Type, key+confmap.KeyDelimiter)
				}
			}
		}
	}
	walk(reflect.TypeOf(cfg).Elem(), "")
	if !slices.Equal(sorted(counts), sorted(checks.Counts)) {
		t.Errorf("the config's counts are %q, the raw checks' %q", counts, checks.Counts)
	}
	if !slices.Equal(sorted(durations), sorted(checks.Durations)) {
		t.Errorf("the config's durations are %q, the raw checks' %q", durations, checks.Durations)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
