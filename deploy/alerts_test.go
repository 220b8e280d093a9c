package deploy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamwatch/streamwatch/internal/testbed/promseries"
	"github.com/streamwatch/streamwatch/internal/testbed/stack"
)

// rule is an alerting rule (Alert set) or a recording rule (Record set)
// of alerts.yml.
type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// readRules reads alerts.yml's rules, every group's in order.
func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return rules
}

// promtool is Prometheus's own checker (Debian's prometheus package has
// it; .ci/run installs it): it parses every expression and template, and
// `test rules` evaluates the rules on alerts_test.yml's series in virtual
// time.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (apt-get install prometheus)")
	}
	return p
}

func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"check", "config", "prometheus.yml"},
		{"check", "config", "prometheus-compose.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The collector's own telemetry that alerts.yml reads, with the labels the
// collector serves them with (Prometheus adds job and instance): the
// streamwatch components' from their metadata.yaml, the core components'
// as the collector of this release serves them (its receiverhelper's and
// exporterhelper's metadata.yaml; the component label is added when the
// collector instruments them).
func selfTelemetry(t *testing.T, s promseries.Series) {
	t.Helper()
	for _, path := range []string{
		filepath.Join("..", "connector", "streamwatchconnector", "metadata.yaml"),
		filepath.Join("..", "processor", "streamwatchprocessor", "metadata.yaml"),
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Telemetry struct {
				Metrics map[string]struct {
					Attributes []string `yaml:"attributes"`
				} `yaml:"metrics"`
			} `yaml:"telemetry"`
		}
		if err := yaml.Unmarshal(b, &md); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(md.Telemetry.Metrics) == 0 {
			t.Fatalf("%s declares no telemetry", path)
		}
		for name, m := range md.Telemetry.Metrics {
			// Served as named: a counter gets no _total.
			s.Add("otelcol_"+name, m.Attributes...)
		}
	}
	s.Add("otelcol_receiver_refused_spans", "receiver", "transport")
	s.Add("otelcol_exporter_send_failed_metric_points", "exporter")
	s.Add("up")
}

// Every rule selects series that exist, matches them on values they take,
// matches and groups by labels they carry, groups every term alike, and
// its annotations name only labels its result keeps: a misspelt metric,
// label or value is no error to Prometheus — the alert just never fires —
// two terms grouped apart match nothing, and a template naming a label
// the expression aggregated away renders empty. An alert may read a
// recorded series, which carries the labels its rule groups by.
func TestAlertRulesSelectExistingSeries(t *testing.T) {
	series := promseries.Emitted(t)
	selfTelemetry(t, series)
	labelRE := regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	rules := readRules(t)
	for _, r := range rules {
		if r.Record == "" {
			continue
		}
		lists := promseries.Groupings(r.Expr)
		if len(lists) == 0 {
			t.Fatalf("%s: no sum by (…)", r.Record)
		}
		series.Add(r.Record, strings.Split(lists[0], ",")...)
	}
	recordedRE := regexp.MustCompile(`(?m)^\s*(?:and\s+)?([a-z_]+:[a-z0-9_]+:[a-z0-9_]+)\s`)
	for _, r := range rules {
		name := r.Alert + r.Record
		for _, p := range series.Problems(r.Expr, "job", "instance") {
			t.Errorf("%s: %s", name, p)
		}
		lists := promseries.Groupings(r.Expr)
		if len(lists) == 0 {
			t.Errorf("%s: no sum by (…): its result would carry every label of the series", name)
			continue
		}
		for _, l := range lists[1:] {
			if l != lists[0] {
				t.Errorf("%s: groups by (%s) and by (%s): the terms would not match", name, lists[0], l)
			}
		}
		// A recorded series an alert reads exists, and carries the
		// labels the alert's other terms are grouped by.
		for _, m := range recordedRE.FindAllStringSubmatch(r.Expr, -1) {
			if len(series[m[1]]) == 0 {
				t.Errorf("%s: reads %s, which no rule records", name, m[1])
				continue
			}
			var labels []string
			for l := range series[m[1]][0] {
				labels = append(labels, l)
			}
			slices.Sort(labels)
			want := strings.Split(lists[0], ",")
			slices.Sort(want)
			if !slices.Equal(labels, want) {
				t.Errorf("%s: reads %s, grouped by %v, with terms grouped by (%s)", name, m[1], labels, lists[0])
			}
		}
		if r.Record != "" {
			continue
		}
		kept := strings.Split(lists[0], ",")
		for _, a := range []string{"summary", "description"} {
			text := r.Annotations[a]
			if text == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
			for _, m := range labelRE.FindAllStringSubmatch(text, -1) {
				if !slices.Contains(kept, m[1]) {
					t.Errorf("%s: %s names $labels.%s, which by (%s) drops", r.Alert, a, m[1], lists[0])
				}
			}
		}
		if sev := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, sev) {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, sev)
		}
	}
}

