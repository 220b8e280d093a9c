//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedConfigsValidate runs the built collector's own `validate` on
// every configuration deploy/ ships, as the compose stack merges them:
// collector-tempo.yaml is only ever used over collector.yaml, and is the
// one no other test starts. A configuration the collector refuses (a
// dimension the Prometheus exporter would drop) must fail, so that a pass
// means something.
func TestShippedConfigsValidate(t *testing.T) {
	root := repoRoot(t)
	collectorBin, _ := stackBinaries(t, root)
	deploy := filepath.Join(root, "deploy")
	validate := func(configs ...string) (string, error) {
		args := []string{"validate"}
		for _, c := range configs {
			args = append(args, "--config", c)
		}
		out, err := exec.Command(collectorBin, args...).CombinedOutput()
		return string(out), err
	}
	for _, set := range [][]string{
		{"collector.yaml"},
		{"collector.yaml", "collector-tempo.yaml"},
		{"gateway.yaml"},
	} {
		var paths []string
		for _, c := range set {
			paths = append(paths, filepath.Join(deploy, c))
		}
		if out, err := validate(paths...); err != nil {
			t.Errorf("%v: %v\n%s", set, err, out)
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("connectors:\n  streamwatch:\n    dimensions: [\"1x\", \"key_1x\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := validate(filepath.Join(deploy, "collector.yaml"), bad)
	if err == nil || !strings.Contains(out, `dimensions[1] "key_1x" would be the Prometheus label key_1x, as "1x" is`) {
		t.Errorf("a dimension the exporter would merge: err %v\n%s", err, out)
	}
}
