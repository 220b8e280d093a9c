//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// validate runs the collector's own `validate` on configs, merged in
// order as the collector merges several --config, and then checks that
// each configuration names its components as the collector lists them.
func validate(collectorBin string, configs ...string) (string, error) {
	args := []string{"validate"}
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	cmd := exec.Command(collectorBin, args...)
	// docs/scale.md's stable instance id reads POD_NAME, which has no default.
	cmd.Env = append(os.Environ(), "POD_NAME=streamwatch-gateway-0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), err
	}
	for _, c := range configs {
		if err := componentsNamed(collectorBin, c); err != nil {
			return string(out), err
		}
	}
	return string(out), nil
}

// componentKinds are the sections of a configuration that name components.
var componentKinds = []string{"receivers", "processors", "exporters", "connectors", "extensions"}

// listed caches, per binary, the component names its `components` command
// lists, by kind.
var listed sync.Map // collector binary → map[kind]map[name]bool

// componentsNamed fails when config names a component by a type the
// collector does not list: `validate` takes a deprecated alias (otlp for
// otlp_grpc) in silence, and only a start logs a warning; a later release
// drops the alias and the configuration with it.
func componentsNamed(collectorBin, config string) error {
	names, ok := listed.Load(collectorBin)
	if !ok {
		out, err := exec.Command(collectorBin, "components").Output()
		if err != nil {
			return fmt.Errorf("%s components: %w", collectorBin, err)
		}
		var doc map[string]yaml.Node // buildinfo is a mapping, the kinds lists
		if err := yaml.Unmarshal(out, &doc); err != nil {
			return fmt.Errorf("%s components: %w", collectorBin, err)
		}
		byKind := map[string]map[string]bool{}
		for _, kind := range componentKinds {
			var list []struct{ Name string }
			if n, ok := doc[kind]; ok {
				if err := n.Decode(&list); err != nil {
					return fmt.Errorf("%s components: %s: %w", collectorBin, kind, err)
				}
			}
			byKind[kind] = map[string]bool{}
			for _, c := range list {
				byKind[kind][c.Name] = true
			}
		}
		names, _ = listed.LoadOrStore(collectorBin, byKind)
	}
	text, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(text, &cfg); err != nil {
		return fmt.Errorf("%s: %w", config, err)
	}
	for _, kind := range componentKinds {
		section, _ := cfg[kind].(map[string]any)
		for id := range section {
			typ, _, _ := strings.Cut(id, "/")
			if !names.(map[string]map[string]bool)[kind][typ] {
				return fmt.Errorf("%s: %s %q: the collector lists no %s named %q (a deprecated alias?)", config, kind, id, kind, typ)
			}
		}
	}
	return nil
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
	"docs/scale.md#2": "skip: a Kubernetes manifest (deploy/kubernetes_test.go checks it against gateway.yaml)",
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

// TestUnsetInstanceIDRefused starts the built collector with docs/scale.md's
// stable instance id over deploy/gateway.yaml and POD_NAME unset: the
// collector turns the unset variable into the id "<nil>", which every
// replica would share, so their pushed series would merge. It must not
// start, and must say why. (validate cannot see it: the id only reaches
// the connector when the collector builds its pipelines.)
func TestUnsetInstanceIDRefused(t *testing.T) {
	root := repoRoot(t)
	collectorBin, _ := stackBinaries(t, root)
	id := filepath.Join(t.TempDir(), "instance.yaml")
	snippet := "service:\n  telemetry:\n    resource:\n      attributes:\n        - name: service.instance.id\n          value: ${env:POD_NAME}\n"
	if err := os.WriteFile(id, []byte(snippet), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, collectorBin, "--config", filepath.Join(root, "deploy", "gateway.yaml"), "--config", id)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POD_NAME=") {
			env = append(env, kv)
		}
	}
	// Should it start after all, it binds nothing a parallel test uses.
	cmd.Env = append(env, "STREAMWATCH_OTLP_GRPC=127.0.0.1:0", "STREAMWATCH_OTLP_HTTP=127.0.0.1:0",
		"STREAMWATCH_HEALTH=127.0.0.1:0", "STREAMWATCH_TELEMETRY_PORT=0",
		"STREAMWATCH_REMOTE_WRITE=http://127.0.0.1:1/api/v1/write")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the collector started and ran for 30 s with service.instance.id unset\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "streamwatch connector: the collector's service.instance.id is") ||
		!strings.Contains(string(out), "replicas' metrics would merge") {
		t.Errorf("want a failed start naming the shared id; err %v\n%s", err, out)
	}
}
