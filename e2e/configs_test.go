//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// validate runs the collector's own `validate` on configs, merged in
// order as the collector merges several --config.
func validate(collectorBin string, configs ...string) (string, error) {
	args := []string{"validate"}
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	cmd := exec.Command(collectorBin, args...)
	// docs/scale.md's stable instance id reads POD_NAME, which has no default.
	cmd.Env = append(os.Environ(), "POD_NAME=streamwatch-gateway-0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

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
	for _, set := range [][]string{
		{"collector.yaml"},
		{"collector.yaml", "collector-tempo.yaml"},
		{"gateway.yaml"},
	} {
		var paths []string
		for _, c := range set {
			paths = append(paths, filepath.Join(deploy, c))
		}
		if out, err := validate(collectorBin, paths...); err != nil {
			t.Errorf("%v: %v\n%s", set, err, out)
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("connectors:\n  streamwatch:\n    dimensions: [\"1x\", \"key_1x\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := validate(collectorBin, filepath.Join(deploy, "collector.yaml"), bad)
	if err == nil || !strings.Contains(out, `dimensions[1] "key_1x" would be the Prometheus label key_1x, as "1x" is`) {
		t.Errorf("a dimension the exporter would merge: err %v\n%s", err, out)
	}
}

// docConfigs says how each ```yaml block of the Markdown files that hold
// collector configurations is validated: alone (a whole configuration),
// over a file of deploy/ (a fragment the text tells the reader to add), or
// not, with the reason. A block not listed fails the test.
var docConfigs = map[string]string{
	"processor/streamwatchprocessor/README.md#1": "",
	"processor/streamwatchprocessor/README.md#2": "skip: a span, not a configuration",
	"processor/streamwatchprocessor/README.md#3": "skip: a span, not a configuration",
	"processor/streamwatchprocessor/README.md#4": "skip: a span's figures, not a configuration",
	"connector/streamwatchconnector/README.md#1": "",
	"docs/scale.md#1": "gateway.yaml",
	"docs/scale.md#2": "skip: a Kubernetes manifest",
	"docs/scale.md#3": "gateway.yaml",
}

var yamlBlock = regexp.MustCompile("(?m)^```yaml\n((?s:.*?))^```\n")

// TestDocConfigsValidate runs the built collector's `validate` on the
// collector configurations the READMEs and docs/scale.md show, so an
// example a reader copies is one the collector takes.
func TestDocConfigsValidate(t *testing.T) {
	root := repoRoot(t)
	collectorBin, _ := stackBinaries(t, root)
	dir := t.TempDir()
	seen := map[string]bool{}
	for _, doc := range []string{"processor/streamwatchprocessor/README.md", "connector/streamwatchconnector/README.md", "docs/scale.md"} {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllSubmatch(text, -1) {
			id := fmt.Sprintf("%s#%d", doc, i+1)
			seen[id] = true
			how, ok := docConfigs[id]
			switch {
			case !ok:
				t.Errorf("%s: a yaml block the test does not know; add it to docConfigs", id)
				continue
			case strings.HasPrefix(how, "skip:"):
				continue
			}
			file := filepath.Join(dir, fmt.Sprintf("block%d.yaml", len(seen)))
			if err := os.WriteFile(file, m[1], 0o600); err != nil {
				t.Fatal(err)
			}
			configs := []string{file}
			if how != "" {
				configs = []string{filepath.Join(root, "deploy", how), file}
			}
			if out, err := validate(collectorBin, configs...); err != nil {
				t.Errorf("%s (over %q): %v\n%s", id, how, err, out)
			}
		}
	}
	for id := range docConfigs {
		if !seen[id] {
			t.Errorf("%s: listed in docConfigs but no such yaml block", id)
		}
	}
}
