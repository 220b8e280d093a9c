// Package deploy holds no Go code: its tests keep the shipped configuration
// files honest — every environment variable the collector config reads is
// documented in it, and the Prometheus launcher scrapes the address the
// collector exports on.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The header comment of collector.yaml lists exactly the variables its
// ${env:…} expansions read (a variable named in the comment that the config
// does not read — STREAMWATCH_TELEMETRY once — sends users to a knob that
// does nothing).
func TestCollectorConfigDocumentsItsVariables(t *testing.T) {
	b, err := os.ReadFile("collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var read, documented []string
	for _, m := range regexp.MustCompile(`\$\{env:([A-Z0-9_]+)`).FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(read, m[1]) {
			read = append(read, m[1])
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^#\s+([A-Z][A-Z0-9_]+)\s`).FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(read)
	slices.Sort(documented)
	if !slices.Equal(read, documented) {
		t.Errorf("collector.yaml reads %v but its header documents %v", read, documented)
	}
}

type promConfig struct {
	ScrapeConfigs []struct {
		HonorLabels   bool `yaml:"honor_labels"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// readPromConfig reads a Prometheus configuration file.
func readPromConfig(t *testing.T, path string) promConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c promConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func targets(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, sc := range readPromConfig(t, path).ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			out = append(out, st.Targets...)
		}
	}
	return out
}

// prometheus.yml scrapes the collector's default exporter address.
func TestPrometheusConfigScrapesCollectorDefault(t *testing.T) {
	b, err := os.ReadFile("collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$\{env:STREAMWATCH_PROMETHEUS:-([^}]+)\}`).FindSubmatch(b)
	if m == nil {
		t.Fatal("collector.yaml does not read STREAMWATCH_PROMETHEUS")
	}
	if got := targets(t, "prometheus.yml"); !slices.Equal(got, []string{string(m[1])}) {
		t.Errorf("prometheus.yml scrapes %v, the collector exports on %s", got, m[1])
	}
}

// Both scrape configurations keep the exporter's job and instance labels
// (the sender's service.name, the replica's service.instance.id), as the
// connector's README and docs/telemetry.md say; e2e checks the labels a
// scrape with honor_labels gets.
func TestPrometheusConfigsHonorLabels(t *testing.T) {
	for _, path := range []string{"prometheus.yml", "prometheus-compose.yml"} {
		for i, sc := range readPromConfig(t, path).ScrapeConfigs {
			if !sc.HonorLabels {
				t.Errorf("%s: scrape config %d has no honor_labels: true; job and instance would become exported_job and exported_instance", path, i)
			}
		}
	}
}

// runScript runs prometheus.sh with a stand-in prometheus binary that
// records its arguments, and returns the config it was given, its
// arguments and the script's combined output.
func runScript(t *testing.T, env ...string) (cfg string, args []string, out string, err error) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "prometheus")
	argsFile := filepath.Join(dir, "args")
	script := "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > " + argsFile + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command("sh", "prometheus.sh", "--log.level=warn")
	cmd.Env = append(os.Environ(), append([]string{"PROMETHEUS=" + fake, "PROMETHEUS_DATA=" + data}, env...)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", nil, string(b), err
	}
	a, rerr := os.ReadFile(argsFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return filepath.Join(data, "prometheus.yml"), strings.Fields(string(a)), string(b), nil
}

// prometheus.sh scrapes the address STREAMWATCH_PROMETHEUS gives the
// collector, turns exemplar storage on and passes extra arguments through.
func TestPrometheusScriptHonoursTarget(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", "127.0.0.1:8889"},
		{"STREAMWATCH_PROMETHEUS=127.0.0.1:19999", "127.0.0.1:19999"},
		{"STREAMWATCH_PROMETHEUS=[::1]:8889", "[::1]:8889"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			env := []string{"STREAMWATCH_PROMETHEUS="}
			if tc.env != "" {
				env = []string{tc.env}
			}
			cfg, args, out, err := runScript(t, env...)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := targets(t, cfg); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("targets %v, want [%s]", got, tc.want)
			}
			for _, want := range []string{"--config.file=" + cfg, "--enable-feature=exemplar-storage", "--web.listen-address=127.0.0.1:9090", "--log.level=warn"} {
				if !slices.Contains(args, want) {
					t.Errorf("prometheus args %v lack %s", args, want)
				}
			}
		})
	}
}

// A value that is not host:port is refused with a message naming the
// variable, before anything runs.
func TestPrometheusScriptRejectsBadTarget(t *testing.T) {
	_, _, out, err := runScript(t, `STREAMWATCH_PROMETHEUS=a/b"`)
	if err == nil {
		t.Fatal("accepted a/b\"")
	}
	if !strings.Contains(out, `STREAMWATCH_PROMETHEUS must be host:port, got "a/b""`) {
		t.Errorf("message %q", out)
	}
}
