// Package stallthresholdtest decodes a component config the way the
// shipped collector config does, from the environment, so both components
// can test that a bad STREAM__STALL_THRESHOLD_MS is reported by name.
package stallthresholdtest

import (
	"context"
	"os"
	"testing"

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
