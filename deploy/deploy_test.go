// Package deploy holds no Go code: its tests keep the shipped configuration
// files honest — every environment variable the collector config reads is
// documented in it, the Prometheus launcher scrapes the address the
// collector exports on, the alerting rules read series that exist, the
// compose stack's files agree with each other, and docs/scale.md's
// Kubernetes sketch runs gateway.yaml as it reads.
package deploy

import (
	"bytes"
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
		JobName       string `yaml:"job_name"`
		HonorLabels   bool   `yaml:"honor_labels"`
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

// The scrape jobs of the shipped Prometheus configurations: the
// connector's metrics, and the collector's own.
const (
	exporterJob  = "otelcol-streamwatch"
	telemetryJob = "otelcol-streamwatch-self"
)

// targets returns the targets of path's scrape job named job.
func targets(t *testing.T, path, job string) []string {
	t.Helper()
	var out []string
	for _, sc := range readPromConfig(t, path).ScrapeConfigs {
		if sc.JobName != job {
			continue
		}
		for _, st := range sc.StaticConfigs {
			out = append(out, st.Targets...)
		}
	}
	return out
}

// prometheus.yml scrapes the collector's default exporter address, and its
// own metrics at their default address.
func TestPrometheusConfigScrapesCollectorDefault(t *testing.T) {
	b, err := os.ReadFile("collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) string {
		m := regexp.MustCompile(`\$\{env:` + name + `:-([^}]+)\}`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("collector.yaml does not read %s", name)
		}
		return string(m[1])
	}
	if got, want := targets(t, "prometheus.yml", exporterJob), def("STREAMWATCH_PROMETHEUS"); !slices.Equal(got, []string{want}) {
		t.Errorf("prometheus.yml scrapes %v, the collector exports on %s", got, want)
	}
	self := def("STREAMWATCH_TELEMETRY_HOST") + ":" + def("STREAMWATCH_TELEMETRY_PORT")
	if got := targets(t, "prometheus.yml", telemetryJob); !slices.Equal(got, []string{self}) {
		t.Errorf("prometheus.yml scrapes the collector's own metrics at %v, it serves them on %s", got, self)
	}
}

// Both scrape configurations keep the exporter's job and instance labels
// (the sender's service.name, the replica's service.instance.id), as the
// connector's README and docs/telemetry.md say; e2e checks the labels a
// scrape with honor_labels gets. The collector's own metrics have none of
// their own to keep.
func TestPrometheusConfigsHonorLabels(t *testing.T) {
	for _, path := range []string{"prometheus.yml", "prometheus-compose.yml"} {
		for i, sc := range readPromConfig(t, path).ScrapeConfigs {
			if sc.JobName == exporterJob && !sc.HonorLabels {
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
	return runScriptIn(t, ".", env...)
}

// runScriptIn is runScript on the prometheus.sh, prometheus.yml and
// alerts.yml of dir.
func runScriptIn(t *testing.T, scriptDir string, env ...string) (cfg string, args []string, out string, err error) {
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
	cmd.Dir = scriptDir
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

// prometheus.sh scrapes the addresses STREAMWATCH_PROMETHEUS and
// STREAMWATCH_TELEMETRY_HOST/PORT give the collector, loads the alerting
// rules, turns exemplar storage on and passes extra arguments through.
func TestPrometheusScriptHonoursTarget(t *testing.T) {
	for _, tc := range []struct {
		env        []string
		want, self string
	}{
		{nil, "127.0.0.1:8889", "127.0.0.1:8888"},
		{[]string{"STREAMWATCH_PROMETHEUS=127.0.0.1:19999"}, "127.0.0.1:19999", "127.0.0.1:8888"},
		{[]string{"STREAMWATCH_PROMETHEUS=[::1]:8889"}, "[::1]:8889", "127.0.0.1:8888"},
		{[]string{"STREAMWATCH_TELEMETRY_PORT=18888"}, "127.0.0.1:8889", "127.0.0.1:18888"},
		{[]string{"STREAMWATCH_TELEMETRY_HOST=0.0.0.0", "STREAMWATCH_TELEMETRY_PORT=9999"}, "127.0.0.1:8889", "0.0.0.0:9999"},
		{[]string{"STREAMWATCH_TELEMETRY_HOST=::1"}, "127.0.0.1:8889", "[::1]:8888"},
		{[]string{"STREAMWATCH_TELEMETRY_HOST=[::1]"}, "127.0.0.1:8889", "[::1]:8888"},
	} {
		t.Run(tc.want+"+"+tc.self, func(t *testing.T) {
			env := append([]string{"STREAMWATCH_PROMETHEUS=", "STREAMWATCH_TELEMETRY_HOST=", "STREAMWATCH_TELEMETRY_PORT="}, tc.env...)
			cfg, args, out, err := runScript(t, env...)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := targets(t, cfg, exporterJob); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("targets %v, want [%s]", got, tc.want)
			}
			if got := targets(t, cfg, telemetryJob); !slices.Equal(got, []string{tc.self}) {
				t.Errorf("the collector's own metrics at %v, want [%s]", got, tc.self)
			}
			rules, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "alerts.yml"))
			if want, _ := os.ReadFile("alerts.yml"); err != nil || !bytes.Equal(rules, want) {
				t.Errorf("alerts.yml beside the config: %v, or not a copy of deploy/alerts.yml", err)
			}
			for _, want := range []string{"--config.file=" + cfg, "--enable-feature=exemplar-storage", "--web.listen-address=127.0.0.1:9090", "--log.level=warn"} {
				if !slices.Contains(args, want) {
					t.Errorf("prometheus args %v lack %s", args, want)
				}
			}
		})
	}
}

// STREAMWATCH_PROMETHEUS=none, for gateways that only push by remote
// write: the config copy has no exporter job, only the collector's own
// metrics, and the rules' copy differs from alerts.yml in one place,
// StreamwatchCollectorMissing asking for the own-metrics job alone, so
// that it does not fire for the exporter's job a gateway never has.
// promtool (where installed) checks both copies and evaluates the two
// liveness rules on them: quiet while the gateway's own metrics are
// scraped, down when they fail, missing when their job has no target.
func TestPrometheusScriptGateway(t *testing.T) {
	cfg, _, out, err := runScript(t, "STREAMWATCH_PROMETHEUS=none", "STREAMWATCH_TELEMETRY_HOST=", "STREAMWATCH_TELEMETRY_PORT=18888")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := jobs(t, cfg), slices.DeleteFunc(jobs(t, "prometheus.yml"), func(j string) bool { return j == exporterJob }); !slices.Equal(got, want) {
		t.Errorf("scrape jobs %v, want %v: prometheus.yml's but the exporter's", got, want)
	}
	if got := targets(t, cfg, telemetryJob); !slices.Equal(got, []string{"127.0.0.1:18888"}) {
		t.Errorf("the collector's own metrics at %v, want [127.0.0.1:18888]", got)
	}
	dir := filepath.Dir(cfg)
	rules, err := os.ReadFile(filepath.Join(dir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	const exporterAbsent = `absent(up{job="otelcol-streamwatch"}) or `
	if !bytes.Contains(orig, []byte(exporterAbsent)) || !bytes.Equal(rules, bytes.Replace(orig, []byte(exporterAbsent), nil, 1)) {
		t.Errorf("the rules' copy is not alerts.yml with StreamwatchCollectorMissing on the own-metrics job alone:\n%s", rules)
	}

	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (apt-get install prometheus)")
	}
	// up of the gateway's own metrics: scraped to 10m, failing from 11m
	// (down, firing at 13m), its target gone at 22m (missing, firing at
	// 27m).
	unit := `rule_files: [alerts.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'up{job="otelcol-streamwatch-self",instance="gw-0:8888"}'
        values: '1x10 0x10 stale'
    alert_rule_test:
      - {eval_time: 10m, alertname: StreamwatchCollectorMissing, exp_alerts: []}
      - {eval_time: 10m, alertname: StreamwatchCollectorDown, exp_alerts: []}
      - eval_time: 13m
        alertname: StreamwatchCollectorDown
        exp_alerts:
          - exp_labels: {severity: critical, job: otelcol-streamwatch-self, instance: "gw-0:8888"}
            exp_annotations:
              summary: "gw-0:8888 (otelcol-streamwatch-self) is down"
              description: >-
                Prometheus has not scraped otelcol-streamwatch-self on gw-0:8888 for 2 minutes:
                the collector is down or unreachable, and the streamwatch figures it serves or
                pushes stop.
      - {eval_time: 26m, alertname: StreamwatchCollectorMissing, exp_alerts: []}
      - eval_time: 27m
        alertname: StreamwatchCollectorMissing
        exp_alerts:
          - exp_labels: {severity: critical, job: otelcol-streamwatch-self}
            exp_annotations:
              summary: "no target of scrape job otelcol-streamwatch-self"
              description: >-
                Prometheus has had no target in job otelcol-streamwatch-self for 5 minutes: no
                collector is being scraped, so no streamwatch figure is recorded and no alert
                on them can fire. Check the collectors and the scrape configuration
                (deploy/prometheus.yml).
`
	if err := os.WriteFile(filepath.Join(dir, "gateway_test.yml"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"},
		{"test", "rules", "gateway_test.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// jobs lists the scrape jobs of a Prometheus configuration, in order.
func jobs(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, sc := range readPromConfig(t, path).ScrapeConfigs {
		out = append(out, sc.JobName)
	}
	return out
}

// STREAMWATCH_PROMETHEUS=none removes the exporter's job alone wherever
// it stands among the jobs, and refuses to start a Prometheus when an
// edited prometheus.yml or alerts.yml hides the job from its patterns.
func TestPrometheusScriptGatewayEditedFiles(t *testing.T) {
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("prometheus.sh")
	if err != nil {
		t.Fatal(err)
	}
	job := func(name, target string) string {
		return "  - job_name: " + name + "\n    static_configs:\n      - targets: [\"" + target + "\"]\n"
	}
	for _, tc := range []struct {
		name, config string
		rules        []byte
		jobs         []string // after, or none for a refusal
	}{
		{"exporter first, tempo between", "scrape_configs:\n" + job(exporterJob, "127.0.0.1:8889") + job("tempo", "127.0.0.1:3200") + job(telemetryJob, "127.0.0.1:8888"),
			rules, []string{"tempo", telemetryJob}},
		{"exporter between, tempo last", "scrape_configs:\n" + job(telemetryJob, "127.0.0.1:8888") + job(exporterJob, "127.0.0.1:8889") + job("tempo", "127.0.0.1:3200") + "rule_files: [alerts.yml]\n",
			rules, []string{telemetryJob, "tempo"}},
		{"quoted job name", "scrape_configs:\n" + strings.Replace(job(exporterJob, "127.0.0.1:8889"), exporterJob, `"`+exporterJob+`"`, 1) + job(telemetryJob, "127.0.0.1:8888"),
			rules, []string{telemetryJob}},
		{"flow style", "scrape_configs:\n  - {job_name: " + exporterJob + ", static_configs: [{targets: [\"127.0.0.1:8889\"]}]}\n" + job(telemetryJob, "127.0.0.1:8888"),
			rules, nil},
		{"rule rewritten", "scrape_configs:\n" + job(exporterJob, "127.0.0.1:8889") + job(telemetryJob, "127.0.0.1:8888"),
			bytes.Replace(rules, []byte(`absent(up{job="otelcol-streamwatch"}) or`), []byte(`absent(up{job="otelcol-streamwatch"})  or`), 1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range map[string][]byte{"prometheus.sh": script, "prometheus.yml": []byte(tc.config), "alerts.yml": tc.rules} {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, _, out, err := runScriptIn(t, dir, "STREAMWATCH_PROMETHEUS=none")
			if tc.jobs == nil {
				if err == nil || !strings.Contains(out, "could not remove the exporter's job") {
					t.Fatalf("err %v, output %q: want a refusal naming the exporter's job", err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := jobs(t, cfg); !slices.Equal(got, tc.jobs) {
				t.Errorf("scrape jobs %v, want %v", got, tc.jobs)
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

// The same for the collector's own metrics' host and port.
func TestPrometheusScriptRejectsBadTelemetryTarget(t *testing.T) {
	_, _, out, err := runScript(t, "STREAMWATCH_TELEMETRY_HOST=a/b")
	if err == nil {
		t.Fatal("accepted a/b")
	}
	if !strings.Contains(out, `STREAMWATCH_TELEMETRY_HOST:PORT must be host:port, got "a/b:8888"`) {
		t.Errorf("message %q", out)
	}
}
