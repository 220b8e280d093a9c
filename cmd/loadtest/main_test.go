package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRoundRatios(t *testing.T) {
	med, lo, hi := roundRatios([]float64{80, 90, 45, 100}, []float64{100, 100, 50, 100})
	if med != 0.9 || lo != 0.8 || hi != 1 {
		t.Errorf("even: got %v (%v–%v), want 0.9 (0.8–1)", med, lo, hi)
	}
	med, lo, hi = roundRatios([]float64{70, 90, 80}, []float64{100, 100, 100, 100})
	if med != 0.8 || lo != 0.7 || hi != 0.9 {
		t.Errorf("odd, ref longer: got %v (%v–%v), want 0.8 (0.7–0.9)", med, lo, hi)
	}
	if med, _, _ := roundRatios([]float64{5}, []float64{0}); med != 0 {
		t.Errorf("a reference round with no throughput must be skipped, got %v", med)
	}
}

func TestSplitPipeline(t *testing.T) {
	for in, want := range map[string][2]string{
		"shipped":                  {"shipped", "bin/default"},
		"shipped@/tmp/old/otelcol": {"shipped", "/tmp/old/otelcol"},
	} {
		name, bin := splitPipeline(in, "bin/default")
		if name != want[0] || bin != want[1] {
			t.Errorf("%q: got %q, %q; want %q, %q", in, name, bin, want[0], want[1])
		}
	}
}

// TestPipelineConfigsExist: every named pipeline's configuration files are
// in the repository, so no pipeline fails only when a long run reaches it.
func TestPipelineConfigsExist(t *testing.T) {
	for name, files := range pipelines {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join("..", "..", f)); err != nil {
				t.Errorf("pipeline %s: %v", name, err)
			}
		}
	}
}

func TestParseCPULine(t *testing.T) {
	got, err := parseCPULine("cpu  44039 7 9836 393732 161 0 421 36 5 0\n")
	if err != nil {
		t.Fatal(err)
	}
	// guest (5) is already counted in user: only the first eight fields add up.
	if want := (cpuTimes{total: 44039 + 7 + 9836 + 393732 + 161 + 421 + 36, idle: 393732 + 161}); got != want {
		t.Errorf("parseCPULine = %+v, want %+v", got, want)
	}
	if share := got.sub(cpuTimes{}).idleShare(); share < 0.87 || share > 0.88 {
		t.Errorf("idle share %.3f, want 0.87–0.88", share)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5", "cpu 1 2 x 4 5", "cpu 1 2", "cpu 0 0 0 0 0"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("parseCPULine(%q) = nil error", bad)
		}
	}
	if _, err := machineCPU(); err != nil {
		t.Errorf("machineCPU on this machine: %v", err)
	}
}

// The pipelines' names come from a map; -h and the error for an unknown
// name list them sorted, not in the map's order of the day.
func TestKnownSorted(t *testing.T) {
	for range 5 {
		if k := known(); len(k) != len(pipelines) || !slices.IsSorted(k) {
			t.Fatalf("known() = %v", k)
		}
	}
}

// sentPoints adds the data points every exporter reports sent, and says
// so when the collector reports none.
func TestSentPoints(t *testing.T) {
	for body, want := range map[string]string{
		"# TYPE otelcol_exporter_sent_metric_points_total counter\n" +
			`otelcol_exporter_sent_metric_points_total{exporter="prometheusremotewrite",otel_scope_name="x"} 14010` + "\n" +
			`otelcol_exporter_sent_metric_points_total{exporter="debug"} 5` + "\n" +
			`otelcol_exporter_send_failed_metric_points_total{exporter="prometheusremotewrite"} 7` + "\n": "14015",
		"otelcol_process_uptime 3\n": "no otelcol_exporter_sent_metric_points",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		got, err := sentPoints(t.Context(), strings.TrimPrefix(srv.URL, "http://"))
		srv.Close()
		if s := fmt.Sprint(got); err == nil && s != want || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("sentPoints = %v, %v; want %s", got, err, want)
		}
	}
}
