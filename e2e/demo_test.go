//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/streamwatch/streamwatch/semconv"
)

// TestDemoAgainstGateway runs the demo as docs/scale.md tells an operator
// to check a gateway replica: `demo -otlp` sends the demo's workload to a
// running deploy/gateway.yaml, which pushes by remote write into a real
// Prometheus, and prints the PromQL that reads the counts back with the
// values hedgeprobe counted. Every printed query, run on that Prometheus,
// must return exactly its printed value.
func TestDemoAgainstGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	prom, replicas := startReplicas(ctx, t, []string{"gateway-demo"})

	root, dir := repoRoot(t), t.TempDir()
	for _, c := range []string{"demo", "fakellm"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, c), "./cmd/"+c)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", c, err, out)
		}
	}
	demo := exec.CommandContext(ctx, filepath.Join(dir, "demo"), "-otlp", replicas[0].OTLPHTTP, "-fakellm", filepath.Join(dir, "fakellm"))
	demo.Dir = root
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("demo -otlp: %v\n%s", err, out)
	}
	_, report, ok := strings.Cut(string(out), "What the collector should count")
	if !ok {
		t.Fatalf("demo printed no queries:\n%s", out)
	}
	// "  <query>  <value>": the query holds single spaces, the columns
	// are two or more apart.
	line := regexp.MustCompile(`(?m)^  (sum .*?\))\s{2,}(\S.*)$`)
	queries := line.FindAllStringSubmatch(report, -1)
	if len(queries) != 4 {
		t.Fatalf("%d queries, want 4:\n%s", len(queries), report)
	}

	calls := semconv.PromName(semconv.MetricCalls, semconv.UnitCall, true)
	waitFor(ctx, t, prom, `sum(`+calls+`{job="streamwatch-demo"})`, 31)
	settle(ctx, t, prom, replicaInterval)
	for _, q := range queries {
		expr, want := q[1], q[2]
		v, err := prom.Query(ctx, expr)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if by := regexp.MustCompile(`^sum by \((\w+)\)`).FindStringSubmatch(expr); by != nil {
			var parts []string
			for _, s := range v {
				parts = append(parts, string(s.Metric[model.LabelName(by[1])])+"="+strconv.FormatFloat(float64(s.Value), 'f', -1, 64))
			}
			slices.Sort(parts)
			got = strings.Join(parts, " ")
		} else if len(v) == 1 {
			got = strconv.FormatFloat(float64(v[0].Value), 'f', -1, 64)
		}
		if got != want {
			t.Errorf("%s = %q, the demo printed %q", expr, got, want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out)
	}
}
