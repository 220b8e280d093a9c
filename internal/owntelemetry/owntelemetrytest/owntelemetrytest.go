// Package owntelemetrytest keeps a component's hand-written internal/metadata
// in step with its metadata.yaml, as regenerating with mdatagen would.
package owntelemetrytest

import (
	"os"
	"reflect"
	"sort"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/internal/owntelemetry"
)

// metadata is the part of metadata.yaml read here.
type metadata struct {
	Telemetry struct {
		Metrics map[string]struct {
			Description string   `yaml:"description"`
			Unit        string   `yaml:"unit"`
			Attributes  []string `yaml:"attributes"`
		} `yaml:"metrics"`
	} `yaml:"telemetry"`
}

// Declared returns the counters metadata.yaml at path declares, by full
// name ("otelcol_" prepended, as mdatagen does), sorted by name.
func Declared(t *testing.T, path string) []owntelemetry.Counter {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var md metadata
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := make([]owntelemetry.Counter, 0, len(md.Telemetry.Metrics))
	for name, m := range md.Telemetry.Metrics {
		out = append(out, owntelemetry.Counter{Name: "otelcol_" + name, Description: m.Description, Unit: m.Unit, Attributes: m.Attributes})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CheckInStep fails the test unless code declares exactly the counters of
// metadata.yaml at path, with the same units, descriptions and attributes,
// each stored in a field of its own.
func CheckInStep(t *testing.T, path string, code []owntelemetry.Counter) {
	t.Helper()
	got := append([]owntelemetry.Counter(nil), code...)
	sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
	want := Declared(t, path)
	if len(got) != len(want) {
		t.Fatalf("the code declares %d counters, %s %d", len(got), path, len(want))
	}
	into := map[*metric.Int64Counter]bool{}
	for i := range want {
		if into[got[i].Into] || got[i].Into == nil {
			t.Errorf("counter %s has no field of its own", got[i].Name)
		}
		into[got[i].Into] = true
		got[i].Into = nil
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("counter %d:\n code %+v\n yaml %+v", i, got[i], want[i])
		}
	}
}
