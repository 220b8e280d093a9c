//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPipelinesValidate runs the built collector's `validate` on every
// pipeline the load test knows, merged as the load test merges it, so an
// opt-in pipeline that rots fails `make e2e` instead of a long run.
func TestPipelinesValidate(t *testing.T) {
	bin := os.Getenv("STREAMWATCH_COLLECTOR")
	if bin == "" {
		bin = filepath.Join("..", "..", "bin", "otelcol-streamwatch")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("collector binary: %v (run make collector, or set STREAMWATCH_COLLECTOR)", err)
	}
	for name, files := range pipelines {
		args := []string{"validate"}
		for _, f := range files {
			args = append(args, "--config", filepath.Join("..", "..", f))
		}
		cmd := exec.Command(bin, args...)
		// The variables the load test sets for each collector it starts.
		cmd.Env = append(os.Environ(), "STREAMWATCH_HEALTH=127.0.0.1:1", "STREAMWATCH_OTLP_GRPC=127.0.0.1:2",
			"STREAMWATCH_TELEMETRY_HOST=127.0.0.1", "STREAMWATCH_TELEMETRY_PORT=3",
			"STREAMWATCH_REMOTE_WRITE=http://127.0.0.1:4/api/v1/write", "STREAMWATCH_TRACES_SINK=http://127.0.0.1:4")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("pipeline %s: %v\n%s", name, err, out)
		}
	}
}
