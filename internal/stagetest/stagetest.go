// Package stagetest runs the golden stage directories of both streamwatch
// collector components, so the two share one layout and one format:
//
//	testdata/<scenario>/
//	  config.yaml     optional component config, merged over the defaults
//	  input.yaml      input traces (OTLP JSON as YAML, read by pkg/golden)
//	  expected.yaml   expected output: traces (processor) or metrics (connector)
//	  telemetry.yaml  optional: the component's own counters after the
//	                  scenario, "name{attribute=value,…}": n (absent: none)
//
// A new scenario is a new directory, not new Go code.
package stagetest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"
)

// Files of a stage directory.
const (
	Config    = "config.yaml"
	Input     = "input.yaml"
	Expected  = "expected.yaml"
	Telemetry = "telemetry.yaml"
)

// Dirs returns every directory under testdata that holds an input.yaml,
// and fails the test when there is none.
func Dirs(t *testing.T) []string {
	t.Helper()
	ins, err := filepath.Glob(filepath.Join("testdata", "*", Input))
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) == 0 {
		t.Fatal("no stage under testdata/")
	}
	dirs := make([]string, len(ins))
	for i, in := range ins {
		dirs[i] = filepath.Dir(in)
	}
	return dirs
}

// LoadConfig merges dir/config.yaml, when present, into cfg and validates
// the result.
func LoadConfig(t *testing.T, dir string, cfg component.Config) {
	t.Helper()
	path := filepath.Join(dir, Config)
	if _, err := os.Stat(path); err == nil {
		cm, err := confmaptest.LoadConf(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := cm.Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
}

// Counters flattens the int64 sums a component recorded through tel to
// "name{attribute=value,…}" → value, attributes sorted.
func Counters(t *testing.T, tel *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				var kv []string
				for _, a := range dp.Attributes.ToSlice() {
					kv = append(kv, string(a.Key)+"="+a.Value.String())
				}
				sort.Strings(kv)
				out[m.Name+"{"+strings.Join(kv, ",")+"}"] += dp.Value
			}
		}
	}
	return out
}

// CheckCounters compares got with dir/telemetry.yaml, after rewriting the
// file from got when update is set (removing it when got is empty).
func CheckCounters(t *testing.T, dir string, got map[string]int64, update bool) {
	t.Helper()
	path := filepath.Join(dir, Telemetry)
	if update {
		writeCounters(t, path, got)
	}
	want := map[string]int64{}
	b, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		t.Fatal(err)
	default:
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if !maps.Equal(want, got) {
		t.Errorf("own telemetry of %s:\n got %v\nwant %v", dir, got, want)
	}
}

func writeCounters(t *testing.T, path string, m map[string]int64) {
	t.Helper()
	if len(m) == 0 {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# The component's own telemetry after the scenario: counter{attributes}: value.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%q: %d\n", k, m[k])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}