// Every selector of a connector metric keeps the overflow series out: past
// max_series they carry no service, model or route, and one metric's
// overflow divided by another's would raise alerts on nothing.
func TestAlertRulesLeaveOutOverflow(t *testing.T) {
	selRE := regexp.MustCompile(`\b((?:streamwatch|gen_ai)_[a-z_]+)(\{[^}]*\}|\[)`)
	for _, r := range readRules(t) {
		for _, m := range selRE.FindAllStringSubmatch(r.Expr, -1) {
			if !strings.Contains(m[2], `otel_metric_overflow=""`) {
				t.Errorf("%s: %s%s does not leave out the overflow series (otel_metric_overflow=\"\")", r.Alert+r.Record, m[1], m[2])
			}
		}
	}
}

// docs/telemetry.md's alert table lists exactly the rules of alerts.yml.
func TestAlertRulesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "telemetry.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(b, []byte("\n## Alerts\n"))
	if !ok {
		t.Fatal("docs/telemetry.md has no ## Alerts section")
	}
	section, _, _ = bytes.Cut(section, []byte("\n## "))
	var documented, rules []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(Streamwatch[A-Za-z]+)`").FindAllSubmatch(section, -1) {
		documented = append(documented, string(m[1]))
	}
	for _, r := range readRules(t) {
		if r.Alert != "" {
			rules = append(rules, r.Alert)
		}
	}
	slices.Sort(documented)
	slices.Sort(rules)
	if !slices.Equal(documented, rules) {
		t.Errorf("docs/telemetry.md documents alerts %v, alerts.yml has %v", documented, rules)
	}
}

// prometheus.sh, run with the real Prometheus, loads every rule of
// alerts.yml from the copy it writes beside its config: the path in
// rule_files is relative to that copy, and a rule file Prometheus cannot
// load stops it at start.
func TestPrometheusScriptLoadsAlerts(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Skip("prometheus not on PATH (apt-get install prometheus)")
	}
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := stack.Addr(port)
	p, err := stack.Start(t.Context(), dir, "prometheus", "sh", []string{"prometheus.sh", "--log.level=warn"},
		[]string{"PROMETHEUS_LISTEN=" + addr, "PROMETHEUS_DATA=" + filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if err := p.WaitHTTP(t.Context(), "http://"+addr+"/-/ready", time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
	resp, err := http.Get("http://" + addr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			loaded = append(loaded, r.Name)
			if r.LastError != "" {
				t.Errorf("rule %s: %s", r.Name, r.LastError)
			}
		}
	}
	var want []string
	for _, r := range readRules(t) {
		want = append(want, r.Alert+r.Record)
	}
	// The API lists groups by name, not in the file's order.
	slices.Sort(loaded)
	slices.Sort(want)
	if !slices.Equal(loaded, want) {
		t.Errorf("Prometheus loaded %v, alerts.yml has %v", loaded, want)
	}
}
